// Shared helpers: element builders, number formatting (as profan.units words it), colours,
// the tooltip, and decoding the timeline's columns.

const SVG_NS = "http://www.w3.org/2000/svg";

// el("div", {class: "x", onclick: f}, child, "text", ...): an HTML element.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
}

// Numbers as profan.units words them (one set of rules for every output): three significant
// figures, the unit chosen after rounding (999.96 µs is "1 ms"), no exponent, a space between a
// number and its unit, and never "0%" for a share that is not zero.

// %.3g as Python prints it, written out without an exponent (1e-05 -> "0.00001").
function g3(value) {
  const rounded = Number(value.toPrecision(3));
  if (Math.abs(rounded) >= 1000) return rounded.toFixed(0);
  if (rounded !== 0 && Math.abs(rounded) < 1e-4) return rounded.toFixed(20).replace(/\.?0+$/, "");
  return String(rounded);
}

const TIME_UNITS = [[1, "s"], [1e-3, "ms"], [1e-6, "µs"], [1e-9, "ns"], [1e-12, "ps"]];
const SI_PREFIXES = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];

// 0.000123 -> "123 µs", below a picosecond "<1 ps" (profan.units.seconds)
function fmtSeconds(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value === 0) return "0 s";
  const rounded = Number(value.toPrecision(3));
  for (const [factor, unit] of TIME_UNITS) {
    if (Math.abs(rounded) >= factor) {
      return (Math.abs(rounded) >= 1000 ? value.toFixed(0) : g3(rounded / factor)) + " " + unit;
    }
  }
  return value > 0 ? "<1 ps" : ">-1 ps";
}

// 5308416000, "B" -> "5.31 GB", a bare count "5.31 G" (profan.units.si)
function fmtSI(value, unit = "") {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  const rounded = Number(value.toPrecision(3));
  for (const [factor, prefix] of SI_PREFIXES) {
    if (Math.abs(rounded) >= 1000 * factor) return (value / factor).toFixed(0) + " " + prefix + unit;
    if (Math.abs(rounded) >= factor) return g3(rounded / factor) + " " + prefix + unit;
  }
  return unit ? g3(rounded) + " " + unit : g3(rounded);
}

// 0.724 -> "72.4%"; places 0: whole percents from 10%, one place below; "<0.1%" for a small
// share that is not zero (profan.units.percent)
function fmtPercent(value, places = 1) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value !== 0 && Math.abs(value) < 0.0005) return value > 0 ? "<0.1%" : ">-0.1%";
  if (places === 0 && Math.abs(value) < 0.0995) places = 1;
  return (value * 100).toFixed(places) + "%";
}

// The page's colours live in its style sheet (--b-<bound>, --c-<category>).
const colourCache = new Map();
function cssColour(prefix, name) {
  const key = prefix + name;
  if (!colourCache.has(key)) {
    const style = getComputedStyle(document.documentElement);
    const value = style.getPropertyValue("--" + prefix + "-" + name).trim();
    colourCache.set(key, value || style.getPropertyValue("--" + prefix + "-other").trim() || "#888");
  }
  return colourCache.get(key);
}
const boundColour = (bound) => cssColour("b", bound);
const categoryColour = (category) => cssColour("c", category);

function shortSource(source) {
  if (!source) return "";
  const parts = source.split("/");
  return parts.length > 2 ? "…/" + parts.slice(-2).join("/") : source;
}

// One tooltip for the whole page.
const tip = {
  node: null,
  show(content, x, y) {
    if (!this.node) this.node = document.getElementById("tip");
    this.node.replaceChildren(...[content].flat(Infinity));
    this.node.hidden = false;
    const width = this.node.offsetWidth, height = this.node.offsetHeight;
    const left = Math.min(x + 14, window.innerWidth - width - 8);
    const top = y + 16 + height > window.innerHeight ? y - height - 10 : y + 16;
    this.node.style.left = Math.max(4, left) + "px";
    this.node.style.top = Math.max(4, top) + "px";
  },
  hide() {
    if (this.node) this.node.hidden = true;
  },
};

// A timeline column as stored (SCHEMA.md "timeline"): base64 of zlib-compressed
// little-endian values, decoded with the browser's own DecompressionStream.
const COLUMN_ARRAYS = { lane: Uint16Array, op: Int32Array, start_ns: Float64Array, duration_ns: Float64Array };
async function decodeColumn(text, name) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  const buffer = await new Response(stream).arrayBuffer();
  return new COLUMN_ARRAYS[name](buffer);
}

// The first index in the sorted range [lo, hi) of `values` whose value is >= x.
function lowerBound(values, x, lo, hi) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Round tick spacing (1, 2, 5 × 10^k) giving about `count` ticks over `span`.
function niceStep(span, count) {
  const raw = span / Math.max(count, 1);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (raw <= m * power) return m * power;
  return 10 * power;
}

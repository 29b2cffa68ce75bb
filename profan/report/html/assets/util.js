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

// %.3g as Python prints it, for the magnitudes the report uses.
function g3(value) {
  return String(Number(value.toPrecision(3)));
}

// 0.000123 -> "123 µs" (profan.units.seconds)
function fmtSeconds(value) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  const m = Math.abs(value);
  if (m === 0) return "0 s";
  if (m >= 1) return g3(value) + " s";
  if (m >= 1e-3) return g3(value * 1e3) + " ms";
  if (m >= 1e-6) return g3(value * 1e6) + " µs";
  return g3(value * 1e9) + " ns";
}

// 5308416000 -> "5.31G" + unit (profan.units.si)
function fmtSI(value, unit = "") {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value === 0) return "0" + unit;
  for (const [factor, prefix] of [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (Math.abs(value) >= factor) return g3(value / factor) + prefix + unit;
  }
  return g3(value) + unit;
}

function fmtPercent(value, digits = 1) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "-";
  if (value > 0 && value < 0.0005) return "<0.1%";
  return (value * 100).toFixed(digits) + "%";
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

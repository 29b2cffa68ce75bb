// The SVG charts: the roofline (every op with FLOPs and bytes, hover to name, click to open),
// step time by bound (click a step to show it in the timeline), and the interactive parts of
// the host heat map and the memory timelines the page carries as plain HTML.

const roofline = {
  points: new Map(), // op index -> circle

  init() {
    const box = document.getElementById("roofline");
    if (!box) return;
    const chosen = OPS.map((op, i) => i).filter((i) => {
      const op = OPS[i];
      return op.flops > 0 && op.hbm_bytes > 0 && op.measured_s > 0;
    });
    const peak = REPORT.chip.peak_flops_per_s, bandwidth = REPORT.chip.hbm_bytes_per_s_device;
    if (!chosen.length) {
      box.append(el("p", { class: "muted" }, "no op has both FLOPs and HBM bytes to place on the roofline"));
      return;
    }
    const W = 640, H = 400, left = 64, right = 14, top = 14, bottom = 44;
    const xs = chosen.map((i) => OPS[i].flops / OPS[i].hbm_bytes);
    const ys = chosen.map((i) => OPS[i].flops / OPS[i].measured_s);
    const ridge = peak && bandwidth ? peak / bandwidth : null;
    const decade = (v, up) => Math.pow(10, (up ? Math.ceil : Math.floor)(Math.log10(v)));
    const x0 = decade(Math.min(...xs, ridge || Infinity) / 2, false), x1 = decade(Math.max(...xs, ridge || 0) * 2, true);
    const y0 = decade(Math.min(...ys) / 2, false), y1 = decade(Math.max(...ys, peak || 0) * 1.5, true);
    const sx = (v) => left + (Math.log10(v) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) * (W - left - right);
    const sy = (v) => H - bottom - (Math.log10(v) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0)) * (H - top - bottom);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "chart", role: "img",
      "aria-label": "roofline: achieved FLOP/s against arithmetic intensity, one point per op" });
    const xEvery = Math.ceil((Math.log10(x1) - Math.log10(x0)) / 9), yEvery = Math.ceil((Math.log10(y1) - Math.log10(y0)) / 9);
    for (let e = Math.round(Math.log10(x0)); e <= Math.log10(x1) + 1e-9; e++) {
      const x = sx(Math.pow(10, e));
      chart.append(svg("line", { x1: x, x2: x, y1: top, y2: H - bottom, class: "grid" }));
      if (e % xEvery === 0) chart.append(svg("text", { x, y: H - bottom + 16, "text-anchor": "middle", class: "tick" }, decadeLabel(e)));
    }
    for (let e = Math.round(Math.log10(y0)); e <= Math.log10(y1) + 1e-9; e++) {
      const y = sy(Math.pow(10, e));
      chart.append(svg("line", { x1: left, x2: W - right, y1: y, y2: y, class: "grid" }));
      if (e % yEvery === 0) chart.append(svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, decadeLabel(e)));
    }
    chart.append(
      svg("text", { x: (left + W - right) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, "arithmetic intensity (FLOPs per HBM byte)"),
      svg("text", { x: 14, y: (top + H - bottom) / 2, "text-anchor": "middle", class: "axis",
        transform: `rotate(-90 14 ${(top + H - bottom) / 2})` }, "achieved FLOP/s per device"));
    if (peak && bandwidth) {
      const points = [];
      for (let k = 0; k <= 60; k++) {
        const x = x0 * Math.pow(x1 / x0, k / 60);
        points.push(`${sx(x).toFixed(1)},${sy(Math.min(peak, x * bandwidth)).toFixed(1)}`);
      }
      chart.append(svg("polyline", { points: points.join(" "), class: "roof" }),
        svg("line", { x1: sx(ridge), x2: sx(ridge), y1: top, y2: H - bottom, class: "ridge" }),
        svg("text", { x: W - right - 4, y: sy(peak) - 6, "text-anchor": "end", class: "tick" },
          `${fmtSI(peak, "FLOP/s")} bf16 peak · ${fmtSI(bandwidth, "B/s")} HBM`));
    }
    const largest = Math.max(...chosen.map((i) => OPS[i].measured_s));
    const order = chosen.slice().sort((a, b) => OPS[b].measured_s - OPS[a].measured_s); // small on top
    for (const i of order) {
      const op = OPS[i];
      const circle = svg("circle", {
        cx: sx(op.flops / op.hbm_bytes).toFixed(1), cy: sy(op.flops / op.measured_s).toFixed(1),
        r: (3 + 9 * Math.sqrt(op.measured_s / largest)).toFixed(1), fill: categoryColour(op.category),
        class: "point" + (op.flags.length ? " flagged" : ""), "data-op": op.key, "data-index": i, tabindex: 0,
        "aria-label": op.label,
      });
      circle.addEventListener("mousemove", (e) => tip.show(this.describe(op), e.clientX, e.clientY));
      circle.addEventListener("mouseleave", () => tip.hide());
      circle.addEventListener("click", () => detail.open(i));
      circle.addEventListener("keydown", (e) => { if (e.key === "Enter") detail.open(i); });
      this.points.set(i, circle);
      chart.append(circle);
    }
    const categories = [...new Set(chosen.map((i) => OPS[i].category))].sort();
    box.append(chart, el("div", { class: "legend" }, categories.map((c) =>
      el("span", {}, el("span", { class: "chip", style: `background:${categoryColour(c)}` }), c)),
      el("span", { class: "muted" }, `${chosen.length} of ${OPS.length} ops (those with FLOPs and HBM bytes); size: time`)));
  },

  describe(op) {
    return [el("b", {}, op.label), el("br"),
      `${op.category}, ${op.bound_by}-bound, efficiency ${op.efficiency === null ? "-" : fmtPercent(op.efficiency)}`, el("br"),
      `${g3(op.flops / op.hbm_bytes)} FLOPs/byte, ${fmtSI(op.flops / op.measured_s, "FLOP/s")} achieved`, el("br"),
      `measured ${fmtSeconds(op.measured_s)}, ideal ${fmtSeconds(op.roofline_s)}`];
  },

  highlight(index) {
    for (const circle of document.querySelectorAll("#roofline circle.selected")) circle.classList.remove("selected");
    const circle = this.points.get(index);
    if (circle) { circle.classList.add("selected"); circle.parentNode.append(circle); }
  },
};

// 10^e as an axis label: SI prefixes upwards, decimals down to 0.001, then 1e-N.
function decadeLabel(e) {
  if (e >= 3) return fmtSI(Math.pow(10, e));
  if (e >= -3) return String(Number(Math.pow(10, e).toFixed(3)));
  return "1e" + e;
}

// A step's time per device by bound, then idle (the scorer's time_<bound>_s and idle_s, which
// sum to measured_s); a report written before them has only shares of op time, drawn as such.
function stepParts(step) {
  const timed = Object.keys(step).filter((k) => /^time_.+_s$/.test(k));
  if (timed.length) {
    return [...timed.map((k) => [k.slice(5, -2), step[k] || 0]), ["idle", step.idle_s || 0]];
  }
  return Object.keys(step).filter((k) => k.startsWith("share_"))
    .map((k) => [k.slice(6), (step[k] || 0) * step.measured_s]);
}

const stepsChart = {
  init() {
    const box = document.getElementById("steps-chart");
    const steps = REPORT.steps.filter((s) => s.measured_s > 0);
    if (!box || !steps.length) {
      if (box) box.append(el("p", { class: "muted" }, "no steps marked in the trace"));
      return;
    }
    const W = 640, H = 400, left = 64, right = 10, top = 14, bottom = 44;
    const tallest = Math.max(...steps.map((s) => s.measured_s));
    const width = Math.min((W - left - right) / steps.length, 48);
    const first = left + (W - left - right - width * steps.length) / 2; // few steps: centred
    const sy = (v) => (H - top - bottom) * v / tallest;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "chart", role: "img",
      "aria-label": "step time by bound, one bar per step" });
    const tick = niceStep(tallest, 5);
    for (let v = 0; v <= tallest * 1.0001; v += tick) {
      const y = H - bottom - sy(v);
      chart.append(svg("line", { x1: left, x2: W - right, y1: y, y2: y, class: "grid" }),
        svg("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "tick" }, fmtSeconds(v)));
    }
    const bounds = [...new Set(steps.flatMap((s) => stepParts(s).filter(([, v]) => v > 0).map(([b]) => b)))];
    const every = Math.max(1, Math.ceil(steps.length / 12));
    steps.forEach((step, k) => {
      const x = first + k * width;
      const group = svg("g", { class: "step-bar", "data-step": step.step, tabindex: 0 });
      let y = H - bottom;
      const own = Object.fromEntries(stepParts(step));
      const parts = bounds.map((b) => [b, own[b] || 0]);
      const shared = parts.reduce((a, [, v]) => a + v, 0);
      for (const [bound, seconds] of parts) {
        const h = sy(seconds);
        if (h <= 0) continue;
        y -= h;
        group.append(svg("rect", { x: x + 0.5, y, width: Math.max(width - 1, 0.8), height: h, fill: boundColour(bound) }));
      }
      if (shared === 0) {
        const h = sy(step.measured_s);
        group.append(svg("rect", { x: x + 0.5, y: H - bottom - h, width: Math.max(width - 1, 0.8), height: h, fill: "#999" }));
      }
      group.addEventListener("mousemove", (e) => tip.show([el("b", {}, `step ${step.step}`), el("br"),
        `measured ${fmtSeconds(step.measured_s)}, ideal ${fmtSeconds(step.ideal_s)} (${fmtPercent(step.efficiency)})`,
        ...parts.filter(([, v]) => v > 0).map(([b, v]) => [el("br"), `${b} ${fmtSeconds(v)} (${fmtPercent(v / step.measured_s, 0)})`]),
        step.note ? [el("br"), el("i", {}, step.note)] : [], el("br"), el("span", { class: "muted" }, "click: show in the timeline")],
      e.clientX, e.clientY));
      group.addEventListener("mouseleave", () => tip.hide());
      group.addEventListener("click", () => timeline.showStep(step.step, true));
      chart.append(group);
      if (k % every === 0) {
        chart.append(svg("text", { x: x + width / 2, y: H - bottom + 16, "text-anchor": "middle", class: "tick" }, step.step));
      }
    });
    chart.append(svg("text", { x: (left + W - right) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, "step (click one to show it in the timeline)"),
      svg("text", { x: 12, y: (top + H - bottom) / 2, transform: `rotate(-90 12 ${(top + H - bottom) / 2})`, "text-anchor": "middle", class: "axis" }, "time per step, per device"));
    box.append(chart, el("div", { class: "legend" }, bounds.map((b) =>
      el("span", {}, el("span", { class: "chip", style: `background:${boundColour(b)}` }), b))));
  },
};

// The host × step heat map (plain HTML): a cell shows its step in the timeline.
function attachHeatMap() {
  for (const cell of document.querySelectorAll("table.heatmap td[data-step]")) {
    cell.tabIndex = 0;
    cell.addEventListener("click", () => timeline.showStep(Number(cell.dataset.step), true, cell.dataset.host));
  }
}

// The memory section's heap timelines (plain SVG): a hover reads the heap at that point.
function attachMemory() {
  for (const box of document.querySelectorAll(".memory-program[data-module]")) {
    const entry = REPORT.memory.find((m) => m.module === box.dataset.module && m.memory_space === "device");
    const chart = box.querySelector("svg.memory-timeline");
    if (!entry || !chart || !entry.timeline || entry.timeline.length < 2) continue;
    const points = entry.timeline;
    const width = Number(chart.getAttribute("width")), height = Number(chart.getAttribute("height"));
    const cursor = svg("line", { y1: 0, y2: height, class: "cursor", visibility: "hidden" });
    chart.append(cursor);
    chart.addEventListener("mousemove", (e) => {
      const bounds = chart.getBoundingClientRect();
      const k = Math.round((e.clientX - bounds.left) / bounds.width * (points.length - 1));
      const [position, bytes] = points[Math.max(0, Math.min(points.length - 1, k))];
      const x = k * width / (points.length - 1);
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.setAttribute("visibility", "visible");
      tip.show([el("b", {}, fmtSI(bytes, "B")), ` live at heap event ${position}`,
        position === entry.peak_position ? [el("br"), `the peak, at ${entry.peak_instruction}`] : []], e.clientX, e.clientY);
    });
    chart.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); tip.hide(); });
    const bars = box.querySelectorAll("svg.memory-buffers rect");
    bars.forEach((bar, k) => {
      const buffer = entry.top_buffers[k];
      if (!buffer) return;
      const name = buffer.name.replace(/\{.*\}$/, "");
      const index = OPS.findIndex((op) => op.name === name && op.program === entry.module);
      if (index < 0) return;
      bar.classList.add("op-mark");
      bar.addEventListener("click", () => detail.open(index));
    });
  }
}

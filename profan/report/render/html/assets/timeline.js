// The timeline of one step: a lane per device (or per host), ops coloured by bound, flagged
// ops outlined, idle gaps shaded, each collective linked across the devices that ran it; an
// async op's start-to-done span (TPU traces) in an "in flight" lane under its device.
// Canvas, so a step of tens of thousands of slices stays smooth: only what is in view is
// visited (binary search per lane), and slices narrower than a pixel are merged into one
// pixel column per lane row (the status line counts them).

const MAX_ROWS = 6; // rows per lane for overlapping slices (more overlap shares the last row)
const LABEL_W = 150;
const AXIS_H = 24;
const LINK_LIMIT = 4000; // collective links drawn at most (zoom in to see more)

const timeline = {
  cache: new Map(), // step number -> Promise of its decoded slices
  data: null,
  view: [0, 1], // ns since the step's start
  highlighted: null, // op index
  hovered: -1, // slice index
  perHost: false,
  focusHost: null,
  stats: null,
  ready: Promise.resolve(),

  init() {
    this.section = document.getElementById("timeline");
    this.wrap = document.getElementById("tl-wrap");
    this.canvas = document.getElementById("tl-canvas");
    this.status = document.getElementById("tl-status");
    if (!TIMELINE) {
      this.wrap.replaceChildren(el("p", { class: "muted" },
        "This report carries no timeline: it was read back from a JSON report built without the page's data (profan report TRACE --format html builds it)."));
      return;
    }
    if (!TIMELINE.steps.length) {
      this.wrap.replaceChildren(el("p", { class: "muted" }, "No op executions fall inside a step: nothing to draw."));
      return;
    }
    const hosts = new Set(TIMELINE.lanes.map((l) => l.host));
    this.multiHost = hosts.size > 1;
    this.perHost = this.multiHost && TIMELINE.lanes.length > 32;
    this.opColour = OPS.map((op) => boundColour(op.bound_by));
    this.opFlagged = OPS.map((op) => op.flags.length > 0);
    this.opCollective = OPS.map((op) => op.category === "collective");
    this.inFlight = TIMELINE.lanes.map((l) => Boolean(l.in_flight));
    this.buildToolbar();
    this.attachEvents();
    new ResizeObserver(() => this.draw()).observe(this.wrap);
    this.ready = this.showStep(this.defaultStep());
  },

  defaultStep() {
    // the step whose measured time is the median: the representative one
    const measured = new Map(REPORT.steps.map((s) => [s.step, s.measured_s || 0]));
    const steps = TIMELINE.steps.map((s) => s.step).sort((a, b) => (measured.get(a) || 0) - (measured.get(b) || 0));
    return steps[Math.floor((steps.length - 1) / 2)];
  },

  buildToolbar() {
    const bar = document.getElementById("tl-toolbar");
    const rows = new Map(REPORT.steps.map((s) => [s.step, s]));
    const median = this.defaultStep();
    const slowest = TIMELINE.steps.reduce((a, s) => ((rows.get(s.step) || {}).measured_s > ((rows.get(a) || {}).measured_s || 0) ? s.step : a), TIMELINE.steps[0].step);
    this.select = el("select", { id: "tl-step", onchange: (e) => this.showStep(Number(e.target.value)) },
      TIMELINE.steps.map((s) => {
        const row = rows.get(s.step) || {};
        const marks = [s.step === median ? "median" : "", s.step === slowest ? "slowest" : "", row.note ? "note" : ""].filter(Boolean);
        const name = s.step < 0 ? "whole profile" : `step ${s.step}`;
        return el("option", { value: s.step }, `${name} · ${fmtSeconds(row.measured_s)} · ${s.count - (s.in_flight || 0)} ops` + (marks.length ? ` (${marks.join(", ")})` : ""));
      }));
    const move = (by) => {
      const k = this.select.selectedIndex + by;
      if (k >= 0 && k < this.select.options.length) this.showStep(Number(this.select.options[k].value));
    };
    bar.append(...[
      el("label", {}, "step ", this.select),
      el("button", { title: "previous step", onclick: () => move(-1) }, "◀"),
      el("button", { title: "next step", onclick: () => move(1) }, "▶"),
      el("span", { class: "sep" }),
      el("button", { title: "zoom in (W, ctrl+wheel)", onclick: () => this.zoom(0.5) }, "+"),
      el("button", { title: "zoom out (S, ctrl+wheel)", onclick: () => this.zoom(2) }, "−"),
      el("button", { title: "whole step (0, double-click)", onclick: () => this.fit() }, "fit"),
      this.multiHost ? el("label", {}, el("input", { type: "checkbox", checked: this.perHost,
        onchange: (e) => { this.perHost = e.target.checked; this.draw(); } }), " one lane per host") : null,
      el("span", { class: "legend" },
        [...new Set(OPS.map((op) => op.bound_by))].map((b) => el("span", {}, el("span", { class: "chip", style: `background:${boundColour(b)}` }), b)),
        el("span", {}, el("span", { class: "chip outline" }), "flagged"),
        el("span", {}, el("span", { class: "chip gap" }), "idle"),
        el("span", {}, el("span", { class: "chip link" }), "collective across devices"),
        this.inFlight.some(Boolean) ? el("span", {}, el("span", { class: "chip in-flight" }), "in flight (async start to done)") : null),
      el("span", { class: "muted hint" }, "drag: pan · shift-drag: zoom to range · ctrl+wheel or W/S: zoom · A/D: pan · click: open op"),
    ].filter(Boolean));
  },

  async showStep(step, scroll = false, host = null) {
    const entry = TIMELINE.steps.find((s) => s.step === step);
    if (!entry) return;
    this.select.value = String(step);
    this.focusHost = host;
    if (!this.cache.has(step)) this.cache.set(step, this.decode(entry));
    const data = await this.cache.get(step);
    if (Number(this.select.value) !== step) return; // another step was chosen meanwhile
    this.data = data;
    this.hovered = -1;
    this.fit();
    if (scroll) this.section.scrollIntoView({ behavior: "instant", block: "start" });
  },

  async decode(entry) {
    const names = ["lane", "op", "start_ns", "duration_ns"];
    const [lane, op, delta, duration] = await Promise.all(names.map((n) => decodeColumn(entry[n], n)));
    const n = entry.count, laneCount = TIMELINE.lanes.length;
    const start = new Float64Array(n);
    let sum = 0;
    for (let i = 0; i < n; i++) { sum += delta[i]; start[i] = sum; }
    const first = new Int32Array(laneCount + 1);
    for (let i = 0; i < n; i++) first[lane[i] + 1]++;
    for (let l = 0; l < laneCount; l++) first[l + 1] += first[l];
    const row = new Uint8Array(n), rows = new Uint8Array(laneCount), longest = new Float64Array(laneCount);
    const occurrence = new Int32Array(n), gaps = [], counts = new Int32Array(laneCount);
    let low = Infinity, high = -Infinity;
    for (let l = 0; l < laneCount; l++) {
      const ends = [], seen = new Map(), holes = [];
      let busy = -Infinity;
      counts[l] = first[l + 1] - first[l];
      for (let i = first[l]; i < first[l + 1]; i++) {
        const s = start[i], e = s + duration[i];
        let r = 0;
        while (r < ends.length && ends[r] > s) r++;
        if (r >= MAX_ROWS) { r = MAX_ROWS - 1; ends[r] = Math.max(ends[r], e); }
        else ends[r] = e;
        row[i] = r;
        if (duration[i] > longest[l]) longest[l] = duration[i];
        if (s > busy && busy > -Infinity && !this.inFlight[l]) holes.push(busy, s);
        if (e > busy) busy = e;
        const k = op[i];
        if (k >= 0 && this.opCollective[k]) { const m = seen.get(k) || 0; occurrence[i] = m; seen.set(k, m + 1); }
        if (s < low) low = s;
        if (e > high) high = e;
      }
      rows[l] = Math.max(1, ends.length);
      gaps.push(Float64Array.from(holes));
    }
    // the same collective execution on every device: the n-th run of an op on each lane
    const groups = new Map();
    for (let i = 0; i < n; i++) {
      const k = op[i];
      if (k < 0 || !this.opCollective[k]) continue;
      const key = k * 1048576 + occurrence[i];
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(i);
    }
    const links = [...groups.values()].filter((g) => g.length > 1);
    let spans = 0;
    for (let l = 0; l < laneCount; l++) if (this.inFlight[l]) spans += counts[l];
    const stepWindow = ((REPORT.steps.find((s) => s.step === entry.step) || {}).window_s || 0) * 1e9;
    return { step: entry.step, n, spans, lane, op, start, duration, first, row, rows, longest, gaps, links, counts,
      extent: [Math.min(low, 0), Math.max(high, stepWindow)] };
  },

  lanesShown() {
    const lanes = TIMELINE.lanes;
    const label = (l) => (this.multiHost ? `${l.host} · ` : "") + (l.device === null ? "host" : `${REPORT.device.kind || "device"} ${l.device}`) + (l.in_flight ? " · in flight" : "");
    if (!this.perHost) return lanes.map((l, k) => ({ label: label(l), host: l.host, lanes: [k], rows: this.data.rows[k] }));
    const byHost = new Map();
    lanes.forEach((l, k) => {
      if (!byHost.has(l.host)) byHost.set(l.host, { host: l.host, lanes: [], rows: 1 });
      byHost.get(l.host).lanes.push(k);
    });
    const shown = [...byHost.values()];
    for (const s of shown) s.label = `${s.host} (${s.lanes.filter((k) => !this.inFlight[k]).length} devices)`;
    return shown;
  },

  fit() {
    if (!this.data) return;
    const [a, b] = this.data.extent;
    const pad = (b - a) * 0.01;
    this.view = [a - pad, b + pad];
    this.draw();
  },

  zoom(factor, anchor) {
    const [a, b] = this.view;
    const at = anchor === undefined ? (a + b) / 2 : anchor;
    const [lo, hi] = this.data.extent;
    const span = Math.min(Math.max((b - a) * factor, 50), (hi - lo) * 1.5);
    const share = (at - a) / (b - a);
    this.view = [at - share * span, at - share * span + span];
    this.draw();
  },

  pan(ns) {
    this.view = [this.view[0] + ns, this.view[1] + ns];
    this.draw();
  },

  zoomTo(a, b) {
    const span = Math.max(b - a, 50);
    this.view = [a, a + span];
    this.draw();
  },

  // x in CSS pixels of time t (ns), and back
  x(t) { return LABEL_W + (t - this.view[0]) * this.scale; },
  t(x) { return this.view[0] + (x - LABEL_W) / this.scale; },

  layout() {
    const shown = this.lanesShown();
    const totalRows = shown.reduce((a, s) => a + s.rows, 0);
    const rowH = Math.max(5, Math.min(18, Math.floor(560 / Math.max(totalRows, 1))));
    const gap = shown.length > 64 ? 1 : 4;
    let y = AXIS_H;
    for (const s of shown) { s.y = y; s.h = s.rows * rowH; y += s.h + gap; }
    return { shown, rowH, height: y + 4 };
  },

  draw() {
    const d = this.data;
    if (!d) return;
    const width = Math.max(this.wrap.clientWidth, 400);
    const { shown, rowH, height } = this.layout();
    this.shown = shown; this.rowH = rowH;
    const ratio = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(width * ratio);
    this.canvas.height = Math.round(height * ratio);
    this.canvas.style.width = width + "px";
    this.canvas.style.height = height + "px";
    const ctx = this.canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, height);
    const [t0, t1] = this.view;
    this.scale = (width - LABEL_W - 8) / (t1 - t0);
    this.drawAxis(ctx, width, height);
    const stats = { step: d.step, slices: d.n - d.spans, spans: d.spans, perLane: Array.from(d.counts), visible: 0, drawn: 0, merged: 0, links: 0 };
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, 0, width - LABEL_W, height);
    ctx.clip();
    shown.forEach((s, k) => {
      ctx.fillStyle = k % 2 ? "#fafbfc" : "#f3f5f8";
      ctx.fillRect(LABEL_W, s.y, width - LABEL_W, s.h);
      if (!this.perHost) this.drawGaps(ctx, d.gaps[s.lanes[0]], s);
      for (const lane of s.lanes) this.drawLane(ctx, lane, s, stats);
    });
    if (!this.perHost) this.drawLinks(ctx, stats);
    if (this.highlighted !== null) this.drawHighlight(ctx);
    ctx.restore();
    this.drawLabels(ctx, shown);
    this.stats = stats;
    this.writeStatus(stats);
  },

  drawAxis(ctx, width, height) {
    const [t0, t1] = this.view;
    const step = niceStep(t1 - t0, Math.max(2, Math.floor((width - LABEL_W) / 110)));
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.fillStyle = "#555";
    ctx.strokeStyle = "#e3e6ea";
    ctx.lineWidth = 1;
    for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
      const x = Math.round(this.x(t)) + 0.5;
      if (x < LABEL_W) continue;
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 6); ctx.lineTo(x, height); ctx.stroke();
      ctx.fillText((t >= 0 ? "+" : "") + fmtSeconds(t * 1e-9), x + 3, AXIS_H / 2);
    }
  },

  drawGaps(ctx, gaps, s) {
    const [t0, t1] = this.view;
    ctx.fillStyle = "rgba(150, 150, 150, 0.22)";
    for (let k = 0; k < gaps.length; k += 2) {
      if (gaps[k + 1] < t0 || gaps[k] > t1) continue;
      const a = this.x(gaps[k]), b = this.x(gaps[k + 1]);
      if (b - a >= 1) ctx.fillRect(a, s.y, b - a, s.h);
    }
  },

  colour(i) {
    const k = this.data.op[i];
    return k >= 0 ? this.opColour[k] : "#9e9e9e";
  },

  drawLane(ctx, lane, s, stats) {
    const d = this.data, [t0, t1] = this.view, rowH = this.rowH;
    const lo = lowerBound(d.start, t0 - d.longest[lane], d.first[lane], d.first[lane + 1]);
    const hi = lowerBound(d.start, t1, lo, d.first[lane + 1]);
    // one pending pixel column per row: slices narrower than a pixel merge into it
    const bucketX = new Float64Array(MAX_ROWS).fill(-1), bucketLong = new Float64Array(MAX_ROWS);
    const bucketColour = new Array(MAX_ROWS);
    const flush = (r) => {
      if (bucketX[r] < 0) return;
      ctx.fillStyle = bucketColour[r];
      ctx.fillRect(bucketX[r], s.y + r * rowH, 1, rowH - 1);
      bucketX[r] = -1;
    };
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.globalAlpha = this.inFlight[lane] ? 0.55 : 1; // a span in flight, not the op's own time
    for (let i = lo; i < hi; i++) {
      const end = d.start[i] + d.duration[i];
      if (end < t0) continue;
      stats.visible++;
      const x0 = this.x(d.start[i]), x1 = this.x(end), r = this.perHost ? 0 : d.row[i];
      if (x1 - x0 < 1) {
        const column = Math.floor(x0);
        if (bucketX[r] === column) {
          stats.merged++;
          if (d.duration[i] > bucketLong[r]) { bucketLong[r] = d.duration[i]; bucketColour[r] = this.colour(i); }
          continue;
        }
        flush(r);
        bucketX[r] = column; bucketLong[r] = d.duration[i]; bucketColour[r] = this.colour(i);
        stats.drawn++;
        continue;
      }
      stats.drawn++;
      const y = s.y + r * rowH;
      ctx.fillStyle = this.colour(i);
      ctx.fillRect(x0, y, x1 - x0, rowH - 1);
      const k = d.op[i];
      if (k >= 0 && this.opFlagged[k] && x1 - x0 >= 3) {
        ctx.strokeStyle = "#111";
        ctx.lineWidth = 1;
        ctx.strokeRect(x0 + 0.5, y + 0.5, x1 - x0 - 1, rowH - 2);
      }
      if (x1 - x0 > 48 && rowH >= 10) {
        const name = k >= 0 ? OPS[k].label : TIMELINE.names[-k - 1];
        ctx.save();
        ctx.beginPath(); ctx.rect(x0, y, x1 - x0, rowH); ctx.clip();
        ctx.fillStyle = "#fff";
        ctx.fillText(name, Math.max(x0, LABEL_W) + 3, y + rowH / 2);
        ctx.restore();
      }
    }
    for (let r = 0; r < MAX_ROWS; r++) flush(r);
    ctx.globalAlpha = 1;
  },

  laneOf(lane) {
    return this.shown.find((s) => s.lanes.includes(lane));
  },

  drawLinks(ctx, stats) {
    const d = this.data, [t0, t1] = this.view;
    const visible = d.links.filter((g) => d.start[g[0]] <= t1 && d.start[g[g.length - 1]] + d.duration[g[g.length - 1]] >= t0);
    const count = visible.reduce((a, g) => a + g.length - 1, 0);
    stats.links = count <= LINK_LIMIT ? count : 0;
    stats.linksHidden = count > LINK_LIMIT ? count : 0;
    if (count > LINK_LIMIT) return;
    ctx.lineWidth = 1;
    for (const g of visible) {
      const strong = this.highlighted !== null && d.op[g[0]] === this.highlighted;
      ctx.strokeStyle = strong ? "rgba(0,0,0,0.85)" : "rgba(214,39,40,0.45)";
      ctx.beginPath();
      for (let k = 1; k < g.length; k++) {
        const a = g[k - 1], b = g[k];
        const la = this.laneOf(d.lane[a]), lb = this.laneOf(d.lane[b]);
        ctx.moveTo(this.x(d.start[a]), la.y + (d.row[a] + 1) * this.rowH - 1);
        ctx.lineTo(this.x(d.start[b]), lb.y + d.row[b] * this.rowH);
      }
      ctx.stroke();
    }
  },

  drawHighlight(ctx) {
    const d = this.data, [t0, t1] = this.view, target = this.highlighted;
    ctx.strokeStyle = "#000";
    ctx.lineWidth = 2;
    for (let i = 0; i < d.n; i++) {
      if (d.op[i] !== target || d.start[i] > t1 || d.start[i] + d.duration[i] < t0) continue;
      const s = this.laneOf(d.lane[i]), r = this.perHost ? 0 : d.row[i];
      const x0 = this.x(d.start[i]), w = Math.max(this.x(d.start[i] + d.duration[i]) - x0, 2);
      ctx.strokeRect(x0 - 1, s.y + r * this.rowH - 1, w + 2, this.rowH + 1);
    }
    if (this.hovered >= 0) {
      const i = this.hovered, s = this.laneOf(d.lane[i]), r = this.perHost ? 0 : d.row[i];
      ctx.strokeStyle = "#1a73e8";
      ctx.strokeRect(this.x(d.start[i]) - 1, s.y + r * this.rowH - 1, Math.max(d.duration[i] * this.scale, 2) + 2, this.rowH + 1);
    }
  },

  drawLabels(ctx, shown) {
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, LABEL_W, this.canvas.height);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    for (const s of shown) {
      if (this.focusHost && s.host === this.focusHost) { ctx.fillStyle = "#ffe9a8"; ctx.fillRect(0, s.y, LABEL_W - 4, s.h); }
      ctx.fillStyle = "#333";
      if (s.h >= 8) ctx.fillText(s.label, 4, s.y + Math.min(s.h, this.rowH) / 2, LABEL_W - 8);
    }
  },

  writeStatus(stats) {
    const lanes = TIMELINE.lanes.length;
    const parts = [`${stats.slices} op executions` + (stats.spans ? ` and ${stats.spans} async spans (start to done)` : "") + ` on ${lanes} lane(s)`,
      `in view ${stats.visible}: ${stats.drawn} drawn, ${stats.merged} merged into pixel columns (narrower than a pixel at this zoom)`];
    if (stats.linksHidden) parts.push(`${stats.linksHidden} collective links hidden (zoom in)`);
    if (TIMELINE.outside_steps) parts.push(`${TIMELINE.outside_steps} op events outside every step are not drawn`);
    this.status.replaceChildren(parts.join(" · "), ...TIMELINE.notes.map((n) => el("div", {}, n)));
  },

  // the slice under (x, y) in canvas pixels, or -1
  hit(x, y) {
    const d = this.data;
    if (!d || x < LABEL_W) return -1;
    const s = this.shown.find((s) => y >= s.y && y < s.y + s.h);
    if (!s) return -1;
    const r = Math.floor((y - s.y) / this.rowH), t = this.t(x), tolerance = 3 / this.scale;
    let best = -1, bestDistance = Infinity;
    for (const lane of s.lanes) {
      const lo = lowerBound(d.start, t - tolerance - d.longest[lane], d.first[lane], d.first[lane + 1]);
      const hi = lowerBound(d.start, t + tolerance, lo, d.first[lane + 1]);
      for (let i = lo; i < hi; i++) {
        if (!this.perHost && d.row[i] !== r) continue;
        const a = d.start[i], b = a + d.duration[i];
        const distance = t < a ? a - t : t > b ? t - b : 0;
        if (distance <= tolerance && (distance < bestDistance || (distance === bestDistance && d.duration[i] > d.duration[best]))) {
          best = i; bestDistance = distance;
        }
      }
    }
    return best;
  },

  describe(i) {
    const d = this.data, k = d.op[i], lane = TIMELINE.lanes[d.lane[i]];
    const where = (this.multiHost ? `${lane.host} · ` : "") + (lane.device === null ? "host" : `device ${lane.device}`) + (lane.in_flight ? " (in flight: async start to done)" : "");
    const head = [el("b", {}, k >= 0 ? OPS[k].label : TIMELINE.names[-k - 1]), el("br"),
      `${fmtSeconds(d.duration[i] * 1e-9)} at +${fmtSeconds(d.start[i] * 1e-9)} on ${where}`];
    if (k < 0) return [...head, el("br"), el("span", { class: "muted" }, "no op entry (not joined to HLO)")];
    const op = OPS[k];
    return [...head, el("br"), `${op.category}, ${op.bound_by}-bound; op efficiency ${op.efficiency === null ? "-" : fmtPercent(op.efficiency)}`,
      op.flags.length ? [el("br"), el("span", { class: "bad" }, op.flags.join(", "))] : [],
      el("br"), el("span", { class: "muted" }, "click: open the op")];
  },

  attachEvents() {
    const canvas = this.canvas;
    const point = (e) => { const b = canvas.getBoundingClientRect(); return [e.clientX - b.left, e.clientY - b.top]; };
    let drag = null;
    canvas.addEventListener("mousedown", (e) => {
      const [x, y] = point(e);
      drag = { x, y, view: this.view.slice(), moved: false, range: e.shiftKey };
      canvas.focus();
    });
    window.addEventListener("mousemove", (e) => {
      if (!drag || !this.data) return;
      const [x] = point(e);
      if (Math.abs(x - drag.x) > 3) drag.moved = true;
      if (drag.range) { this.draw(); this.drawRange(drag.x, x); return; }
      const dt = (x - drag.x) / this.scale;
      this.view = [drag.view[0] - dt, drag.view[1] - dt];
      this.draw();
    });
    window.addEventListener("mouseup", (e) => {
      if (!drag) return;
      const [x, y] = point(e);
      const was = drag;
      drag = null;
      if (was.range && was.moved) { const [a, b] = [this.t(Math.min(was.x, x)), this.t(Math.max(was.x, x))]; this.zoomTo(a, b); return; }
      if (!was.moved) {
        const i = this.hit(x, y);
        if (i >= 0 && this.data.op[i] >= 0) detail.open(this.data.op[i]);
      }
    });
    canvas.addEventListener("mousemove", (e) => {
      if (drag || !this.data) return;
      const [x, y] = point(e);
      this.mouseX = x;
      const i = this.hit(x, y);
      if (i !== this.hovered) { this.hovered = i; this.draw(); }
      if (i >= 0) tip.show(this.describe(i), e.clientX, e.clientY);
      else tip.hide();
      canvas.style.cursor = i >= 0 ? "pointer" : "grab";
    });
    canvas.addEventListener("mouseleave", () => { tip.hide(); if (this.hovered >= 0) { this.hovered = -1; this.draw(); } });
    canvas.addEventListener("wheel", (e) => {
      if (!this.data) return;
      const [x] = point(e);
      if (e.ctrlKey || e.metaKey) { e.preventDefault(); this.zoom(Math.pow(1.0015, e.deltaY), this.t(x)); }
      else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) { e.preventDefault(); this.pan((e.deltaX || e.deltaY) / this.scale); }
    }, { passive: false });
    canvas.addEventListener("dblclick", (e) => {
      const [x, y] = point(e);
      const i = this.hit(x, y);
      if (i < 0) { this.fit(); return; }
      const d = this.data, pad = Math.max(d.duration[i], 50) * 2;
      this.zoomTo(d.start[i] - pad, d.start[i] + d.duration[i] + pad);
    });
    canvas.addEventListener("keydown", (e) => {
      if (!this.data) return;
      const span = this.view[1] - this.view[0];
      const at = this.mouseX !== undefined ? this.t(this.mouseX) : undefined;
      const keys = { w: () => this.zoom(0.7, at), s: () => this.zoom(1 / 0.7, at), a: () => this.pan(-span * 0.15), d: () => this.pan(span * 0.15), 0: () => this.fit() };
      const act = keys[e.key.toLowerCase()];
      if (act) { e.preventDefault(); act(); }
    });
  },

  drawRange(a, b) {
    const ctx = this.canvas.getContext("2d");
    ctx.fillStyle = "rgba(26,115,232,0.15)";
    ctx.fillRect(Math.min(a, b), 0, Math.abs(b - a), this.canvas.height);
  },

  highlight(index) {
    this.highlighted = index;
    this.draw();
  },

  // Show an op: highlight its slices and, when none is in view, zoom to its first one.
  reveal(index) {
    this.highlight(index);
    this.section.scrollIntoView({ behavior: "instant", block: "start" });
    const d = this.data;
    if (!d) return;
    let first = -1, inView = false;
    for (let i = 0; i < d.n; i++) {
      if (d.op[i] !== index) continue;
      if (first < 0 || d.start[i] < d.start[first]) first = i;
      if (d.start[i] <= this.view[1] && d.start[i] + d.duration[i] >= this.view[0]) inView = true;
    }
    if (first >= 0 && !inView) {
      const pad = Math.max(d.duration[first] * 10, 1000);
      this.zoomTo(d.start[first] - pad, d.start[first] + d.duration[first] + pad);
    }
  },

  // Where slice i is on screen (client coordinates of its centre), zooming to it first when
  // it is narrower than a few pixels: for the page's tests and for links into the timeline.
  locate(i) {
    const d = this.data;
    if (this.x(d.start[i] + d.duration[i]) - this.x(d.start[i]) < 4 || this.x(d.start[i]) < LABEL_W) {
      const pad = Math.max(d.duration[i], 50);
      this.zoomTo(d.start[i] - pad, d.start[i] + d.duration[i] + pad);
    }
    const b = this.canvas.getBoundingClientRect(), s = this.laneOf(d.lane[i]), r = this.perHost ? 0 : d.row[i];
    const x0 = Math.max(this.x(d.start[i]), LABEL_W), x1 = this.x(d.start[i] + d.duration[i]);
    return { x: b.left + (x0 + x1) / 2, y: b.top + s.y + r * this.rowH + this.rowH / 2 };
  },
};

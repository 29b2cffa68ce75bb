// The op detail pane: everything the report knows about one op, opened from a table row, a
// chart mark, a timeline slice or a finding.

const SOURCE_WORDS = {
  hlo: "the op's HLO shapes and attributes",
  "backend-config": "the call's backend config",
  "cost-estimate": "the kernel's own cost estimate",
  trace: "the profiler's own per-op figure",
  "shape-signature": "read from the operand shapes",
  "lower-bound": "a lower bound (operands plus results): the ideal is only a lower bound",
  unknown: "unknown: no cost model (add one with --kernels FILE)",
};

const detail = {
  current: null,

  init() {
    this.pane = document.getElementById("detail");
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") this.close(); });
  },

  close() {
    if (this.current === null) return;
    this.current = null;
    this.pane.hidden = true;
    document.body.classList.remove("with-detail");
    opTable.select(-1);
    roofline.highlight(null);
    timeline.highlight(null);
    if (location.hash.startsWith("#op=")) history.replaceState(null, "", location.pathname + location.search);
  },

  open(index) {
    const op = OPS[index];
    if (!op) return;
    this.current = index;
    this.pane.replaceChildren(...this.content(op, index));
    this.pane.hidden = false;
    this.pane.scrollTop = 0;
    document.body.classList.add("with-detail");
    opTable.select(index);
    roofline.highlight(index);
    timeline.highlight(index);
    history.replaceState(null, "", "#op=" + encodeURIComponent(op.key));
  },

  content(op, index) {
    const text = TEXT[index];
    const perExecution = (value) => (op.occurrences ? value / op.occurrences : null);
    const effClass = op.efficiency === null ? "" : op.efficiency < 0.1 ? "bad" : op.efficiency < 0.5 ? "warn" : "ok";
    const head = el("div", { class: "detail-head" },
      el("button", { class: "close", title: "close (Esc)", onclick: () => this.close() }, "×"),
      el("h2", { class: "detail-name" }, op.label),
      el("div", { class: "muted" }, [op.opcode, op.category, op.program || "no program"].join(" · ")),
      el("div", { class: "verdict" },
        // an async done's verdict is its transfer's (the same cells as the table's)
        el("span", {}, "measured ", el("b", {}, text.measured.join(" "))),
        el("span", {}, "ideal ", el("b", {}, text.ideal.join(" "))),
        el("span", {}, "efficiency ", el("b", { class: effClass }, op.efficiency === null ? "-" : fmtPercent(op.efficiency))),
        text.wait.length ? el("span", {}, "wait ", el("b", {}, text.wait.join(" "))) : null,
        el("span", {}, "bound ", el("span", { class: "chip", style: `background:${boundColour(op.bound_by)}` }), el("b", {}, op.bound_by))),
      el("div", { class: "muted" },
        `${op.occurrences} executions summed over all devices; per execution ${fmtSeconds(perExecution(op.measured_s))} ${op.exposed_wait_s === null ? "measured" : "waited"}, ` +
        `${fmtSeconds(perExecution(op.roofline_s))} ideal`),
      el("button", { class: "linkish", onclick: () => timeline.reveal(index) }, "show in the timeline"));
    return [head, this.flags(op), op.note ? section("note", el("p", {}, op.note)) : null, this.terms(op), this.hlo(op),
      this.costs(op), this.kernels(op), this.where(op), this.sharding(op, text), this.async(op)].filter(Boolean);
  },

  flags(op) {
    if (!op.flags.length) return section("flags", el("p", { class: "ok" }, "no rule fired on this op"));
    const mine = FINDINGS_BY_OP.get(op.key) || [];
    return section("flags", op.flags.map((flag) => {
      const rule = RULES[flag] || {};
      const found = mine.filter((f) => f.rule === flag);
      const thresholds = Object.entries(rule.thresholds || {});
      return el("div", { class: "flag-detail" },
        el("div", {}, el("span", { class: "flag" }, flag), " ", el("span", { class: "muted" }, rule.summary || "")),
        found.map((f) => el("p", {}, f.message)),
        found.length ? el("p", { class: "look-at" }, el("i", {}, "look at: "), found[0].look_at) : null,
        thresholds.length ? el("p", { class: "thresholds" }, "thresholds ([rules] in profan.toml): ",
          thresholds.map(([name, value], i) => [i ? ", " : "", el("code", {}, `${name} = ${JSON.stringify(value)}`)])) : null);
    }));
  },

  terms(op) {
    const chip = REPORT.chip;
    const terms = [
      ["compute", op.t_compute_s, `${fmtSI(op.flops)} FLOPs at the ${op.peak || "bf16"} peak`],
      ["hbm", op.t_hbm_s, op.t_hbm_s > 0 || !op.hbm_bytes
        ? `${fmtSI(op.hbm_bytes, "B")} at ${fmtSI(chip.hbm_bytes_per_s_device, "B/s")}`
        : `${fmtSI(op.hbm_bytes, "B")}, not timed against HBM for this op`],
      ["ici", op.t_ici_s, `${fmtSI(op.ici_bytes, "B")} over the interconnect`],
    ];
    // reports that time transcendentals on the chip's own unit (exp, log, tanh, …) carry a
    // fourth term
    if (op.t_transcendental_s) {
      terms.push(["transcendental", op.t_transcendental_s,
        `at ${fmtSI(chip.transcendentals_per_s_device)}/s, beside the compute units`]);
    }
    // a bound outside these terms (host transfers over PCIe): its term is the ideal itself
    if (op.roofline_s > Math.max(...terms.map((t) => t[1])) * (1 + 1e-9)) {
      terms.push([op.bound_by, op.roofline_s, op.bound_by === "host" ? `${fmtSI(op.hbm_bytes, "B")} over the host link (PCIe)` : "the op's bounding term"]);
    }
    const longest = Math.max(...terms.map((t) => t[1]), op.measured_s, 1e-30);
    const bar = (value, colour) => el("div", { class: "term-bar" },
      el("span", { style: `width:${(100 * value / longest).toFixed(2)}%;background:${colour}` }));
    return section("roofline terms (all executions, all devices)", el("table", { class: "terms" },
      terms.map(([name, value, what]) => el("tr", { class: name === op.bound_by ? "bound" : "" },
        el("th", {}, name), el("td", { class: "num" }, fmtSeconds(value)), el("td", {}, bar(value, boundColour(name))), el("td", { class: "muted" }, what))),
      el("tr", {}, el("th", {}, op.exposed_wait_s === null ? "measured" : "wait"), el("td", { class: "num" }, fmtSeconds(op.measured_s)),
        el("td", {}, bar(op.measured_s, "#444")), el("td", { class: "muted" }, op.exposed_wait_s === null
          ? "the trace's op time" : "the done's exposed wait, not its transfer (see async transfer)"))),
      el("p", { class: "muted" }, "ideal = the largest term (MODEL.md §1); the bound is the resource that term measures"));
  },

  costs(op) {
    const rows = [
      ["FLOPs", fmtSI(op.flops), op.flops_source],
      ["HBM bytes", fmtSI(op.hbm_bytes, "B"), op.bytes_source],
      ["interconnect bytes", fmtSI(op.ici_bytes, "B"), op.bytes_source],
    ];
    const achieved = op.measured_s > 0 ? [
      ["achieved", `${fmtSI(op.flops / op.measured_s, "FLOP/s")}, ${fmtSI(op.hbm_bytes / op.measured_s, "B/s")} HBM per device`, null],
      ["intensity", op.hbm_bytes > 0 ? `${g3(op.flops / op.hbm_bytes)} FLOPs per HBM byte` : "-", null],
    ] : [];
    const trace = [];
    if (op.trace_flops !== null) trace.push(["trace's FLOPs", fmtSI(op.trace_flops), "trace"]);
    if (op.trace_bytes !== null) trace.push(["trace's bytes", fmtSI(op.trace_bytes, "B"), "trace"]);
    return section("FLOPs and bytes", el("table", { class: "kv" }, [...rows, ...trace, ...achieved].map(([name, value, source]) =>
      el("tr", {}, el("th", {}, name), el("td", {}, value),
        el("td", { class: "muted" }, source ? `${source}: ${SOURCE_WORDS[source] || source}` : "")))));
  },

  // GPU: the kernels the op ran, heaviest first (JSON ops[].kernels; the trace's names, counts
  // and times, its kernel_details stat key by key, the tile the name states)
  kernels(op) {
    if (!op.kernels) return null;
    if (!op.kernels.length) return section("kernels", el("p", { class: "muted" }, "no kernel of this op in the trace"));
    const launch = (k) => k.launch
      ? Object.entries(k.launch).map(([key, value]) => `${key}:${Array.isArray(value) ? value.join(",") : value}`).join(" ")
      : k.launch_configs > 1 ? `${k.launch_configs} launch configurations` : "-";
    const tile = (t) => !t ? "-" : t.as_named ? `${t.text} (as named)`
      : `${t.m}×${t.n}×${t.k} (M×N×K${t.stages ? `, ${t.stages} stages` : ""})`;
    return section(`kernels (${op.kernels.length}, all executions, all devices)`, el("table", { class: "kernels" },
      el("tr", {}, el("th", {}, "kernel"), el("th", {}, "count"), el("th", {}, "time"), el("th", {}, "launch"), el("th", {}, "tile")),
      op.kernels.map((k) => el("tr", {},
        el("td", {}, el("code", { title: k.name }, k.name.length > 80 ? k.name.slice(0, 79) + "…" : k.name)),
        el("td", { class: "num" }, String(k.count)),
        el("td", { class: "num" }, fmtSeconds(k.time_s)),
        el("td", { class: "muted" }, launch(k)),
        el("td", { class: "muted" }, tile(k.tile))))),
      el("p", { class: "muted" }, "launch: the trace's kernel_details as recorded; a tile is read from the name only where the library documents its convention"));
  },

  where(op) {
    const stack = op.stack || [];
    return section("source", el("table", { class: "kv" },
      el("tr", {}, el("th", {}, "location"), el("td", {}, op.source ? el("code", {}, op.source) : "-")),
      el("tr", {}, el("th", {}, "scope"), el("td", {}, op.scope ? el("code", {}, op.scope) : "-"))),
      stack.length ? el("details", { class: "stack", open: stack.length <= 8 },
        el("summary", {}, `stack (${stack.length} frames, innermost first)`),
        el("ol", {}, stack.map((frame) => el("li", {}, el("code", {}, frame))))) : null);
  },

  sharding(op, text) {
    const rows = [["shape (per device)", op.shape ? el("code", {}, op.shape) : "-"]];
    if (text.sharding.length) rows.push(["global / split", el("div", {}, text.sharding.map((line) => el("div", {}, el("code", {}, line))))]);
    const c = op.collective;
    if (c) {
      rows.push(["collective", `${c.kind}: ${c.group_size} devices per group` + (c.groups ? `, ${c.groups} groups` : "") +
        (c.axes ? ` over ${c.axes.join(",")}` : "") + (c.bytes !== null ? `, ${fmtSI(c.bytes, "B")} output` : "")]);
    }
    if (op.exposed_s !== null) rows.push(["exposed", `${fmtSeconds(op.exposed_s)} not overlapped with compute (all devices)`]);
    return section("sharding", el("table", { class: "kv" }, rows.map(([name, value]) => el("tr", {}, el("th", {}, name), el("td", {}, value)))));
  },

  async(op) {
    if (op.async_span_s === null && op.exposed_wait_s === null) return null;
    return section("async transfer", el("table", { class: "kv" },
      el("tr", {}, el("th", {}, "exposed wait"), el("td", {}, fmtSeconds(op.exposed_wait_s))),
      el("tr", {}, el("th", {}, "start-to-done span"), el("td", {},
        op.async_span_s === null ? "-" : `${fmtSeconds(op.async_span_s)} over ${op.async_span_n} executions (the trace's async line)`)),
      el("tr", {}, el("th", {}, "ideal of those transfers"), el("td", {},
        op.async_span_ideal_s === null ? "-" : `${fmtSeconds(op.async_span_ideal_s)}: efficiency = ideal / span`))));
  },

  hlo(op) {
    if (!op.hlo) {
      return section("HLO", el("p", { class: "muted" }, op.program
        ? "not in this report (it was built without the page's data)"
        : "no HLO instruction was joined to this op"));
    }
    return section("HLO",
      el("pre", { class: "hlo", id: "detail-hlo" }, op.hlo),
      op.fused_body ? el("details", { class: "fused", open: op.fused_body.split("\n").length <= 40 },
        el("summary", {}, "fused computation"), el("pre", { class: "hlo" }, op.fused_body)) : null);
  },
};

function section(title, ...content) {
  return el("section", { class: "detail-section" }, el("h3", {}, title), ...content);
}

// The op table: one row per op (device-summed figures), sortable on every column and
// filtered by category, bound, flag, program and free text.

const COLUMNS = [
  { id: "op", title: "op", text: (op) => op.label, kind: "text", cls: "name" },
  { id: "category", title: "category", text: (op) => op.category, kind: "text" },
  { id: "n", title: "n", value: (op) => op.occurrences, kind: "num", tip: "executions, summed over devices" },
  { id: "measured", title: "measured", value: (op) => op.measured_s, kind: "num", lines: (op, t) => t.measured },
  { id: "share", title: "%", value: (op) => op.measured_s / OP_TIME_TOTAL, kind: "num", show: (v) => fmtPercent(v, 0), tip: "share of all op time" },
  { id: "ideal", title: "ideal", value: (op) => (op.async_span_s !== null && op.async_span_ideal_s !== null ? op.async_span_ideal_s : op.roofline_s), kind: "num", lines: (op, t) => t.ideal },
  { id: "bound", title: "bound", text: (op) => op.bound_by, kind: "text" },
  { id: "eff", title: "eff", value: (op) => op.efficiency, kind: "num", tip: "efficiency: ideal / measured" },
  { id: "wait", title: "wait", value: (op) => op.exposed_wait_s, kind: "num", lines: (op, t) => t.wait, tip: "async dones: the exposed wait over the n executions" },
  { id: "flops", title: "FLOPs", value: (op) => op.flops, kind: "num", lines: (op, t) => t.flops },
  { id: "bytes", title: "bytes", value: (op) => op.hbm_bytes + op.ici_bytes, kind: "num", lines: (op, t) => t.bytes },
  { id: "source", title: "source", text: (op) => op.source || "", kind: "text" },
  { id: "flags", title: "flags", text: (op) => op.flags.join(" "), kind: "text" },
];

// What needs the HLO: a report joined to none (trace.hlo_missing) shows none of them.
const ROOFLINE_COLUMNS = new Set(["ideal", "bound", "eff", "flops", "bytes"]);
const shownColumns = () =>
  (REPORT.trace.hlo_missing ? COLUMNS.filter((c) => !ROOFLINE_COLUMNS.has(c.id)) : COLUMNS);

const opTable = {
  sortColumn: "measured",
  descending: true,
  limit: 100,
  rows: [],
  filters: { text: "", category: "", bound: "", flag: "", program: "" },

  init(top) {
    this.limit = Math.max(top, 100);
    this.table = document.getElementById("ops-table");
    this.more = document.getElementById("ops-more");
    this.count = document.getElementById("ops-count");
    this.buildFilters();
    this.buildHead();
    this.render();
  },

  buildFilters() {
    const box = document.getElementById("ops-filters");
    const distinct = (values) => [...new Set(values)].filter((v) => v).sort();
    const select = (name, label, options) =>
      el("label", {}, label + " ",
        el("select", { id: "filter-" + name, onchange: (e) => this.setFilter(name, e.target.value) },
          el("option", { value: "" }, "all"),
          options.map(([value, text]) => el("option", { value }, text))));
    const flags = distinct(OPS.flatMap((op) => op.flags));
    box.append(
      el("input", { id: "filter-text", type: "search", placeholder: "filter: name, opcode, source, scope…",
        oninput: (e) => this.setFilter("text", e.target.value.trim().toLowerCase()) }),
      select("category", "category", distinct(OPS.map((op) => op.category)).map((v) => [v, v])),
      select("bound", "bound", distinct(OPS.map((op) => op.bound_by)).map((v) => [v, v])),
      select("flag", "flag", [["*", "any flag"], ["-", "no flag"], ...flags.map((v) => [v, v])]),
      select("program", "program", distinct(OPS.map((op) => op.program)).map((v) => [v, v])),
      el("span", { id: "ops-count", class: "muted" }),
    );
    this.count = document.getElementById("ops-count");
  },

  setFilter(name, value) {
    this.filters[name] = value;
    this.render();
  },

  buildHead() {
    const row = el("tr");
    for (const column of shownColumns()) {
      row.append(el("th", {
        "data-col": column.id, title: column.tip || "sort by " + column.title, tabindex: 0,
        class: column.kind === "num" ? "num" : "",
        onclick: () => this.sortBy(column.id),
        onkeydown: (e) => { if (e.key === "Enter") this.sortBy(column.id); },
      }, column.title));
    }
    this.table.append(el("thead", {}, row), el("tbody"));
  },

  sortBy(id) {
    const column = COLUMNS.find((c) => c.id === id);
    if (this.sortColumn === id) this.descending = !this.descending;
    else this.descending = column.kind === "num";
    this.sortColumn = id;
    this.render();
  },

  matches(op) {
    const f = this.filters;
    if (f.category && op.category !== f.category) return false;
    if (f.bound && op.bound_by !== f.bound) return false;
    if (f.program && op.program !== f.program) return false;
    if (f.flag === "*" && !op.flags.length) return false;
    if (f.flag === "-" && op.flags.length) return false;
    if (f.flag && f.flag !== "*" && f.flag !== "-" && !op.flags.includes(f.flag)) return false;
    if (f.text) {
      const haystack = [op.label, op.name, op.opcode, op.source, op.scope, op.program, op.category]
        .join(" ").toLowerCase();
      if (!haystack.includes(f.text)) return false;
    }
    return true;
  },

  sorted() {
    const column = COLUMNS.find((c) => c.id === this.sortColumn);
    const sign = this.descending ? -1 : 1;
    const indices = OPS.map((_, i) => i).filter((i) => this.matches(OPS[i]));
    const key = column.kind === "num" ? column.value : column.text;
    indices.sort((a, b) => {
      const x = key(OPS[a]), y = key(OPS[b]);
      const xMissing = x === null || x === undefined || x === "", yMissing = y === null || y === undefined || y === "";
      if (xMissing || yMissing) return xMissing === yMissing ? a - b : xMissing ? 1 : -1; // unknown last
      if (x < y) return -sign;
      if (x > y) return sign;
      return a - b;
    });
    return indices;
  },

  cell(column, op, text) {
    const td = el("td", { "data-col": column.id });
    if (column.kind === "num") {
      const value = column.value(op);
      td.className = "num";
      if (value !== null && value !== undefined) td.dataset.value = value;
      if (column.lines) td.append(...column.lines(op, text).flatMap((line, i) => (i ? [el("br"), line] : [line])));
      else if (column.show) td.textContent = column.show(value);
      else if (column.id === "eff") {
        td.textContent = op.efficiency === null ? "-" : fmtPercent(op.efficiency, 0);
        if (op.efficiency !== null) td.classList.add(op.efficiency < 0.1 ? "bad" : op.efficiency < 0.5 ? "warn" : "ok");
      } else td.textContent = String(value);
      return td;
    }
    if (column.id === "bound") td.append(el("span", { class: "chip", style: `background:${boundColour(op.bound_by)}` }), op.bound_by);
    else if (column.id === "source") { td.textContent = shortSource(op.source); if (op.source) td.title = op.source; }
    else if (column.id === "flags") td.append(...op.flags.map((flag) => el("span", { class: "flag" }, flag)));
    else td.textContent = column.text(op);
    if (column.cls) td.classList.add(column.cls);
    return td;
  },

  render() {
    const indices = this.sorted();
    this.rows = indices;
    const body = this.table.tBodies[0];
    const shown = indices.slice(0, this.limit);
    body.replaceChildren(...shown.map((i) => {
      const op = OPS[i];
      const row = el("tr", { "data-key": op.key, "data-index": i, tabindex: 0 });
      if (i === detail.current) row.classList.add("selected");
      for (const column of shownColumns()) row.append(this.cell(column, op, TEXT[i]));
      return row;
    }));
    for (const th of this.table.tHead.rows[0].cells) {
      const active = th.dataset.col === this.sortColumn;
      th.setAttribute("aria-sort", active ? (this.descending ? "descending" : "ascending") : "none");
    }
    this.count.textContent = `${indices.length} of ${OPS.length} ops`;
    this.more.replaceChildren();
    if (indices.length > shown.length) {
      this.more.append(el("button", { onclick: () => { this.limit = indices.length; this.render(); } },
        `show all ${indices.length} (${indices.length - shown.length} more)`));
    }
  },

  select(index) {
    for (const row of this.table.querySelectorAll("tr.selected")) row.classList.remove("selected");
    const row = this.table.querySelector(`tr[data-index="${index}"]`);
    if (row) row.classList.add("selected");
  },

  attach() {
    const open = (target) => {
      const row = target.closest("tr[data-index]");
      if (row) detail.open(Number(row.dataset.index));
    };
    this.table.addEventListener("click", (e) => open(e.target));
    this.table.addEventListener("keydown", (e) => { if (e.key === "Enter") open(e.target); });
  },
};

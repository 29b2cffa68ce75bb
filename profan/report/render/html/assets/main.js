// The page's data (the report as profan.report.model.Report.to_dict writes it, plus the
// table's cells worded as the terminal words them) and the wiring between the parts.

const DATA = JSON.parse(document.getElementById("profan-data").textContent);
const REPORT = DATA.report;
const OPS = REPORT.ops;
const TEXT = DATA.text;
const RULES = REPORT.rules || {};
const TIMELINE = REPORT.timeline || null;
const OP_TIME_TOTAL = OPS.reduce((a, op) => a + op.measured_s, 0) || 1;
const OP_BY_KEY = new Map(OPS.map((op, i) => [op.key, i]));
const FINDINGS_BY_OP = new Map();
for (const finding of REPORT.findings) {
  if (!finding.op) continue;
  if (!FINDINGS_BY_OP.has(finding.op)) FINDINGS_BY_OP.set(finding.op, []);
  FINDINGS_BY_OP.get(finding.op).push(finding);
}

function openFromHash() {
  const match = /^#op=(.*)$/.exec(location.hash);
  if (!match) return;
  const index = OP_BY_KEY.get(decodeURIComponent(match[1]));
  if (index !== undefined) detail.open(index);
}

function start() {
  detail.init();
  opTable.init(DATA.top);
  opTable.attach();
  roofline.init();
  stepsChart.init();
  attachHeatMap();
  attachMemory();
  timeline.init();
  // op names anywhere on the page (findings, notes) open the op; step links show the step
  document.addEventListener("click", (e) => {
    const link = e.target.closest("[data-op]");
    if (link && !link.closest("#roofline")) {
      const index = OP_BY_KEY.get(link.dataset.op);
      if (index !== undefined) { e.preventDefault(); detail.open(index); }
      return;
    }
    const step = e.target.closest("a[data-step]");
    if (step) { e.preventDefault(); timeline.showStep(Number(step.dataset.step), true); }
  });
  openFromHash();
  window.addEventListener("hashchange", openFromHash);
  // what the page's own tests read: its parts, and a promise that settles once the first
  // timeline step is drawn (also a User Timing mark, "profan:ready", for measuring the open)
  const ready = timeline.ready.then(() => { performance.mark("profan:ready"); return true; });
  window.profanPage = { report: REPORT, detail, opTable, roofline, timeline, ready };
}

start();

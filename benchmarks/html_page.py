"""The interactive HTML report: what it costs to build, how big it is, how fast it opens and
redraws in headless Chromium (the system's, driven by Playwright: extra ``browser``).

Run::

    python benchmarks/make_big_trace.py                    # once: writes benchmarks/_data/big
    python benchmarks/html_page.py [TRACE ...] [--repeats 5]

Per trace (default: the big benchmark trace, and the TPU v6e corpus trace when present):

* ``build``: ``profan report TRACE --format html`` and ``--format json`` whole processes,
  alternating, fresh cache directory each (cold), median wall and CPU seconds; their difference
  is what the page adds (HLO lines, timeline slices, render).
* ``size``: the page's bytes, and the share that is the timeline.
* ``open``: a fresh page per repeat, from navigation to the first timeline step drawn (the
  page's ``profan:ready`` User Timing mark), in milliseconds of the page's own clock; median
  and worst.
* ``step``: choosing another step (decode + draw), ``zoom``: one redraw while zooming, median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.browser import CHROMIUM_ARGS, VIEWPORT, chromium_path  # noqa: E402

DEFAULT_TRACES = [
    REPO / "benchmarks" / "_data" / "big",
    REPO.parent / "shared" / "corpus" / "traces" / "tpu_v6e_inference.xplane.pb",
]


def _run(trace: Path, fmt: str, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one cold ``profan report`` process."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PROFAN_CACHE_DIR": cache, "PYTHONPATH": str(REPO)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "profan", "report", str(trace), "--format", fmt,
             "--out", str(out)],
            check=True, env=env, capture_output=True,
        )  # fmt: skip
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


_MEASURE = """async () => {
  const P = window.profanPage, t = P.timeline;
  const steps = P.report.timeline.steps.map((s) => s.step);
  const other = steps.find((s) => s !== t.data.step);
  let started = performance.now();
  await t.showStep(other);
  const step = performance.now() - started;
  const zooms = [];
  for (let k = 0; k < 10; k++) {
    started = performance.now();
    t.zoom(0.8);
    zooms.push(performance.now() - started);
  }
  zooms.sort((a, b) => a - b);
  return { step, zoom: zooms[5], slices: t.stats.slices };
}"""


def measure(trace: Path, repeats: int) -> dict:
    from playwright.sync_api import sync_playwright

    out = Path(tempfile.mkdtemp(prefix="profan-html-"))
    builds = {"html": [], "json": []}
    for _ in range(repeats):
        for fmt in ("html", "json"):
            builds[fmt].append(_run(trace, fmt, out))
    page_file = out / "report.html"
    data = json.loads((out / "report.json").read_text())
    embedded = page_file.read_text().split("id='profan-data'>", 1)[1].split("</script>", 1)[0]
    timeline = json.loads(embedded)["report"]["timeline"]
    opens, steps, zooms = [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(page_file.as_uri())
            page.evaluate("window.profanPage.ready")
            opens.append(page.evaluate("performance.getEntriesByName('profan:ready')[0].startTime"))
            measured = page.evaluate(_MEASURE)
            steps.append(measured["step"])
            zooms.append(measured["zoom"])
            page.close()
        browser.close()
    median = statistics.median
    return {
        "trace": str(trace),
        "op_events_in_steps": sum(step["count"] for step in timeline["steps"]),
        "ops": len(data["ops"]),
        "steps": len(data["steps"]),
        "html_wall_s": median(w for w, _ in builds["html"]),
        "html_cpu_s": median(c for _, c in builds["html"]),
        "json_wall_s": median(w for w, _ in builds["json"]),
        "json_cpu_s": median(c for _, c in builds["json"]),
        "page_bytes": page_file.stat().st_size,
        "timeline_bytes": len(json.dumps(timeline)),
        "open_ms_median": median(opens),
        "open_ms_worst": max(opens),
        "step_switch_ms": median(steps),
        "zoom_redraw_ms": median(zooms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    traces = args.traces or [t for t in DEFAULT_TRACES if t.exists()]
    for trace in traces:
        print(json.dumps(measure(trace, args.repeats), indent=1), flush=True)


if __name__ == "__main__":
    main()

"""How much ``profan report`` adds on top of loading the trace (the ≥50 MB CPU trace).

Run: ``python benchmarks/report_speed.py [TRACE_DIR]`` (default ``benchmarks/_data/big``, made by
``benchmarks/make_big_trace.py``).  Times, in the same process and run, best of N:

* ``load``: ``profan.load(path)`` alone;
* ``score``: ``profan.roofline.score`` on the loaded profile;
* ``report``: building the report (timeline overlap, rules) from profile + score;
* ``render``: terminal and JSON rendering;
* ``cli``: the whole ``python -m profan report PATH`` in a subprocess (load included).

Each phase uses a fresh cache directory so the HLO parse cache does not favour later runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files if p.name.endswith(".pb")) / 1e6


def _best(fn, repeats: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(REPO / "benchmarks/_data/big"))
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    path = Path(args.trace)
    if not path.exists():
        print(f"{path} not found: run benchmarks/make_big_trace.py first", file=sys.stderr)
        return 2
    os.environ["PROFAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="profan-bench-")

    import profan
    from profan import roofline
    from profan.report import terminal
    from profan.report.model import Analysis, build_report
    from profan.report.pipeline import _shardings, resolve_layout

    trace_path, hlo = resolve_layout(path, None)
    t_load, profile = _best(lambda: profan.load(trace_path, hlo=hlo), args.repeats)
    t_score, score = _best(lambda: roofline.score(profile), args.repeats)
    t_report, report = _best(
        lambda: build_report(Analysis(profile, score, _shardings(profile))), args.repeats
    )
    t_render, _ = _best(
        lambda: (terminal.render(report), json.dumps(report.to_dict())), args.repeats
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    t_cli, _ = _best(
        lambda: subprocess.run(
            [sys.executable, "-m", "profan", "report", str(path)],
            check=True,
            capture_output=True,
            env=env,
        ),
        1,
    )
    result = {
        "trace": str(path),
        "xplane_mb": round(_size_mb(path), 1),
        "op_events": len(profile.ops),
        "ops": len(report.ops),
        "load_s": round(t_load, 3),
        "score_s": round(t_score, 3),
        "report_build_s": round(t_report, 3),
        "render_s": round(t_render, 3),
        "report_on_top_of_load": round((t_score + t_report + t_render) / t_load, 3),
        "cli_report_s": round(t_cli, 3),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

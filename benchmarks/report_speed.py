"""How much ``profan report`` adds on top of loading the trace (the ≥50 MB CPU trace), and how this
tree compares with a reference tree (another checkout: main, or the code before a refactor).

Run::

    python benchmarks/make_big_trace.py      # once: writes benchmarks/_data/big
    git archive <commit> | tar -x -C /tmp/ref   # a reference tree, outside the repository
    python benchmarks/report_speed.py [TRACE_DIR] [--reference /tmp/ref] [--repeats 3]

Each tree is timed in its own subprocess (``PYTHONPATH`` = that tree), the trees alternating, the
best of ``--repeats`` kept per phase; the ratios are what to compare (the machine is shared).
Phases, in one process, on the same loaded profile:

* ``load``: ``profan.load(path)``;
* ``shardings``: ``sharding.describe`` of every module (the report needs it; scoring takes it);
* ``score``: ``profan.roofline.score`` on the loaded profile (with the shardings where the tree's
  ``score`` takes them; a tree whose ``score`` infers the mesh itself does that inside);
* ``report``: building the report (timeline overlap, rules) from profile + score + shardings;
* ``render``: terminal and JSON rendering;
* ``cli``: the whole ``python -m profan report PATH`` in a subprocess (load included).

Each process uses a fresh cache directory, so the HLO parse cache favours no phase or tree.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PHASES = ("load_s", "shardings_s", "score_s", "report_build_s", "render_s", "cli_report_s")


def _size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files if p.name.endswith(".pb")) / 1e6


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _builders() -> tuple[Callable[..., Any], Callable[..., Any], Callable[[Any], Any]]:
    """(Analysis, build_report, describe_shardings) of whichever layout this tree has."""
    try:
        from profan.report.analysis.build import Analysis, build_report
        from profan.report.analysis.pipeline import describe_shardings
    except ImportError:  # a tree from before the report package was restructured
        from profan.report.analysis.pipeline import _shardings as describe_shardings  # type: ignore
        from profan.report.model import Analysis, build_report  # type: ignore[no-redef]
    return Analysis, build_report, describe_shardings


def child(trace: Path) -> dict[str, float]:
    """One timing of every phase in this process (the tree on ``sys.path``)."""
    os.environ["PROFAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="profan-bench-")
    import profan
    from profan import roofline
    from profan.report.analysis.pipeline import resolve_layout
    from profan.report.render import terminal

    analysis, build_report, describe_shardings = _builders()
    trace_path, hlo = resolve_layout(trace, None)
    t_load, profile = _timed(lambda: profan.load(trace_path, hlo=hlo))
    t_shardings, shardings = _timed(lambda: describe_shardings(profile))
    takes_shardings = "shardings" in inspect.signature(roofline.score).parameters
    if takes_shardings:
        t_score, score = _timed(lambda: roofline.score(profile, shardings=shardings))
    else:
        t_score, score = _timed(lambda: roofline.score(profile))
    t_report, report = _timed(lambda: build_report(analysis(profile, score, shardings)))
    t_render, _ = _timed(lambda: (terminal.render(report), json.dumps(report.to_dict())))
    return {
        "load_s": t_load,
        "shardings_s": t_shardings,
        "score_s": t_score,
        "report_build_s": t_report,
        "render_s": t_render,
        "op_events": float(len(profile.ops)),
        "ops": float(len(report.ops)),
    }


def _run_tree(tree: Path, trace: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), str(trace), "--child"],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # so the tree on PYTHONPATH, not the cwd, provides profan
    )
    timings = json.loads(out.stdout.strip().splitlines()[-1])
    env["PROFAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="profan-bench-")
    t_cli, _ = _timed(
        lambda: subprocess.run(
            [sys.executable, "-m", "profan", "report", str(trace)],
            check=True,
            capture_output=True,
            env=env,
            cwd=tempfile.gettempdir(),
        )
    )
    timings["cli_report_s"] = t_cli
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(REPO / "benchmarks/_data/big"))
    parser.add_argument("--reference", type=Path, help="another tree to time in the same run")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = Path(args.trace).resolve()
    if not path.exists():
        print(f"{path} not found: run benchmarks/make_big_trace.py first", file=sys.stderr)
        return 2
    if args.child:
        print(json.dumps(child(path)))
        return 0
    trees = {"this": REPO}
    if args.reference is not None:
        trees["reference"] = args.reference.resolve()
    best: dict[str, dict[str, float]] = {name: {} for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            for key, value in _run_tree(tree, path).items():
                best[name][key] = min(best[name].get(key, float("inf")), value)
    result: dict[str, Any] = {"trace": str(path), "xplane_mb": round(_size_mb(path), 1)}
    for name, timings in best.items():
        on_top = sum(timings[k] for k in PHASES[1:5]) / timings["load_s"]
        result[name] = {
            "tree": str(trees[name]),
            **{k: round(v, 3) for k, v in timings.items()},
            "report_on_top_of_load": round(on_top, 3),
        }
    if "reference" in best:
        result["this_over_reference"] = {
            k: round(best["this"][k] / best["reference"][k], 3)
            for k in PHASES
            if best["reference"].get(k)
        }
        score_and_mesh = ("shardings_s", "score_s", "report_build_s")
        result["this_over_reference"]["shardings+score+build"] = round(
            sum(best["this"][k] for k in score_and_mesh)
            / sum(best["reference"][k] for k in score_and_mesh),
            3,
        )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

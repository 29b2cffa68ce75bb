"""What the memory analysis adds to ``profan report`` on the big benchmark trace.

    python benchmarks/make_big_trace.py            # once: benchmarks/_data/big (needs jax)
    python benchmarks/memory_speed.py [TRACE] [--repeat 3]

In one process per repetition (a fresh cache directory each time): the report without its memory
section (load, shardings, score, build, render), then the memory section alone
(``profan.report.analysis.memory.memory_section``: the buffer assignment of every program
that ran, read from the trace's metadata plane, decoded, replayed), and ``profan memory TRACE``
as a command.
Target (issue 12): the memory section adds at most 0.3x to the report's time.  Prints the
medians and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO / "benchmarks" / "_data" / "big"


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def child(trace: Path) -> dict[str, float]:
    os.environ["PROFAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="profan-bench-")
    import profan
    from profan import roofline
    from profan.memory.analyze import analyze_trace
    from profan.report.analysis import build, memory
    from profan.report.analysis.build import Analysis, build_report
    from profan.report.analysis.pipeline import describe_shardings, resolve_layout
    from profan.report.render import terminal

    trace_path, hlo = resolve_layout(trace, None)
    start = time.perf_counter()
    profile = profan.load(trace_path, hlo=hlo)
    shardings = describe_shardings(profile)
    score = roofline.score(profile, shardings=shardings)
    # The report without its memory section: the section's builder swapped for a no-op.
    real_section = build.memory_section
    build.memory_section = lambda profile, chip: []
    try:
        report = build_report(Analysis(profile, score, shardings))
    finally:
        build.memory_section = real_section
    terminal.render(report)
    json.dumps(report.to_dict())
    t_report = time.perf_counter() - start
    t_memory, entries = _timed(lambda: memory.memory_section(profile, score.chip))
    report.memory = entries
    t_render, _ = _timed(lambda: (terminal.render(report), json.dumps(report.to_dict())))
    t_command, standalone = _timed(lambda: analyze_trace(trace_path))
    return {
        "report_without_memory_s": t_report,
        "memory_section_s": t_memory + t_render,
        "profan_memory_s": t_command,
        "programs_in_section": float(len(entries)),
        "programs_in_trace": float(len(standalone.programs)),
        "op_events": float(len(profile.ops)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.trace)))
        return 0
    if not args.trace.exists():
        print(f"{args.trace}: missing; run python benchmarks/make_big_trace.py", file=sys.stderr)
        return 2
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), str(args.trace), "--child"],
            check=True,
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    xplane = max(args.trace.rglob("*.xplane.pb"), key=lambda p: p.stat().st_size)
    ratio = median["memory_section_s"] / median["report_without_memory_s"]
    print(f"trace {xplane} ({xplane.stat().st_size / 1e6:.1f} MB), {args.repeat} runs, medians:")
    for key, value in median.items():
        print(f"  {key:26s} {value:10.3f}")
    print(f"memory section adds {ratio:.2f}x to the report (target <= 0.30x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

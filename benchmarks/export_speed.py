"""What ``profan export`` costs on the ≥50 MB CPU trace, against ``profan report`` of the same
trace in the same run (the analysis both share is most of it), and how large its outputs are.

Run::

    python benchmarks/make_big_trace.py      # once: writes benchmarks/_data/big
    python benchmarks/export_speed.py [TRACE_DIR] [--repeats 3]

Each command runs as ``python -m profan ...`` in its own process with a fresh cache directory,
the commands alternating within each repeat; wall time and peak RSS (of that process alone,
from ``wait4``) are kept per command, the median over repeats printed with the
ratio to ``report --format json``.  Outputs go to a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(arguments: list[str], cache: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one ``python -m profan`` process."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROFAN_CACHE_DIR": cache}
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "profan", *arguments],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(process.pid, 0)  # this child's own resource usage
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise SystemExit(f"profan {' '.join(arguments)} failed ({process.returncode})")
    return elapsed, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?", default=str(REPO / "benchmarks" / "_data" / "big"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    trace = Path(args.trace)
    inputs = sum(p.stat().st_size for p in trace.rglob("*.xplane.pb"))
    with tempfile.TemporaryDirectory(prefix="profan-export-bench-") as out:
        commands = {
            "report --format json": ["report", str(trace), "--format", "json"],
            "export .xplane.pb": ["export", str(trace), "-o", f"{out}/big.xplane.pb"],
            "export .json": ["export", str(trace), "-o", f"{out}/big.json"],
            "export .json.gz": ["export", str(trace), "-o", f"{out}/big.json.gz"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        peaks: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, arguments in commands.items():
                with tempfile.TemporaryDirectory(prefix="profan-cache-") as cache:
                    elapsed, peak = _run(arguments, cache)
                times[name].append(elapsed)
                peaks[name].append(peak)
        sizes = {name: (Path(out) / f"big{name.split()[-1]}").stat().st_size
                 for name in commands if name.startswith("export")}  # fmt: skip
    reference = statistics.median(times["report --format json"])
    print(f"trace {trace} ({inputs / 1e6:.1f} MB of xplane), {args.repeats} repeats, median wall")
    print(f"{'command':24} {'wall s':>8} {'vs report':>10} {'peak RSS MB':>12} {'output MB':>10}")
    for name, values in times.items():
        wall = statistics.median(values)
        peak = statistics.median(peaks[name])
        size = f"{sizes[name] / 1e6:10.1f}" if name in sizes else f"{'-':>10}"
        print(f"{name:24} {wall:8.2f} {wall / reference:9.2f}x {peak:12.0f} {size}")


if __name__ == "__main__":
    main()

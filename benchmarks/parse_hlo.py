"""Parse speed of profan's HLO parser on the three largest corpus modules, against XLA's.

    python benchmarks/parse_hlo.py [--corpus ../shared/corpus] [--repeat 3] [--baseline DIR]

Prints MB/s for profan (cache off; lark-cython when installed) and, when jaxlib is importable,
for XLA's own C++ parser on the same text in the same run, and the ratio (target: profan within
8x of XLA).  ``--baseline DIR`` also times the parser of another checkout (e.g. an export of
``main``: ``git archive main | tar -x -C DIR``) on the same files, interleaved with this one, and
prints this/baseline; both are then timed the same way, each in a fresh interpreter (a process
that has loaded jaxlib and parsed other modules collects garbage more slowly).  Also times a
repeated ``parse_file`` of an unchanged file (served from the cache).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from profan.hlo import parse_file, parse_module  # noqa: E402
from profan.hlo.parser import _parsers, parser_backend  # noqa: E402


def xla_parser() -> Callable[[str], object] | None:
    """XLA's C++ text parser from the installed jaxlib, wherever this version keeps it."""
    try:
        from jax._src.lib import xla_client
    except Exception:  # no jaxlib: profan's numbers alone
        return None
    for owner in (getattr(xla_client, "hlo", None), getattr(xla_client, "_xla", None)):
        function = getattr(owner, "hlo_module_from_text", None)
        if function is not None:
            return function
    return None


# Run in a child process with the baseline checkout first on sys.path: best-of-N seconds.
_BASELINE_TIMER = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from profan.hlo.parser import _parsers, parse_module
_parsers()
text = open(sys.argv[2]).read()
best = min(
    (lambda start: (parse_module(text), time.perf_counter() - start)[1])(time.perf_counter())
    for _ in range(int(sys.argv[3]))
)
print(json.dumps(best))
"""


def seconds_in_child(checkout: str, path: Path, repeat: int) -> float:
    """Best-of-``repeat`` parse time of ``path`` by the profan in ``checkout``, in a fresh
    interpreter."""
    found = subprocess.run(
        [sys.executable, "-c", _BASELINE_TIMER, checkout, str(path), str(repeat)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(found.stdout.strip().splitlines()[-1]))


def best_of(repeat: int, function: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", help="another checkout to time on the same files")
    args = parser.parse_args()
    root = Path(args.corpus) / "hlo" / "xla"
    files = sorted(root.glob("*.hlo"), key=lambda p: p.stat().st_size)[-3:]
    if not files:
        print(f"no corpus at {root}", file=sys.stderr)
        return 2
    os.environ.setdefault("PROFAN_CACHE_DIR", tempfile.mkdtemp(prefix="profan-bench-"))
    _parsers()  # build the grammar tables once, outside the timings
    xla = xla_parser()
    print(f"profan parser backend: {parser_backend()} (PROFAN_PURE_PYTHON=1 forces plain lark)")
    columns = [("MB", 6), ("lines", 6), ("profan MB/s", 11), ("XLA MB/s", 9), ("ratio", 6)]
    if args.baseline:
        columns += [("base MB/s", 9), ("this/base", 9)]
    print(f"{'module':70s} " + " ".join(f"{name:>{width}s}" for name, width in columns))
    worst = 0.0
    slowest = 0.0
    for path in files:
        text = path.read_text()
        megabytes = len(text.encode()) / 1e6
        if args.baseline:
            base_s = seconds_in_child(args.baseline, path, args.repeat)
            profan_s = seconds_in_child(str(REPO), path, args.repeat)
        else:
            profan_s = best_of(args.repeat, lambda t=text: parse_module(t))
        row = f"{path.name[:70]:70s} {megabytes:6.2f} {text.count(chr(10)):6d} "
        row += f"{megabytes / profan_s:11.2f} "
        if xla is not None:
            xla_s = best_of(args.repeat, lambda t=text: xla(t))
            ratio = profan_s / xla_s
            worst = max(worst, ratio)
            row += f"{megabytes / xla_s:9.2f} {ratio:5.1f}x"
        else:
            row += f"{'-':>9s} {'-':>6s}"
        if args.baseline:
            slowest = max(slowest, profan_s / base_s)
            row += f" {megabytes / base_s:9.2f} {profan_s / base_s:8.2f}x"
        print(row, flush=True)
    if xla is not None:
        print(f"worst ratio profan/XLA: {worst:.1f}x (target <= 8x)")
    if args.baseline:
        print(f"slowest this/baseline: {slowest:.2f}x (1.00 = as fast as the baseline)")
    else:
        print("jaxlib not importable: XLA's parser not timed")
    path = files[-1]
    parse_file(path)  # fill the cache
    cached_s = best_of(args.repeat, lambda: parse_file(path))
    print(f"repeated parse_file of {path.name} (cached): {cached_s * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

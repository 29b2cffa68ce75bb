"""Benchmark: re-opening an unchanged profile from profan's cache, against a cold read and against
XProf re-opening with the cache file it keeps beside the trace.

Usage::

    python benchmarks/make_big_trace.py          # once: writes benchmarks/_data/big (~69 MB)
    python benchmarks/reopen.py [TRACE] [--repeat N] [--format term json ...] [--no-xprof]

Every command is a whole process (``python -m profan ...``: interpreter start, imports, output
included), timed from outside; the commands of one round run one after the other and the
rounds repeat, so each ratio is taken within a round (paired) and the medians are reported.
Wall time and CPU time (user + system of the child) are both given: on a shared machine CPU
time is the steadier of the two.

Commands (one round):

* ``cold``: ``profan report --no-cache``: reads the trace (the HLO parse cache stays warm, as
  in a repeated session before this cache existed);
* ``first``: ``profan report`` with nothing of this profile in the cache (the HLO parse cache
  kept warm, as for ``cold``): a cold read plus filling the cache (hashing the inputs, writing
  the profile and the report);
* ``warm``: ``profan report`` again: the stored report (JSON and HTML: the stored text);
* ``profile``: ``profan report`` with the stored report removed: the stored profile, scored
  and built again (what another ``--chip`` or rule set costs);
* ``xprof-cached``: XProf's ``overview_page`` on a private copy of the trace whose directory
  holds the ``ALL_HOSTS.op_stats_v2.pb`` that XProf wrote there on a first run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.load_trace import DEFAULT, _xplane  # noqa: E402  (the same trace, found alike)

XPROF_CALL = (
    "import sys; from xprof.convert import raw_to_tool_data; "
    "data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], 'overview_page', {}); "
    "sys.stdout.write(str(len(data)))"
)


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", default=str(DEFAULT))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--format", nargs="+", default=["term", "json"])
    parser.add_argument("--no-xprof", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profan-reopen-") as temp:
        base = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
        parse_cache = Path(temp) / "parse-cache"  # the cold read's: HLO parses kept warm
        cache = Path(temp) / "cache"
        profan = [sys.executable, "-m", "profan", "report", args.trace]
        # what re-opening a profile stores (the parse caches hlo, hloproto, lark stay)
        stored = [cache / kind for kind in ("reports", "profiles", "hosts", "inputs")]
        commands: dict[str, tuple[list[str], dict[str, str], list[Path]]] = {}
        for fmt in args.format:
            cold_env = {**base, "PROFAN_CACHE_DIR": str(parse_cache)}
            warm_env = {**base, "PROFAN_CACHE_DIR": str(cache)}
            command = [*profan, "--format", fmt]
            commands[f"{fmt} cold"] = ([*command, "--no-cache"], cold_env, [])
            commands[f"{fmt} first"] = (command, warm_env, stored)  # emptied before each run
            commands[f"{fmt} warm"] = (command, warm_env, [])
            commands[f"{fmt} profile"] = (command, warm_env, [cache / "reports"])
        if not args.no_xprof:
            copy = Path(temp) / "xprof" / _xplane(Path(args.trace)).name
            copy.parent.mkdir()
            shutil.copy(_xplane(Path(args.trace)), copy)
            xprof = [sys.executable, "-c", XPROF_CALL, str(copy)]
            _timed(xprof, base)  # writes ALL_HOSTS.op_stats_v2.pb beside the copy
            if not (copy.parent / "ALL_HOSTS.op_stats_v2.pb").is_file():
                sys.exit("xprof wrote no cache file beside the trace")
            commands["xprof-cached"] = (xprof, base, [])
        for command, env, _ in commands.values():  # warm-up: caches filled, files in memory
            _timed(command, env)
        rounds: list[dict[str, tuple[float, float]]] = []
        for _ in range(args.repeat):
            times = {}
            for name, (command, env, emptied) in commands.items():
                for folder in emptied:
                    shutil.rmtree(folder, ignore_errors=True)
                times[name] = _timed(command, env)
            rounds.append(times)
    print(f"trace: {args.trace}; {args.repeat} rounds; medians (min-max)")
    print(f"{'command':18s} {'wall s':>18s} {'cpu s':>18s}")
    for name in commands:
        walls = [r[name][0] for r in rounds]
        cpus = [r[name][1] for r in rounds]
        print(
            f"{name:18s} {statistics.median(walls):7.3f} ({min(walls):.2f}-{max(walls):.2f})"
            f" {statistics.median(cpus):7.3f} ({min(cpus):.2f}-{max(cpus):.2f})"
        )
    print("\npaired ratios, medians (wall / cpu):")
    for fmt in args.format:
        for name in ("warm", "profile", "first"):
            ratio = _ratio(rounds, f"{fmt} {name}", f"{fmt} cold")
            print(f"  {fmt} {name} / {fmt} cold: {ratio}")
        if "xprof-cached" in commands:
            print(f"  {fmt} warm / xprof-cached: {_ratio(rounds, f'{fmt} warm', 'xprof-cached')}")
    return 0


def _ratio(rounds: list[dict[str, tuple[float, float]]], a: str, b: str) -> str:
    walls = [r[a][0] / r[b][0] for r in rounds]
    cpus = [r[a][1] / r[b][1] for r in rounds]
    return f"{statistics.median(walls):.3f}x / {statistics.median(cpus):.3f}x"


if __name__ == "__main__":
    raise SystemExit(main())

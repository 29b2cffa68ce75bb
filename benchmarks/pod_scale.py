"""Benchmark: a pod's profile (8, 32, 64 hosts) — profan with local processes and with a Dask
LocalCluster, against xprof's ``overview_page`` over the same files, in one run.

Usage::

    python benchmarks/make_big_trace.py       # once: benchmarks/_data/big (~70 MB, one host)
    python benchmarks/pod_scale.py [--hosts 8 32 64] [--no-xprof] [--no-dask]

Every host is a hard link of the big trace's xplane (``host000.xplane.pb`` ...), so the files cost
no disk; xprof reads its own symbolic links to them in a temporary directory (its converters write
a cache file beside their input, so never in ``benchmarks/_data``). Each task is one fresh process
tree, timed from start to exit. Peak memory is given three ways: ``max proc`` (the largest single
process, ``getrusage`` over the waited-for tree), ``tree sum`` (the largest sum of the tree's RSS,
sampled every 50 ms with psutil) and ``tree PSS`` (the same sum of PSS, which splits shared pages
between the processes sharing them instead of counting them in each); for Dask both sums include
the cluster's scheduler, nannies and workers. The one-host row is ``profan report`` of one host:
the 1.5x RSS target is against it.

Targets (issue 11): at every host count, profan's wall time <= 0.7x xprof's, peak RSS <= 1.5x
that of one host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / "_data"
BIG = DATA / "big"


def _big_xplane() -> Path:
    found = sorted((BIG / "trace").rglob("*.xplane.pb"))
    if not found:
        raise SystemExit("no big trace: run python benchmarks/make_big_trace.py first")
    return found[0]


def _pod(source: Path, hosts: int, root: Path) -> Path:
    """A run directory of ``hosts`` hard links of ``source`` (made once, reused)."""
    run = root / f"pod{hosts}" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True, exist_ok=True)
    for index in range(hosts):
        target = run / f"host{index:03d}.xplane.pb"
        if not target.exists():
            os.link(source, target)
    return run.parent.parent.parent


def _sample_tree(pids: list[int], stop: threading.Event, peak: list[int]) -> None:
    """``peak[0]``: the largest RSS sum of the trees; ``peak[1]``: the largest PSS sum (shared
    pages split among the processes sharing them: what the run costs the machine)."""
    import psutil

    roots = [psutil.Process(pid) for pid in pids]
    while not stop.is_set():
        total = pss = 0
        for root in roots:
            try:
                family = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for process in family:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    info = process.memory_full_info()
                    total += info.rss
                    pss += info.pss
        peak[0] = max(peak[0], total)
        peak[1] = max(peak[1], pss)
        stop.wait(0.05)


# Runs the task as its own child and reports ru_maxrss of its waited-for tree: the largest
# single process of this task alone.
WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _measure(command: list[str], env: dict[str, str], extra_pids: list[int]) -> dict:
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    stop, peak = threading.Event(), [0, 0]
    sampler = threading.Thread(target=_sample_tree, args=([process.pid, *extra_pids], stop, peak))
    sampler.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - started
    stop.set()
    sampler.join()
    lines = err.decode(errors="replace").strip().splitlines()
    if process.returncode != 0 or not lines or not lines[-1].startswith("MAXRSS"):
        raise SystemExit(f"{' '.join(command)} failed:\n{chr(10).join(lines[-30:])}")
    return {
        "seconds": seconds,
        "max_proc_rss": int(lines[-1].split()[1]) * 1024,
        "tree_rss": peak[0],
        "tree_pss": peak[1],
        "stdout_bytes": len(out),
    }


def _forget_results(cache: Path) -> None:
    """Remove the cache's loaded profiles, hosts' results and reports (``profan.cache``): the
    next report reads its trace again, with the parsed modules still cached."""
    for kind in ("profiles", "hosts", "reports"):
        shutil.rmtree(cache / kind, ignore_errors=True)


def _profan(trace: Path, scheduler: str | None, cache: Path) -> list[str]:
    command = [sys.executable, "-m", "profan.cli", "report", str(trace), "--format", "json"]
    return [*command, "--scheduler", scheduler] if scheduler else command


XPROF = """
import sys
from xprof.convert import raw_to_tool_data
files = sys.argv[1:]
data, _ = raw_to_tool_data.xspace_to_tool_data(files, "overview_page", {})
print(len(data or b""))
"""


def _xprof_copy(run: Path, scratch: Path) -> list[str]:
    target = scratch / run.name
    target.mkdir(parents=True, exist_ok=True)
    files = []
    for file in sorted(run.glob("*.xplane.pb")):
        copy = target / file.name
        if not copy.exists():
            os.symlink(file.resolve(), copy)
        files.append(str(copy))
    return files


def _start_cluster(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    code = (
        "import sys, time\n"
        "from distributed import LocalCluster\n"
        "cluster = LocalCluster(n_workers=2, threads_per_worker=1, host='127.0.0.1',"
        " dashboard_address=None)\n"
        "print(cluster.scheduler_address, flush=True)\n"
        "sys.stdin.read()\n"
        "cluster.close()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    address = process.stdout.readline().strip()
    return process, address


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--no-xprof", action="store_true")
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    source = _big_xplane()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="profan-pods-") as scratch_name:
        scratch = Path(scratch_name)
        cache = scratch / "cache"
        env = {**os.environ, "PROFAN_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO), "CI": "1"}
        one = _pod(source, 1, DATA / "pods")
        # Warm the module cache once (every host embeds the same programs), so no row pays it;
        # what re-opening reuses goes, so the one-host row reads its host as the pods do.
        _measure(_profan(one, None, cache), env, [])
        _forget_results(cache)
        base = _measure(_profan(one, None, cache), env, [])
        rows.append({"hosts": 1, "tool": "profan report (one host)", **base})
        print(json.dumps(rows[-1]), file=sys.stderr)
        cluster = None
        if not args.no_dask:
            cluster, address = _start_cluster(env)
        try:
            for hosts in args.hosts:
                trace = _pod(source, hosts, DATA / "pods")
                result = _measure(_profan(trace, None, cache), env, [])
                rows.append({"hosts": hosts, "tool": "profan (local processes)", **result})
                print(json.dumps(rows[-1]), file=sys.stderr)
                if cluster is not None:
                    result = _measure(_profan(trace, address, cache), env, [cluster.pid])
                    rows.append({"hosts": hosts, "tool": "profan (Dask LocalCluster)", **result})
                    print(json.dumps(rows[-1]), file=sys.stderr)
                if not args.no_xprof:
                    run = next((trace / "plugins" / "profile").iterdir())
                    files = _xprof_copy(run, scratch / f"xprof{hosts}")
                    result = _measure([sys.executable, "-c", XPROF, *files], env, [])
                    rows.append({"hosts": hosts, "tool": "xprof overview_page", **result})
                    print(json.dumps(rows[-1]), file=sys.stderr)
        finally:
            if cluster is not None:
                cluster.stdin.close()
                cluster.wait(timeout=60)
    _table(rows, base)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def _table(rows: list[dict], base: dict) -> None:
    xprof = {r["hosts"]: r["seconds"] for r in rows if r["tool"].startswith("xprof")}
    print(
        "| hosts | tool | wall s | vs xprof | max proc RSS MB | x one host | tree sum RSS MB "
        "| x one host | tree sum PSS MB | x one host |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    one_proc, one_tree = base["max_proc_rss"] or 0, base["tree_rss"] or 0
    one_pss = base["tree_pss"] or 0
    for row in rows:
        ratio = row["seconds"] / xprof[row["hosts"]] if row["hosts"] in xprof else None
        proc = row["max_proc_rss"] or 0
        print(
            f"| {row['hosts']} | {row['tool']} | {row['seconds']:.1f} | "
            f"{'' if ratio is None else f'{ratio:.2f}x'} | {proc / 1e6:.0f} | "
            f"{proc / one_proc if one_proc else 0:.2f}x | {row['tree_rss'] / 1e6:.0f} | "
            f"{row['tree_rss'] / one_tree if one_tree else 0:.2f}x | {row['tree_pss'] / 1e6:.0f} | "
            f"{row['tree_pss'] / one_pss if one_pss else 0:.2f}x |"
        )


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: loading a large CPU trace (joined to its HLO) vs the bare protobuf decode and xprof.

Usage::

    python benchmarks/make_big_trace.py          # once: writes benchmarks/_data/big (~69 MB)
    python benchmarks/load_trace.py [TRACE] [--repeat N] [--no-xprof]

Every measurement runs in a fresh subprocess (so peak RSS is that task's own, read from
``getrusage``; times include the task's imports, as a CLI run would), ``--repeat`` times, in
the same run; the best time of each is reported, and the ratios are what to compare (the
machine is shared: absolute times drift).

Tasks:

* ``bare``: ``XSpace.FromString`` of the whole file with profan's schema on the protobuf (upb)
  runtime: the floor for any protobuf-based reader.
* ``profan-cold`` / ``profan-warm``: ``profan.load`` (discovery, decode, ops of every device,
  embedded HLO converted and joined, steps); cold with an empty module cache, warm with the
  converted modules cached under ``PROFAN_CACHE_DIR``.
* ``xprof-native``: xprof's own native XSpace reader (``xprof.profile_data.ProfileData``),
  visiting every event of the host plane with its stats: the alternative reader profan could
  have used.
* ``xprof-hlo_stats`` / ``xprof-overview_page``: xprof's converters producing those tools from
  the same file (run on a private copy: xprof may cache results next to the trace).

Targets (issue 3): profan ≤ 3× the bare decode; peak RSS ≤ 10× the file size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT = REPO / "benchmarks" / "_data" / "big"


def _task(name: str, path: str, scratch: str) -> dict:
    """Runs inside a child process; returns seconds and facts for one task."""
    import resource

    sys.path.insert(0, str(REPO))
    facts: dict = {}
    start = time.perf_counter()
    if name == "bare":
        from profan.trace.schema import load_schema

        space = load_schema("xplane.proto")["tensorflow.profiler.XSpace"].FromString(
            Path(path).read_bytes()
        )
        facts["planes"] = len(space.planes)
    elif name.startswith("profan"):
        import profan

        profile = profan.load(path)
        facts["ops"] = len(profile.ops)
        facts["matched"] = float(profile.ops["matched"].mean())
        facts["steps"] = len(profile.steps)
        facts["unmatched"] = profile.unmatched_count
    elif name == "xprof-native":
        from xprof.profile_data import ProfileData

        events = 0
        stats = 0
        with ProfileData.from_file(path) as data:
            for plane in data.planes:
                if plane.name != "/host:CPU":
                    continue
                for line in plane.lines:
                    for event in line.events:
                        events += 1
                        stats += len(event.stats)
                        _ = (event.name, event.start_ns, event.duration_ns)
        facts["events"] = events
        facts["stats"] = stats
    elif name.startswith("xprof-"):
        from xprof.convert import raw_to_tool_data

        tool = name.removeprefix("xprof-")
        copy = Path(scratch) / Path(path).name
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], tool, {})
        facts["output_bytes"] = len(data or b"")
    else:
        raise ValueError(name)
    seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": seconds, "peak_rss_bytes": peak_kib * 1024, **facts}


def _run(name: str, path: Path, scratch: Path, cache: Path) -> dict:
    env = {**os.environ, "PROFAN_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    call = f"_task({name!r}, {str(path)!r}, {str(scratch)!r})"
    code = (
        f"import json, sys; sys.path.insert(0, {str(REPO)!r}); "
        f"from benchmarks.load_trace import _task; print(json.dumps({call}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900
    )
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def _xplane(path: Path) -> Path:
    if path.is_file():
        return path
    found = sorted(path.rglob("*.xplane.pb"))
    if not found:
        sys.exit(f"no *.xplane.pb under {path}; run benchmarks/make_big_trace.py first")
    return found[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace", nargs="?", default=str(DEFAULT))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-xprof", action="store_true", help="skip the xprof comparisons")
    args = parser.parse_args()
    xplane = _xplane(Path(args.trace))
    size = xplane.stat().st_size
    print(f"trace: {xplane} ({size / 1e6:.1f} MB)")
    tasks = ["bare", "profan-cold", "profan-warm"]
    if not args.no_xprof:
        try:
            import xprof  # noqa: F401

            tasks += ["xprof-native", "xprof-hlo_stats", "xprof-overview_page"]
        except ImportError:
            print("xprof not installed: skipping the xprof comparisons")
    results: dict[str, list[dict]] = {task: [] for task in tasks}
    with tempfile.TemporaryDirectory(prefix="profan-bench-") as temp:
        scratch = Path(temp) / "trace"
        scratch.mkdir()
        for _ in range(args.repeat):
            for task in tasks:
                cache = Path(temp) / "cache"
                if task == "profan-cold" and cache.exists():
                    shutil.rmtree(cache)
                if task.startswith("xprof-") and task != "xprof-native":
                    for old in scratch.iterdir():  # a fresh copy: no saved results to reuse
                        if old.is_dir():
                            shutil.rmtree(old)
                        else:
                            old.unlink()
                    shutil.copy(xplane, scratch / xplane.name)
                results[task].append(_run(task, xplane, scratch, cache))
    best: dict[str, dict] = {}
    for task, runs in results.items():
        good = [r for r in runs if "seconds" in r]
        if not good:
            print(f"{task:22s} failed: {runs[0].get('error')}")
            continue
        best[task] = min(good, key=lambda r: r["seconds"])
        times = ", ".join(f"{r['seconds']:.2f}" for r in good)
        facts = {k: v for k, v in best[task].items() if k not in ("seconds", "peak_rss_bytes")}
        print(
            f"{task:22s} best {best[task]['seconds']:6.2f} s (runs: {times})  "
            f"peak RSS {best[task]['peak_rss_bytes'] / 1e6:7.0f} MB "
            f"({best[task]['peak_rss_bytes'] / size:4.1f}x file)  {facts}"
        )
    if "bare" in best:
        bare = best["bare"]["seconds"]
        print("\nratios to the bare protobuf decode (target for profan: <= 3x time):")
        for task, result in best.items():
            if task != "bare":
                print(f"  {task:22s} {result['seconds'] / bare:5.2f}x time")
    for task in ("profan-cold", "profan-warm"):
        if task in best:
            ratio = best[task]["peak_rss_bytes"] / size
            verdict = "ok" if ratio <= 10 else "OVER"
            print(f"  {task:22s} peak RSS {ratio:4.1f}x file size (target <= 10x): {verdict}")
    for task in ("xprof-native", "xprof-hlo_stats", "xprof-overview_page"):
        if task in best and "profan-warm" in best:
            print(
                f"  profan-warm vs {task:20s} "
                f"{best['profan-warm']['seconds'] / best[task]['seconds']:5.2f}x time"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

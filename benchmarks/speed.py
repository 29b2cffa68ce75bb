"""Benchmark (issue 19): profan against its references in one run, paired, one table.

Usage::

    python benchmarks/make_big_trace.py      # once: benchmarks/_data/big (69 MB, 502k op events)
    python benchmarks/speed.py [--repeats 3] [--hosts 8 64] [--no-pods] [--no-parse]
                               [--json FILE] [--reference DIR]

``--reference DIR``: another profan tree (``git archive main | tar -x -C DIR``) whose cold
report is timed in the same repeats too (its wall time and peak RSS beside this tree's).

What it measures (each command a fresh process, timed from start to exit; peak RSS is the
largest process of its tree, from ``getrusage``):

* ``report``: ``profan report`` of the big trace against XProf's ``overview_page`` of the same
  file, in the same repeat, one after the other. Cold: profan with a fresh cache directory in
  which only the grammar tables are built (``profan hlo`` of a small fixture: what any earlier
  use of profan leaves; built in that very directory: lark keys its tables by their path), XProf
  on a fresh symbolic link to the trace in a temporary directory (it writes
  ``ALL_HOSTS.op_stats_v2.pb`` beside its input, so never in ``benchmarks/_data``). Warm: the
  same command again, profan with the same cache directory, XProf with its cache file. "First run
  ever" is profan with an empty cache directory (grammar tables built too).
* start-up: ``python -c pass`` (the interpreter alone), ``import profan``, ``profan --help``,
  ``profan chips``.
* parse: the three largest modules of ``../shared/corpus/hlo/xla`` parsed by profan (cache off,
  fresh interpreter, grammar built beforehand) against XLA's C++ parser from jaxlib
  (``parse_hlo.py``'s timers).
* pods: ``pod_scale.py`` at ``--hosts`` (local processes) against XProf over the same files.

Every Python command runs with its bytecode cached (``PYTHONPYCACHEPREFIX`` in a scratch
directory, after one untimed run), as an installed package would: without it every run
compiles profan's sources again (about 0.2 s).  Medians of ``--repeats``; a ratio is the
median of the per-repeat ratios (each pair ran back to back), with its range.
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIG = HERE / "_data" / "big"
SEED_HLO = (
    REPO / "fixtures" / "mlp" / "hlo" / "module_0024.jit_train_step.cpu_after_optimizations.txt"
)

sys.path.insert(0, str(HERE))
from pod_scale import WRAPPER  # noqa: E402

# XProf's overview_page of the files given (what pod_scale.py times too).
XPROF = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data(sys.argv[1:], "overview_page", {})
print(len(data or b""))
"""


def measure(command: list[str], env: dict[str, str]) -> dict[str, float]:
    """Wall seconds and the largest process's peak RSS (bytes) of one command (run outside any
    checkout: ``python -m profan`` imports the tree on ``PYTHONPATH``, not the current dir)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *command],
        env=env,
        capture_output=True,
        cwd=tempfile.gettempdir(),
    )
    seconds = time.perf_counter() - started
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("MAXRSS"):
        raise SystemExit(f"{' '.join(command)} failed:\n" + "\n".join(lines[-30:]))
    return {"seconds": seconds, "rss": int(lines[-1].split()[1]) * 1024}


def _xplane() -> Path:
    found = sorted((BIG / "trace").rglob("*.xplane.pb"))
    if not found:
        raise SystemExit("no big trace: run python benchmarks/make_big_trace.py first")
    return found[0]


def _profan(*argv: str) -> list[str]:
    return [sys.executable, "-m", "profan", *argv]


def _environment(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(scratch / "pyc"), CI="1")
    return env


def _median(values: list[float]) -> float:
    return statistics.median(values)


def report_rows(
    scratch: Path, env: dict[str, str], repeats: int, reference: Path | None
) -> list[dict]:
    xplane = _xplane()
    report = _profan("report", str(BIG), "--format", "json")

    def seeded(cache: Path) -> dict[str, str]:
        """A cache dir where only the grammar tables are built (lark keys them by their path
        too, so a copied cache dir would build them again)."""
        cache_env = {**env, "PROFAN_CACHE_DIR": str(cache)}
        subprocess.run(
            _profan("hlo", str(SEED_HLO)), env=cache_env, check=True, capture_output=True
        )
        return cache_env

    def xprof_dir(index: int) -> Path:
        folder = scratch / f"xprof{index}"
        folder.mkdir()
        os.symlink(xplane, folder / xplane.name)  # XProf writes its cache file beside this
        return folder / xplane.name

    reference_env = {**env, "PYTHONPATH": str(reference)} if reference else None
    # Untimed: compiles the bytecode of both and reads the file into the page cache.
    measure(report, {**env, "PROFAN_CACHE_DIR": str(scratch / "warmup-cache")})
    if reference_env:
        measure(report, {**reference_env, "PROFAN_CACHE_DIR": str(scratch / "warmup-ref")})
    measure([sys.executable, "-c", XPROF, str(xprof_dir(0))], env)
    runs: dict[str, list[dict[str, float]]] = {
        key: [] for key in ("cold", "warm", "first", "xprof_cold", "xprof_warm", "ref_cold")
    }
    for index in range(1, repeats + 1):
        if reference_env:
            ref_cache = {**reference_env, "PROFAN_CACHE_DIR": str(scratch / f"ref{index}")}
            subprocess.run(
                _profan("hlo", str(SEED_HLO)), env=ref_cache, check=True, capture_output=True
            )
            runs["ref_cold"].append(measure(report, ref_cache))
        cache_env = seeded(scratch / f"cache{index}")
        runs["cold"].append(measure(report, cache_env))
        copy = xprof_dir(index)
        runs["xprof_cold"].append(measure([sys.executable, "-c", XPROF, str(copy)], env))
        runs["warm"].append(measure(report, cache_env))
        runs["xprof_warm"].append(measure([sys.executable, "-c", XPROF, str(copy)], env))
        empty = {**env, "PROFAN_CACHE_DIR": str(scratch / f"empty{index}")}
        runs["first"].append(measure(report, empty))
        print(json.dumps({k: v[-1] for k, v in runs.items() if v}), file=sys.stderr, flush=True)
    pairs = (
        ("report cold", "cold", "xprof_cold", "XProf overview_page cold", "<= 0.4x"),
        ("report warm (same cache dir)", "warm", "xprof_warm", "XProf with its cache file",
         "<= 1x"),
        ("report first run ever (empty cache dir)", "first", "xprof_cold",
         "XProf overview_page cold", ""),
        ("report warm vs profan cold", "warm", "cold", "profan cold", "<= 0.1x"),
    )  # fmt: skip
    if reference_env:
        pairs += (
            ("report cold vs the reference tree", "cold", "ref_cold", f"{reference.name} cold",
             "RSS <= reference"),
        )  # fmt: skip
    rows = []
    for label, ours, theirs, reference_label, target in pairs:
        ratios = [
            a["seconds"] / b["seconds"] for a, b in zip(runs[ours], runs[theirs], strict=True)
        ]
        rows.append(
            {
                "measure": label,
                "profan_s": _median([r["seconds"] for r in runs[ours]]),
                "profan_rss": _median([r["rss"] for r in runs[ours]]),
                "reference": reference_label,
                "reference_s": _median([r["seconds"] for r in runs[theirs]]),
                "reference_rss": _median([r["rss"] for r in runs[theirs]]),
                "ratio": _median(ratios),
                "ratio_range": (min(ratios), max(ratios)),
                "target": target,
            }
        )
    return rows


def startup_rows(env: dict[str, str], repeats: int) -> list[dict]:
    env = {**env, "PROFAN_CACHE_DIR": tempfile.mkdtemp(prefix="profan-speed-")}
    commands = {
        "interpreter alone (python -c pass)": ([sys.executable, "-c", "pass"], ""),
        "import profan": ([sys.executable, "-c", "import profan"], "<= 0.1 s"),
        "profan --help": (_profan("--help"), "<= 0.25 s"),
        "profan chips": (_profan("chips"), "<= 0.25 s"),
    }
    for command, _ in commands.values():
        measure(command, env)  # bytecode
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(max(repeats, 5)):
        for label, (command, _) in commands.items():
            times[label].append(measure(command, env)["seconds"])
    return [
        {"measure": label, "profan_s": _median(times[label]), "target": target}
        for label, (_, target) in commands.items()
    ]


def parse_rows(repeats: int) -> list[dict]:
    """``parse_hlo.py``'s timer: one fresh interpreter parses each module with profan (cache
    off, grammar built beforehand) and with XLA's C++ parser back to back, ``repeats`` times
    (at least 3); the ratio is the median of the paired wall-clock ratios."""
    from parse_hlo import time_backend

    corpus = REPO.parent / "shared" / "corpus" / "hlo" / "xla"
    files = sorted(corpus.glob("*.hlo"), key=lambda p: p.stat().st_size)[-3:]
    found = time_backend(str(REPO), False, files, max(repeats, 3))
    rows = []
    for path in files:
        timings = found["modules"][str(path)]  # [profan wall, cpu, XLA wall, cpu] per repeat
        has_xla = timings[0][2] is not None
        ratios = [row[0] / row[2] for row in timings] if has_xla else []
        rows.append(
            {
                "measure": f"parse {path.name[:48]} ({path.stat().st_size / 1e6:.1f} MB)",
                "profan_s": _median([row[0] for row in timings]),
                "reference": "XLA's C++ parser (jaxlib)",
                "reference_s": _median([row[2] for row in timings]) if has_xla else None,
                "ratio": _median(ratios) if ratios else None,
                "ratio_range": (min(ratios), max(ratios)) if ratios else None,
                "target": "<= 3x",
            }
        )
    return rows


def pod_rows(env: dict[str, str], hosts: list[int], scratch: Path) -> list[dict]:
    out = scratch / "pods.json"
    subprocess.run(
        [sys.executable, str(HERE / "pod_scale.py"), "--no-dask", "--json", str(out), "--hosts",
         *map(str, hosts)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    found = json.loads(out.read_text())
    one = next(r for r in found if r["hosts"] == 1)
    rows = []
    for count in hosts:
        ours = next(r for r in found if r["hosts"] == count and r["tool"].startswith("profan"))
        theirs = next(r for r in found if r["hosts"] == count and r["tool"].startswith("xprof"))
        rows.append(
            {
                "measure": f"{count} hosts (local processes)",
                "profan_s": ours["seconds"],
                "profan_rss": ours["tree_rss"],
                "reference": "XProf overview_page",
                "reference_s": theirs["seconds"],
                "reference_rss": theirs["tree_rss"],
                "ratio": ours["seconds"] / theirs["seconds"],
                "note": f"tree-sum RSS {ours['tree_rss'] / one['tree_rss']:.2f}x one host",
                "target": "<= 0.4x, RSS <= 1.5x one host",
            }
        )
    return rows


def _cell(seconds: float | None, rss: float | None) -> str:
    if seconds is None:
        return "-"
    text = f"{seconds:.2f} s" if seconds >= 0.1 else f"{seconds * 1000:.0f} ms"
    return text + (f", {rss / 1e6:.0f} MB" if rss else "")


def print_table(rows: list[dict]) -> None:
    print("| measure | profan | reference | ratio | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        ratio = row.get("ratio")
        ratio_text = "" if ratio is None else f"{ratio:.2f}x"
        if row.get("ratio_range"):
            low, high = row["ratio_range"]
            ratio_text += f" ({low:.2f}-{high:.2f})"
        if row.get("note"):
            ratio_text += f"; {row['note']}"
        reference = ""
        if row.get("reference"):
            reference = f"{row['reference']}: {_cell(row['reference_s'], row.get('reference_rss'))}"
        print(
            f"| {row['measure']} | {_cell(row['profan_s'], row.get('profan_rss'))} | {reference} "
            f"| {ratio_text} | {row.get('target', '')} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--no-pods", action="store_true")
    parser.add_argument("--no-parse", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--reference",
        type=Path,
        help="another profan tree (e.g. an export of main) whose cold report is timed in the "
        "same repeats",
    )
    args = parser.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="profan-speed-") as name:
        scratch = Path(name)
        env = _environment(scratch)
        rows += report_rows(scratch, env, args.repeats, args.reference)
        rows += startup_rows(env, args.repeats)
        if not args.no_parse:
            rows += parse_rows(args.repeats)
        if not args.no_pods:
            rows += pod_rows(env, args.hosts, scratch)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

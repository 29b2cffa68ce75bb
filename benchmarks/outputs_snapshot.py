"""Every output profan writes for every fixture and corpus trace, into one folder, to compare two
trees byte for byte (a refactoring must leave them identical).

    python benchmarks/outputs_snapshot.py OUT [--repo DIR] [--quick]
    python benchmarks/outputs_snapshot.py --compare OUT_A OUT_B

``--repo`` is the checkout whose profan runs (default: this one); it is run with that tree on
``PYTHONPATH`` and the interpreter running this script, so one venv serves two worktrees. Each
trace gets: report in term (160 columns), md, json and html; check against a small budget (with
JUnit and GitHub annotations); annotate; export as Chrome JSON. Caches go to a fresh directory
per run (cold outputs; the cache's own byte-identity is tests/test_cache_reopen.py's job).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
# resolved: a worktree under /tmp reaches the corpus through a link, and the reports print its path
CORPUS_TRACES = (HERE.parent / "shared" / "corpus" / "traces").resolve()
ELAPSED = re.compile(r"; [0-9.]+ m?s\)")
# A budget that touches every gate kind without failing for want of a number on most traces.
BUDGET = """[budget]
step_time_s = 10.0
mfu_min = 0.0
[[budget.ops]]
match = "*fusion*"
max_time_s = 1.0
"""


def traces(repo: Path, quick: bool) -> dict[str, Path]:
    """Name -> trace path: every traced fixture, then the readable corpus traces."""
    found: dict[str, Path] = {}
    for folder in sorted((repo / "fixtures").iterdir()):
        if (folder / "trace").is_dir():
            # Relative to the checkout, so that two worktrees print the same paths.
            found[folder.name] = folder.relative_to(repo)
    if CORPUS_TRACES.is_dir():
        for path in sorted(CORPUS_TRACES.glob("*.xplane.pb")):
            if "corrupt" not in path.name:
                found[path.name.removesuffix(".xplane.pb")] = path
    if quick:
        keep = ("matmul", "transformer", "gpu_transformer_nocb", "mi300x_jax08_gemm")
        found = {name: path for name, path in found.items() if name in keep}
    return found


def commands(trace: Path, out: Path) -> dict[str, list[str]]:
    """Output file name -> profan arguments (``{out}`` files are written by profan itself)."""
    budget = out / "budget.toml"
    return {
        "report.txt": ["report", str(trace)],
        "report.md": ["report", "--format", "md", str(trace)],
        "report.json": ["report", "--format", "json", str(trace)],
        "report.html": ["report", "--format", "html", str(trace)],
        "check.txt": [
            "check", str(trace), "--budget", str(budget), "--github",
            "--junit", str(out / "check.junit.xml"),
        ],
        "annotate.txt": ["annotate", str(trace)],
        "export.stdout.txt": ["export", str(trace), "--format", "json", "-o",
                              str(out / "export.json")],
    }  # fmt: skip


def snapshot(repo: Path, target: Path, quick: bool) -> None:
    target.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ, PYTHONPATH=str(repo), COLUMNS="160", NO_COLOR="1")
    for name, trace in traces(repo, quick).items():
        out = target / name
        out.mkdir(exist_ok=True)
        (out / "budget.toml").write_text(BUDGET)
        with tempfile.TemporaryDirectory() as cache:
            environment["PROFAN_CACHE_DIR"] = str(Path(cache) / "profan")
            for output, arguments in commands(trace, out).items():
                done = subprocess.run(
                    [sys.executable, "-m", "profan", *arguments],
                    cwd=repo, env=environment, capture_output=True, text=True, check=False,
                )  # fmt: skip
                # The snapshot's own folder, and elapsed times in messages ("…; 0.4 s)"),
                # differ from run to run.
                stdout = done.stdout.replace(str(target), "<out>")
                stderr = ELAPSED.sub("; <elapsed>)", done.stderr.replace(str(target), "<out>"))
                (out / output).write_text(stdout)
                (out / (output + ".stderr")).write_text(f"exit {done.returncode}\n{stderr}")
        print(name, flush=True)


def compare(first: Path, second: Path) -> int:
    """Print every file that differs or exists on one side only; 0 when none."""
    differ = 0
    for path in sorted(
        {p.relative_to(first) for p in first.rglob("*") if p.is_file()}
        | {p.relative_to(second) for p in second.rglob("*") if p.is_file()}
    ):
        a, b = first / path, second / path
        if not a.exists() or not b.exists() or not filecmp.cmp(a, b, shallow=False):
            differ += 1
            print(f"differs: {path}")
    print(f"{differ} file(s) differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--repo", type=Path, default=HERE)
    parser.add_argument("--quick", action="store_true", help="four traces only")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    arguments = parser.parse_args()
    if arguments.compare:
        return compare(*arguments.compare)
    if arguments.out is None:
        parser.error("OUT is required")
    snapshot(arguments.repo.resolve(), arguments.out.resolve(), arguments.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cross-check profan's memory analysis against XProf's memory viewer, program by program.

    python benchmarks/memory_xprof.py                 # every fixture and corpus trace
    python benchmarks/memory_xprof.py --markdown OUT  # also write the tables (docs/memory.md)

Needs the ``xprof`` extra.  XProf converts a trace into per-program ``*.hlo_proto.pb`` files
beside it, so every trace is copied into a private temporary directory first; nothing is written
near the inputs.  For each program (memory space 0, the device's) the table lists profan's peak
and XProf's ``peakHeapMib``, their difference, and both peak positions in the heap-simulator
trace.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def traces() -> list[tuple[str, Path]]:
    """(label, xplane file) of every fixture trace and every readable corpus trace."""
    found = [
        (xplane.parts[-6], xplane)
        for xplane in sorted((ROOT / "fixtures").glob("*/trace/plugins/profile/*/*.xplane.pb"))
    ]
    corpus = ROOT.parent / "shared" / "corpus" / "traces"
    for xplane in sorted(corpus.glob("*.xplane.pb")):
        if not xplane.name.startswith("corrupt"):
            found.append((xplane.stem.removesuffix(".xplane"), xplane))
    return found


def xprof_memory(xplane: Path, key: str, program_id: int, scratch: Path) -> dict[str, Any] | None:
    """XProf's memory viewer result for one program, from a private copy of the trace."""
    from xprof.convert import raw_to_tool_data

    run = scratch / "plugins" / "profile" / "run"
    copy = run / "host.xplane.pb"
    if not copy.exists():
        run.mkdir(parents=True)
        shutil.copyfile(xplane, copy)
        # Listing the tools makes XProf write one <module>(<id>).hlo_proto.pb per program.
        raw_to_tool_data.xspace_to_tool_names([str(copy)])
    params = {"module_name": key, "program_id": str(program_id), "memory_space": "0"}
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "memory_viewer", params)
    return json.loads(data) if data else None


def compare(label: str, xplane: Path) -> list[dict[str, Any]]:
    from profan.memory.analyze import analyze_trace

    report = analyze_trace(xplane)
    rows = []
    with tempfile.TemporaryDirectory(prefix="profan_memory_xprof_") as tmp:
        for program in report.programs:
            if program.memory_space != "device":
                continue
            program_id = int(program.module.rsplit("(", 1)[1].rstrip(")"))
            theirs = xprof_memory(xplane, program.module, program_id, Path(tmp))
            row: dict[str, Any] = {
                "trace": label,
                "program": program.module,
                "profan_peak": program.peak_bytes,
                "profan_position": program.peak_position,
            }
            if theirs is None:
                row.update(xprof_peak=None, xprof_position=None, difference=None)
            else:
                peak = round(theirs["peakHeapMib"] * MIB)
                # JSON leaves a zero position out; no heap trace at all: no position to compare.
                position = theirs.get("peakHeapSizePosition", 0)
                row.update(
                    xprof_peak=peak,
                    xprof_position=position if program.peak_position is not None else None,
                    difference=(program.peak_bytes - peak) / peak if peak else 0.0,
                )
            rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    """One line per trace: programs, equal peaks, equal peak positions, largest difference."""
    lines = [
        "| trace | programs | equal peak | equal peak position | largest difference |",
        "|---|---:|---:|---:|---:|",
    ]
    for label in dict.fromkeys(r["trace"] for r in rows):
        mine = [r for r in rows if r["trace"] == label]
        equal = sum(r["profan_peak"] == r["xprof_peak"] for r in mine)
        same_position = sum(r["profan_position"] == r["xprof_position"] for r in mine)
        worst = max(
            (r["difference"] for r in mine if r["difference"] is not None), key=abs, default=0.0
        )
        lines.append(f"| {label} | {len(mine)} | {equal} | {same_position} | {worst:+.4%} |")
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| trace | program | profan peak (B) | XProf peak (B) | difference | peak event "
        "(profan / XProf) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for row in rows:
        xprof_peak = "—" if row["xprof_peak"] is None else f"{row['xprof_peak']:,}"
        difference = "—" if row["difference"] is None else f"{row['difference']:+.4%}"
        positions = (
            "— (no heap trace)"
            if row["profan_position"] is None
            else f"{row['profan_position']} / {row['xprof_position']}"
        )
        lines.append(
            f"| {row['trace']} | `{row['program']}` | {row['profan_peak']:,} | {xprof_peak} "
            f"| {difference} | {positions} |"
        )
    return "\n".join(lines) + "\n"


def estimates() -> str:
    """The static estimate next to XLA's memory analysis for every fixture dump (no xprof)."""
    from profan.hlo import parse_file
    from profan.memory.estimate import estimate

    lines = [
        "| program | arguments (B) | outputs (B) | donated (B) | temporaries: estimate / XLA (B) "
        "| ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, dump, oracle in _fixture_dumps():
        memory = estimate(parse_file(dump))
        exact = all(
            getattr(memory, mine) == oracle[theirs]
            for mine, theirs in (
                ("argument_bytes", "argument_size_in_bytes"),
                ("output_bytes", "output_size_in_bytes"),
                ("alias_bytes", "alias_size_in_bytes"),
            )
        )
        mark = "" if exact else " (differs from XLA)"
        theirs = oracle["temp_size_in_bytes"]
        ratio = f"{memory.temp_bytes / theirs:.2f}" if theirs else "—"
        lines.append(
            f"| {label} | {memory.argument_bytes:,}{mark} | {memory.output_bytes:,} "
            f"| {memory.alias_bytes:,} | {memory.temp_bytes:,} / {theirs:,} | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def _fixture_dumps() -> list[tuple[str, Path, dict[str, Any]]]:
    cases = []
    fixtures = ROOT / "fixtures"
    for meta_path in sorted(fixtures.glob("*/meta.json")):
        folder = meta_path.parent
        meta = json.loads(meta_path.read_text())
        oracle = folder / "memory_analysis.json"
        if oracle.exists():
            dump = folder / meta["hlo_files"][0]["file"]
            cases.append((folder.name, dump, json.loads(oracle.read_text())))
        for program in meta.get("programs", []):
            if program.get("memory_analysis") and program.get("hlo_files"):
                dump = folder / program["hlo_files"][0]
                cases.append((f"{folder.name}/{program['name']}", dump, program["memory_analysis"]))
    for group in ("xla_programs", "all_to_all"):
        oracles = json.loads((fixtures / group / "memory_analysis.json").read_text())
        for name, oracle in oracles.items():
            meta = json.loads((fixtures / group / name / "meta.json").read_text())
            dump = fixtures / group / name / meta["hlo_files"][0]["file"]
            cases.append((f"{group}/{name}", dump, oracle))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", type=Path, help="write the table to this file")
    parser.add_argument(
        "--estimates", action="store_true", help="only the static-estimate table (no xprof)"
    )
    args = parser.parse_args(argv)
    if args.estimates:
        print(estimates())
        return 0
    rows = [row for label, xplane in traces() for row in compare(label, xplane)]
    table = summary(rows) + "\n" + markdown(rows)
    print(table)
    worst = max((abs(r["difference"]) for r in rows if r["difference"] is not None), default=0)
    missing = sum(r["xprof_peak"] is None for r in rows)
    print(
        f"{len(rows)} programs; largest difference {worst:.4%}; XProf gave no result for {missing}"
    )
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

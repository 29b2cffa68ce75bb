"""``profan hlo FILE``: parse an HLO dump and summarise it (optionally with a roofline).

``FILE`` may also be XProf's op profile (the ``op_profile`` tool's JSON, ``.json`` or
``.json.gz``): each program it lists is rebuilt from its ops' lines and fused bodies
(``profan.xprof``) and summarised the same way; with ``--chip`` every op gets its roofline, and
``--json`` adds what the profile measured per op when the file kept its metrics."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from profan.errors import ConfigError, HloSyntaxError, ProfanError
from profan.hlo import Module, parse_file, views
from profan.hlo.model import Instruction
from profan.hlo.opcodes import (
    GROUPED_COLLECTIVE_KINDS,
    PAIRED_COLLECTIVE_KINDS,
    async_role,
    collective_kind,
)
from profan.hlo.printer import type_text

if TYPE_CHECKING:  # the roofline, the sharding and op profiles load only when used
    from profan.roofline import ModuleOpRecord
    from profan.trace.options import RunOptions
    from profan.xprof import ProfiledProgram

OP_PROFILE_SUFFIXES = (".json", ".json.gz")

# Collectives whose device groups the summary lists (send/recv talk to one channel peer).
_SUMMARISED_KINDS = GROUPED_COLLECTIVE_KINDS | PAIRED_COLLECTIVE_KINDS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE",
        help="HLO text (a dump or compiled.as_text()), or XProf's op profile (.json, .json.gz)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--chip",
        metavar="NAME",
        help="also score every op against this chip's roofline (compile time, no trace)",
    )
    parser.add_argument(
        "--top", type=int, default=20, metavar="N", help="rows of the roofline table (default 20)"
    )


def _device_groups(instruction: Instruction, num_devices: int) -> tuple[list | None, str | None]:
    """The collective's device groups (or its source-target pairs), or why they do not decode."""
    try:
        pairs = views.source_target_pairs(instruction)
        if pairs is not None:
            return [list(p) for p in pairs], None
        return views.replica_groups(instruction, num_devices), None
    except ProfanError as error:
        return None, str(error)


def summarise(module: Module) -> dict[str, Any]:
    """The summary ``profan hlo`` prints, as plain data."""
    opcodes = Counter(i.opcode for i in module.instructions())
    num_devices = module.replica_count * module.num_partitions
    collectives = []
    for computation in module.computations:
        for instruction in computation.instructions:
            kind = collective_kind(instruction.opcode)
            if kind not in _SUMMARISED_KINDS or async_role(instruction.opcode) == "done":
                continue  # a -done only completes its -start, which is listed
            groups, error = _device_groups(instruction, num_devices)
            entry: dict[str, Any] = {
                "computation": computation.name,
                "name": instruction.name,
                "opcode": instruction.opcode,
                "shape": type_text(instruction.shape),
            }
            if "source_target_pairs" in instruction.attributes:
                entry["pairs"] = len(groups) if groups is not None else None
            else:
                entry["groups"] = len(groups) if groups is not None else None
                sizes = sorted({len(g) for g in groups}) if groups else []
                entry["group_size"] = sizes[0] if len(sizes) == 1 else sizes or None
            if error:
                entry["error"] = error
            collectives.append(entry)
    return {
        "module": module.name,
        "entry": module.entry.name,
        "computations": len(module.computations),
        "instructions": sum(opcodes.values()),
        "replica_count": module.replica_count,
        "num_partitions": module.num_partitions,
        "opcodes": dict(opcodes.most_common()),
        "collectives": collectives,
    }


def roofline_table(module: Module, chip: str) -> list[ModuleOpRecord]:
    """Compile-time roofline of every op (``profan.roofline.score_module``)."""
    from profan.roofline import score_module
    from profan.sharding import describe

    return score_module(module, chip, sharding=describe(module))


def _print_text(summary: dict[str, Any]) -> None:
    print(f"module {summary['module'] or '(unnamed)'}  entry {summary['entry']}")
    print(
        f"{summary['computations']} computations, {summary['instructions']} instructions, "
        f"{summary['replica_count']} replica(s) x {summary['num_partitions']} partition(s)"
    )
    print("\ninstructions by opcode:")
    for opcode, count in summary["opcodes"].items():
        print(f"  {count:8d}  {opcode}")
    if summary["collectives"]:
        print("\ncollectives:")
        for c in summary["collectives"]:
            if "pairs" in c:
                groups = f"{c['pairs']} source-target pairs"
            else:
                groups = f"{c['groups']} group(s) of {c['group_size']}"
            extra = f"  ({c['error']})" if "error" in c else ""
            print(f"  {c['opcode']:26s} {c['name']:32s} {c['shape']:28s} {groups}{extra}")


def _print_table(table: list[ModuleOpRecord], chip: str, top: int) -> None:
    from profan.report.render import module_table
    from profan.report.render.layout import Style, terminal_width, use_colour

    style = Style(use_colour(sys.stdout))
    width = terminal_width(sys.stdout)
    print()
    print("\n".join(module_table.render(table, chip, top=top, width=width, style=style)))


def _measured(program: ProfiledProgram) -> list[dict[str, Any]]:
    """What the op profile measured per op (one occurrence), where the file kept it."""
    rows = []
    for op in program.ops:
        if op.metrics is not None:
            row = {"name": op.name, "occurrences": op.metrics.occurrences}
            row.update(time_s=op.metrics.time_s, flops=op.metrics.flops)
            row.update(hbm_bytes=op.metrics.hbm_bytes)
            row.update(on_chip_read_bytes=op.metrics.on_chip_read_bytes)
            row.update(on_chip_write_bytes=op.metrics.on_chip_write_bytes)
            rows.append(row)
    return rows


def op_profile_programs(path: str) -> list[tuple[ProfiledProgram, Module]]:
    """Every program of an op profile with the module rebuilt from its ops."""
    from profan.xprof import program_module, read_op_profile

    profile = read_op_profile(path)
    rebuilt = []
    for program in profile.programs:
        try:
            rebuilt.append((program, program_module(program)))
        except HloSyntaxError as error:
            raise error.with_file(f"{path} (program {program.name or '?'})") from None
    return rebuilt


def _run_op_profile(args: argparse.Namespace) -> int:
    programs = op_profile_programs(args.file)
    if args.json:
        entries = []
        for program, module in programs:
            entry: dict[str, Any] = {"program": program.name, "program_id": program.program_id}
            entry.update(summarise(module))
            if args.chip:
                from profan.report.render.module_table import json_rows

                entry["roofline"] = json_rows(roofline_table(module, args.chip))
            measured = _measured(program)
            if measured:
                entry["measured"] = measured
            entries.append(entry)
        json.dump({"op_profile": args.file, "programs": entries}, sys.stdout, indent=1)
        print()
        return 0
    for index, (program, module) in enumerate(programs):
        if index:
            print()
        ident = f" ({program.program_id})" if program.program_id else ""
        print(f"op profile program {program.name or '(unnamed)'}{ident}: {len(program.ops)} ops")
        _print_text(summarise(module))
        if args.chip:
            _print_table(roofline_table(module, args.chip), args.chip, args.top)
    return 0


def run(args: argparse.Namespace, options: RunOptions) -> int:
    if args.top < 1:
        raise ConfigError("--top must be at least 1")
    if str(args.file).lower().endswith(OP_PROFILE_SUFFIXES):
        return _run_op_profile(args)
    module = parse_file(args.file)
    summary = summarise(module)
    table = roofline_table(module, args.chip) if args.chip else None
    if args.json:
        if table is not None:
            from profan.report.render.module_table import json_rows

            summary["roofline"] = json_rows(table)
        json.dump(summary, sys.stdout, indent=1)
        print()
        return 0
    _print_text(summary)
    if table is not None:
        _print_table(table, args.chip, args.top)
    return 0

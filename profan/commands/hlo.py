"""``profan hlo FILE``: parse an HLO dump and summarise it (optionally with a roofline)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from typing import Any

from profan.errors import ConfigError, ProfanError
from profan.hlo import Module, parse_file
from profan.hlo.model import Instruction
from profan.hlo.printer import type_text

HELP = "parse an HLO text dump and summarise it: computations, ops by opcode, collectives"

# Collective opcodes (and their async halves) whose device groups the summary reports.
COLLECTIVE_OPCODES = frozenset(
    {
        "all-reduce",
        "all-reduce-start",
        "all-gather",
        "all-gather-start",
        "reduce-scatter",
        "all-to-all",
        "ragged-all-to-all",
        "collective-broadcast",
        "collective-permute",
        "collective-permute-start",
    }
)


# Columns of the text roofline table (the JSON has every column).
_ROOFLINE_COLUMNS = (
    "name",
    "opcode",
    "category",
    "occurrences",
    "flops",
    "hbm_bytes",
    "ici_bytes",
    "t_compute_s",
    "t_hbm_s",
    "t_ici_s",
    "roofline_s",
    "bound_by",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="HLO text (a dump or compiled.as_text())")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--chip",
        metavar="NAME",
        help="also score every op against this chip's roofline (compile time, no trace)",
    )
    parser.add_argument(
        "--top", type=int, default=20, metavar="N", help="rows of the roofline table (default 20)"
    )


def _fallback_groups(text: str) -> list[list[int]] | None:
    """Explicit ``{{0,1},{2,3}}`` groups and ``[G,S]<=...`` iota forms, sizes only."""
    iota = re.match(r"\[(\d+),(\d+)\]<=", text)
    if iota:
        groups, size = int(iota.group(1)), int(iota.group(2))
        return [[-1] * size for _ in range(groups)]
    if text.startswith("{"):
        return [
            [int(d) for d in g.split(",") if d.strip()] for g in re.findall(r"\{([^{}]*)\}", text)
        ]
    return None


def _device_groups(instruction: Instruction, num_devices: int) -> tuple[list | None, str | None]:
    text = instruction.attributes.get("replica_groups")
    if text is None:
        pairs = instruction.attributes.get("source_target_pairs")
        if pairs is None:
            return None, None
        try:
            from profan.hlo.devices import decode_source_target_pairs

            return [list(p) for p in decode_source_target_pairs(pairs)], None
        except ImportError:
            return None, None
        except ProfanError as error:
            return None, str(error)
    try:
        from profan.hlo.devices import decode_replica_groups
    except ImportError:
        return _fallback_groups(text), None
    try:
        return decode_replica_groups(text, num_devices=num_devices), None
    except ProfanError as error:
        return None, str(error)


def summarise(module: Module) -> dict[str, Any]:
    """The summary ``profan hlo`` prints, as plain data."""
    opcodes = Counter(i.opcode for i in module.instructions())
    num_devices = module.replica_count * module.num_partitions
    collectives = []
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode not in COLLECTIVE_OPCODES:
                continue
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


def roofline_table(module: Module, chip: str) -> Any:
    """Compile-time roofline of every op (``profan.roofline.score_module``), a DataFrame."""
    try:
        from profan.roofline import score_module
    except ImportError:
        raise ConfigError("--chip: compile-time roofline scoring is not available") from None
    return score_module(module, chip)


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


def run(args: argparse.Namespace) -> int:
    module = parse_file(args.file)
    summary = summarise(module)
    table = roofline_table(module, args.chip) if args.chip else None
    if args.json:
        if table is not None:
            summary["roofline"] = json.loads(table.to_json(orient="records"))
        json.dump(summary, sys.stdout, indent=1)
        print()
        return 0
    _print_text(summary)
    if table is not None:
        print(f"\nroofline on {args.chip} (top {args.top} by ideal time):")
        shown = [c for c in _ROOFLINE_COLUMNS if c in table.columns] or list(table.columns)
        print(table.head(args.top)[shown].to_string(index=False))
    return 0

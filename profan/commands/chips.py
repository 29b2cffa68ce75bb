"""``profan chips``: the chips profan can score against, with their figures."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import TYPE_CHECKING

from profan.chips import DTYPES, catalogue
from profan.units import si

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="CHIP", help="show only these chips")
    parser.add_argument("--json", action="store_true", help="print the catalogue as JSON")
    parser.add_argument(
        "--chips",
        metavar="FILE",
        dest="user_chips",
        help="a TOML file of extra chips (same schema as the catalogue)",
    )


def run(args: argparse.Namespace, options: RunOptions) -> int:
    """The catalogue with the user's chips in force (``--chips``, ``options.chips``)."""
    from profan.chips import get_chip

    chips = catalogue()
    if args.names:
        chips = {chip.name: chip for chip in (get_chip(n) for n in args.names)}
    if args.json:
        json.dump({name: chip.to_dict() for name, chip in chips.items()}, sys.stdout, indent=1)
        print()
        return 0
    header = ["chip", "kind", *(f"{d} FLOP/s" for d in DTYPES), "transc./s", "HBM", "HBM BW",
              "ICI link uni/bi", "links", "topology", "device strings"]  # fmt: skip
    rows = [header]
    for chip in chips.values():
        rows.append(
            [
                chip.name + (" ~" if chip.approximate else ""),
                chip.kind,
                *(si(chip.peak_flops[d], "") if d in chip.peak_flops else "-" for d in DTYPES),
                si(chip.transcendentals_per_s, "") if chip.transcendentals_per_s else "-",
                si(chip.hbm_bytes, "B"),
                si(chip.hbm_bytes_per_s, "B/s"),
                f"{si(chip.ici_link_bytes_per_s_uni, 'B/s')} / "
                f"{si(chip.ici_link_bytes_per_s_bi, 'B/s')}",
                str(chip.ici_links),
                chip.topology
                + (f" ({chip.wraparound})" if chip.topology.startswith("torus") else ""),
                ", ".join(chip.device_strings),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    print("\nFigures are per chip, dense. ~ = approximate. Sources: profan chips --json.")
    print(
        "\nTranscendentals per second (exp, log, tanh, logistic, sqrt, … as XLA counts them;"
        " f32 results on the TPU's EUP or the GPU's special function units), and where each"
        " figure comes from:"
    )
    for chip in chips.values():
        rate = chip.transcendentals_per_s
        figure = si(rate, "/s") if rate else "-"
        source = chip.sources.get("transcendentals") or "unknown"
        print(textwrap.fill(f"{chip.name}: {figure}: {source}", 100, initial_indent="  ",
                            subsequent_indent="      "))  # fmt: skip
    return 0

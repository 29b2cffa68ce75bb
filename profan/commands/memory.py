"""``profan memory TRACE|HLO``: where each program's device memory goes.

From a trace: the compiler's own buffer assignment for every program it embeds (peak, what is
live there, arguments/outputs/donation/temporaries, against the chip's memory).  From an HLO text
file (a scheduled dump): a static estimate by liveness over the printed order.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from profan.errors import ConfigError
from profan.memory.analyze import analyze_hlo_file, analyze_trace
from profan.memory.render import RENDERERS, TOP
from profan.outputs import write_stdout

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="TRACE|HLO",
        help="trace directory or .xplane.pb file (buffer assignment), or an HLO text file "
        "(static estimate)",
    )
    parser.add_argument("--module", metavar="NAME", help="only this program (name or name(id))")
    parser.add_argument(
        "--format", choices=sorted(RENDERERS), default="term", help="output format (term)"
    )
    parser.add_argument("--chip", metavar="NAME", help="compare with this chip's memory")
    parser.add_argument("--run", metavar="NAME", help="run directory (default: the newest)")
    parser.add_argument(
        "--top", type=int, default=TOP, metavar="N", help=f"buffers listed per program ({TOP})"
    )


def _is_hlo_text(path: Path) -> bool:
    if not path.is_file() or path.name.endswith((".pb", ".gz")):
        return False
    with path.open("rb") as handle:
        head = handle.read(4096).lstrip()
    return head.startswith(b"HloModule")


def run(args: argparse.Namespace, options: RunOptions) -> int:
    if args.top < 0:
        raise ConfigError(f"--top must be 0 or more, not {args.top}")
    target = Path(args.target)
    if _is_hlo_text(target):
        report = analyze_hlo_file(target, chip=args.chip, module=args.module)
    else:
        from profan.report.analysis.pipeline import resolve_layout

        trace, _ = resolve_layout(target, None)  # a fixture-style folder keeps it under trace/
        report = analyze_trace(Path(trace), run=args.run, chip=args.chip, module=args.module)
    write_stdout(RENDERERS[args.format](report, args.top))
    return 0

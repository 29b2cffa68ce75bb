"""``profan diff A B``: two profiles (or JSON reports) side by side."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from profan.outputs import write_stdout
from profan.report.layout import terminal_width
from profan.report.pipeline import Progress, text_for

if TYPE_CHECKING:
    from profan.report.model import Report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="trace directory/file or JSON report (before)")
    parser.add_argument("b", help="trace directory/file or JSON report (after)")
    parser.add_argument("--top", type=int, default=15, help="ops to list (default 15)")
    parser.add_argument("--chip", help="chip to score against (default: from each trace)")


def run(args: argparse.Namespace) -> int:
    width = terminal_width(sys.stdout)

    def render(a: Report, b: Report) -> str:
        from profan.report import diff

        return diff.render(a, b, top=args.top, label_a=args.a, label_b=args.b, width=width)

    # The text is a function of the two reports and these options: re-opened as text.
    rendering = ("diff", args.top, args.a, args.b, width)
    text = text_for(
        [args.a, args.b],
        render,
        rendering,
        chip=args.chip,
        progress=Progress(),
        use_cache=not args.no_cache,
    )
    write_stdout(text)
    return 0

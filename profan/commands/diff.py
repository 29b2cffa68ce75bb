"""``profan diff A B``: two profiles (or JSON reports) side by side."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from profan.api import TRACE_INPUTS
from profan.outputs import write_stdout
from profan.report.analysis.pipeline import Progress, source_for, text_of
from profan.report.render.layout import terminal_width

if TYPE_CHECKING:
    from profan.report.model import Report
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help=f"before: {TRACE_INPUTS}; or a JSON report")
    parser.add_argument("b", help="after: the same forms as A")
    parser.add_argument("--top", type=int, default=15, help="ops to list (default 15)")
    parser.add_argument("--chip", help="chip to score against (default: from each trace)")
    parser.add_argument(
        "--format",
        choices=("term", "md", "json"),
        default="term",
        help="output format (json: each side's chip, devices, programs and figures, and the "
        "ops that changed most)",
    )


def run(args: argparse.Namespace, options: RunOptions) -> int:
    width = terminal_width(sys.stdout) if args.format == "term" else 0

    def render(a: Report, b: Report) -> str:
        from profan.report.render import comparison

        if args.format == "json":
            import json

            data = comparison.to_dict(a, b, top=args.top, label_a=args.a, label_b=args.b)
            return json.dumps(data, indent=1, ensure_ascii=False) + "\n"
        if args.format == "md":
            return comparison.markdown(a, b, top=args.top, label_a=args.a, label_b=args.b)
        from profan.report.check import diff

        # each side named by what it ran on, not only its path (H100 against H200 reads so)
        label_a = f"{args.a}  ({comparison.side(a, args.a).text()})"
        label_b = f"{args.b}  ({comparison.side(b, args.b).text()})"
        return diff.render(a, b, top=args.top, label_a=label_a, label_b=label_b, width=width)

    # The text is a function of the two reports and these options: re-opened as text.
    rendering = ("diff", args.format, args.top, args.a, args.b, width)
    sources = [source_for(path, chip=args.chip, options=options) for path in (args.a, args.b)]
    progress = Progress(None if args.format == "term" else False)
    text = text_of(sources, render, rendering, progress)
    write_stdout(text)
    return 0

"""``profan diff A B``: two profiles (or JSON reports) side by side."""

from __future__ import annotations

import argparse
import sys

from profan.report import diff
from profan.report.pipeline import Progress, report_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="trace directory/file or JSON report (before)")
    parser.add_argument("b", help="trace directory/file or JSON report (after)")
    parser.add_argument("--top", type=int, default=15, help="ops to list (default 15)")
    parser.add_argument("--chip", help="chip to score against (default: from each trace)")


def run(args: argparse.Namespace) -> int:
    progress = Progress()
    a = report_for(args.a, chip=args.chip, progress=progress)
    b = report_for(args.b, chip=args.chip, progress=progress)
    from profan.report.terminal import terminal_width

    text = diff.render(
        a, b, top=args.top, label_a=args.a, label_b=args.b, width=terminal_width(sys.stdout)
    )
    sys.stdout.write(text)
    return 0

"""``profan annotate TRACE``: HLO text with per-op measured/ideal time and flags as comments."""

from __future__ import annotations

import argparse
import sys

from profan.report import annotate
from profan.report.build import build_report
from profan.report.config import load_rule_config
from profan.report.pipeline import Progress, analyse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace directory or .xplane.pb file")
    parser.add_argument("--module", help="module to print (default: where the most time went)")
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")
    parser.add_argument("--config", help="profan.toml with [rules] thresholds")


def run(args: argparse.Namespace) -> int:
    progress = Progress()
    analysis = analyse(args.trace, chip=args.chip, hlo=args.hlo, run=args.run, progress=progress)
    report = build_report(analysis, load_rule_config(args.config))
    sys.stdout.write(annotate.render(report, analysis.profile, args.module))
    return 0

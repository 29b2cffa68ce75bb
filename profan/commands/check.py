"""``profan check TRACE --budget profan.toml``: fail CI when a profile breaks its budget."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profan.errors import EXIT_CHECK_FAILED, EXIT_OK
from profan.report.budget import evaluate, github_annotations, junit_xml, load_budget, summary_text
from profan.report.pipeline import Progress, read_json_report, report_for

HELP = "check a profile against budgets and a baseline report (exit 1 when one fails)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace directory, .xplane.pb file, or a JSON report")
    parser.add_argument("--budget", required=True, help="profan.toml with [budget] / [baseline]")
    parser.add_argument("--baseline", help="a `profan report --format json` output to compare to")
    parser.add_argument("--junit", help="write JUnit XML results to this file")
    parser.add_argument(
        "--github", action="store_true", help="print GitHub Actions ::error annotations"
    )
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")


def run(args: argparse.Namespace) -> int:
    budget = load_budget(args.budget)
    baseline = read_json_report(args.baseline) if args.baseline else None
    report = report_for(
        args.trace,
        chip=args.chip,
        hlo=args.hlo,
        run=args.run,
        config=budget.rules,
        progress=Progress(),
    )
    results = evaluate(report, budget, baseline)
    sys.stdout.write(summary_text(results))
    if args.github:
        sys.stdout.write(github_annotations(results))
    if args.junit:
        Path(args.junit).write_text(junit_xml(results), encoding="utf-8")
    return EXIT_OK if all(r.passed for r in results) else EXIT_CHECK_FAILED

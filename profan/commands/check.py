"""``profan check TRACE --budget profan.toml``: fail CI when a profile breaks its budget."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from profan.errors import EXIT_CHECK_FAILED, EXIT_OK, ConfigError
from profan.report import baseline as baselines
from profan.report.budget import evaluate, github_annotations, junit_xml, load_budget, summary_text
from profan.report.pipeline import Progress, read_json_report, report_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace directory, .xplane.pb file, or a JSON report")
    parser.add_argument("--budget", required=True, help="profan.toml with [budget] / [baseline]")
    parser.add_argument(
        "--baseline",
        help="a `profan report --format json` output, or a per-machine baseline file "
        "(profan.report.baseline), to compare to",
    )
    parser.add_argument(
        "--update-baseline",
        action="store_true",
        help="record this profile as its machine's entry in the --baseline file, then exit 0",
    )
    parser.add_argument("--junit", help="write JUnit XML results to this file")
    parser.add_argument(
        "--github", action="store_true", help="print GitHub Actions ::error annotations"
    )
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")


def run(args: argparse.Namespace) -> int:
    budget = load_budget(args.budget)
    if args.update_baseline and not args.baseline:
        raise ConfigError("--update-baseline needs --baseline FILE (the file to record into)")
    machine_file = bool(args.baseline) and (
        args.update_baseline or baselines.is_baseline_file(args.baseline)
    )
    baseline = read_json_report(args.baseline) if args.baseline and not machine_file else None
    report = report_for(
        args.trace,
        chip=args.chip,
        hlo=args.hlo,
        run=args.run,
        config=budget.rules,
        progress=Progress(),
    )
    if args.update_baseline:
        entry = baselines.write_baseline(args.baseline, report)
        print(f"profan: recorded {entry.machine} in {args.baseline}", file=sys.stderr)
        return EXIT_OK
    results = evaluate(report, budget, baseline)
    if machine_file:
        results += baselines.check(report, args.baseline, baselines.TimePolicy.from_budget(budget))
    sys.stdout.write(summary_text(results))
    if args.github:
        sys.stdout.write(github_annotations(results))
    if args.junit:
        Path(args.junit).write_text(junit_xml(results), encoding="utf-8")
    return EXIT_OK if all(r.passed for r in results) else EXIT_CHECK_FAILED

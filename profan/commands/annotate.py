"""``profan annotate TRACE``: HLO text with per-op measured/ideal time and flags as comments."""

from __future__ import annotations

import argparse

from profan.cache.reports import read_text, text_key, write_report, write_text
from profan.outputs import write_stdout
from profan.report.config import RuleConfig, load_rule_config
from profan.report.pipeline import (
    Inputs,
    Progress,
    analyse_inputs,
    cache_key,
    locate,
    reading_ahead,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace directory or .xplane.pb file")
    parser.add_argument("--module", help="module to print (default: where the most time went)")
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")
    parser.add_argument("--config", help="profan.toml with [rules] thresholds")


def run(args: argparse.Namespace) -> int:
    progress = Progress()
    config = load_rule_config(args.config)
    inputs = locate(args.trace, args.hlo, args.run)
    with reading_ahead(inputs, args.chip, config, use_cache=not args.no_cache):
        text = _annotated(args, inputs, config, progress)
    write_stdout(text)
    return 0


def _annotated(
    args: argparse.Namespace, inputs: Inputs, config: RuleConfig, progress: Progress
) -> str:
    key = None if args.no_cache else cache_key(inputs, args.chip, config)
    # The annotated text is cached whole: it prints the module's HLO beside the report.
    annotated_key = None if key is None else text_key(key, "annotate", args.module)
    text = None if annotated_key is None else read_text(annotated_key)
    if text is None:
        from profan.report import annotate
        from profan.report.build import build_report

        analysis = analyse_inputs(inputs, args.chip, progress, use_cache=not args.no_cache)
        report = build_report(analysis, config)
        text = annotate.render(report, analysis.profile, args.module)
        if key is not None and annotated_key is not None:
            write_report(key, report)
            write_text(annotated_key, text)
    return text

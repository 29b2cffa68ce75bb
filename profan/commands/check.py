"""``profan check TRACE --budget profan.toml``: fail CI when a profile breaks its budget, or
``--baseline FILE`` (with or without a budget): when it regressed from a baseline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from profan.api import TRACE_INPUTS
from profan.cache.keys import file_input
from profan.commands.arguments import add_trace_options
from profan.errors import EXIT_CHECK_FAILED, EXIT_OK, ConfigError
from profan.outputs import check_destination, option_inputs, refuse_inputs, write_file, write_stdout
from profan.report.analysis.pipeline import Progress, read_json_report, report_of, source_for
from profan.report.analysis.request import JsonReport, Request
from profan.report.stored import read_output, text_key, write_output

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help=f"{TRACE_INPUTS}; or a JSON report")
    parser.add_argument(
        "--budget",
        help="profan.toml with [budget] / [baseline] (default with --baseline: no absolute "
        "budgets, the [baseline] tolerances' defaults)",
    )
    parser.add_argument(
        "--baseline",
        help="a `profan report --format json` output, or a per-machine baseline file "
        "(profan.report.check.baseline), to compare to",
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
    add_trace_options(parser, config=False)


class CheckOutput(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """What a check printed, the JUnit XML it wrote (when asked) and its exit code."""

    code: int
    text: str
    junit: str | None


def run(args: argparse.Namespace, options: RunOptions) -> int:
    if args.update_baseline and not args.baseline:
        raise ConfigError("--update-baseline needs --baseline FILE (the file to record into)")
    if not args.budget and not args.baseline:
        raise ConfigError("check needs --budget FILE, --baseline FILE or both (nothing to check)")
    _check_outputs(args)
    # the trace (or a JSON report) located once; the budget's rules are known once it is read
    source = source_for(args.trace, hlo=args.hlo, run=args.run, chip=args.chip, options=options)
    key = None if args.update_baseline else _output_key(args, source)
    output = None if key is None else read_output(key, CheckOutput)
    if output is None:
        output = _check(args, source)
        if output is None:  # --update-baseline: recorded, nothing to print
            return EXIT_OK
        if key is not None:
            write_output(key, output)
    write_stdout(output.text)
    if args.junit and output.junit is not None:
        write_file(args.junit, output.junit, "--junit")
    return output.code


def _check_outputs(args: argparse.Namespace) -> None:
    """Before any analysis: no output (the JUnit file, the baseline recorded) is an input, and
    each can be written where it goes."""
    outputs = [("--junit", args.junit)] if args.junit else []
    if args.update_baseline:
        outputs = [("--baseline", args.baseline)]  # (then nothing else is written)
    read_baseline = None if args.update_baseline else args.baseline
    inputs = [("trace", args.trace), ("--hlo", args.hlo), ("--budget", args.budget)]
    inputs += [("--baseline", read_baseline), *option_inputs(args)]
    refuse_inputs(outputs, inputs)
    for flag, path in outputs:
        check_destination(flag, path)


def _output_key(args: argparse.Namespace, source: Request | JsonReport) -> str | None:
    """The key of this check's output: the trace's inputs (its report's key with the default
    rules), the budget's and the baseline's content (the budget's rules included) and the
    flags that change what is printed."""
    if isinstance(source, JsonReport):
        return None
    trace = source.report_key()
    budget = file_input(Path(args.budget)) if args.budget else ["none"]
    baseline = file_input(Path(args.baseline)) if args.baseline else ["none"]
    if trace is None or budget is None or baseline is None:
        return None
    return text_key(trace, "check", budget, baseline, args.github, bool(args.junit))


def _check(args: argparse.Namespace, source: Request | JsonReport) -> CheckOutput | None:
    from profan.report.check import baseline as baselines
    from profan.report.check.budget import Budget, evaluate, load_budget
    from profan.report.check.regressions import against_file
    from profan.report.check.results import github_annotations, junit_xml, summary_text

    budget = load_budget(args.budget) if args.budget else Budget()
    machine_file = bool(args.baseline) and (
        args.update_baseline or baselines.is_baseline_file(args.baseline)
    )
    baseline = read_json_report(args.baseline) if args.baseline and not machine_file else None
    if isinstance(source, Request):  # the same inputs, the budget's rules
        source = source.replace(config=budget.rules)
    report = report_of(source, Progress())
    if args.update_baseline:
        entry = baselines.write_baseline(args.baseline, report)
        print(f"profan: recorded {entry.machine} in {args.baseline}", file=sys.stderr)
        return None
    results = evaluate(report, budget, baseline)
    if machine_file:
        results += against_file(report, args.baseline, budget)
    text = summary_text(results) + (github_annotations(results) if args.github else "")
    return CheckOutput(
        code=EXIT_OK if all(r.passed for r in results) else EXIT_CHECK_FAILED,
        text=text,
        junit=junit_xml(results) if args.junit else None,
    )

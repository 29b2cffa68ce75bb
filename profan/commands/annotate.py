"""``profan annotate TRACE``: HLO text with per-op measured/ideal time and flags as comments."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from profan.api import TRACE_INPUTS
from profan.commands.arguments import add_trace_options
from profan.outputs import write_stdout
from profan.report.analysis.pipeline import (
    Progress,
    analyse_request,
    reading_ahead,
    request_for,
)
from profan.report.analysis.request import Request
from profan.report.rules.config import load_rule_config
from profan.report.stored import read_text, text_key, write_report, write_text

if TYPE_CHECKING:
    from profan.report.model import Report
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help=TRACE_INPUTS)
    parser.add_argument("--module", help="module to print (default: where the most time went)")
    add_trace_options(parser)
    parser.add_argument(
        "--format",
        choices=("term", "md", "json"),
        default="term",
        help="output format (md: the annotated HLO in a code block; json: the module, the "
        "annotated text and the module's ops as the JSON report has them)",
    )


def run(args: argparse.Namespace, options: RunOptions) -> int:
    progress = Progress()
    config = load_rule_config(args.config)
    request = request_for(
        args.trace, hlo=args.hlo, run=args.run, chip=args.chip, config=config, options=options
    )
    with reading_ahead(request):
        text = _annotated(args, request, progress)
    write_stdout(text)
    return 0


def _annotated(args: argparse.Namespace, request: Request, progress: Progress) -> str:
    key = request.report_key()
    # The annotated text is cached whole: it prints the module's HLO beside the report.
    annotated_key = None if key is None else text_key(key, "annotate", args.module, args.format)
    text = None if annotated_key is None else read_text(annotated_key)
    if text is None:
        from profan.report.analysis.build import build_report
        from profan.report.render import annotate

        analysis = analyse_request(request, progress)
        report = build_report(analysis, request.config)
        text = annotate.render(report, analysis.profile, args.module)
        if args.format != "term":
            module_key, module = annotate.pick_module(report, analysis.profile, args.module)
            text = _formatted(args.format, text, report, module_key, module.name)
        if key is not None and annotated_key is not None:
            write_report(key, report)
            write_text(annotated_key, text)
    return text


def _formatted(fmt: str, text: str, report: Report, module_key: str, module_name: str) -> str:
    """The annotated module ``text`` as Markdown or JSON (with the module's ops)."""
    if fmt == "md":
        header, _, body = text.partition("\n")
        fence = "````" if "```" in body else "```"
        return f"# {header.removeprefix('// ')}\n\n{fence}\n{body.rstrip()}\n{fence}\n"
    import dataclasses
    import json

    # the module's own ops, as annotate chooses them (several programs may share a name)
    ops = [
        op
        for op in report.ops
        if (op.program or op.module) in (module_key, module_name)
        and op.program in (None, module_key)
    ]
    data: dict[str, Any] = {
        "trace": report.trace.path,
        "module": module_key,
        "text": text,
        "ops": dataclasses.replace(report, ops=ops).to_dict()["ops"],
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

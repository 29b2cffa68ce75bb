"""``profan export TRACE --output FILE``: profan's verdict on every op inside the trace viewers
users already have — an annotated copy of the ``.xplane.pb`` (XProf/TensorBoard) or a Chrome
trace (Perfetto UI, ``chrome://tracing``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from profan.api import TRACE_INPUTS
from profan.commands.arguments import add_trace_options
from profan.errors import ConfigError
from profan.export import (
    DEFAULT_BINS,
    atomic_file,
    check_targets,
    exportable,
    output_form,
    write_annotated,
    write_chrome,
    xplane_targets,
)
from profan.outputs import check_destination, option_inputs, refuse_inputs
from profan.report.analysis.pipeline import Progress, request_for
from profan.report.rules.config import load_rule_config
from profan.units import si

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help=TRACE_INPUTS)
    parser.add_argument(
        "--output",
        "-o",
        required=True,
        metavar="FILE",
        help="where to write: *.xplane.pb, *.json or *.json.gz (a directory with --format "
        "xplane: a log dir with every host); never inside the trace directory",
    )
    parser.add_argument(
        "--format", choices=("xplane", "json"), help="the form (default: from FILE's suffix)"
    )
    add_trace_options(parser)
    parser.add_argument(
        "--counter-bins",
        type=int,
        default=DEFAULT_BINS,
        metavar="N",
        help=f"JSON: intervals the FLOP/s and bandwidth counters average over (default "
        f"{DEFAULT_BINS})",
    )


def run(args: argparse.Namespace, options: RunOptions) -> int:
    if args.counter_bins < 1:
        raise ConfigError("--counter-bins must be at least 1")
    form = output_form(args.output, args.format)
    config = load_rule_config(args.config)
    request = request_for(
        args.trace, hlo=args.hlo, run=args.run, chip=args.chip, config=config, options=options
    )
    trace_path, found = request.inputs.trace, request.inputs.run
    targets = xplane_targets(args.output, found) if form == "xplane" else {"": Path(args.output)}
    check_targets(list(targets.values()), [args.trace, trace_path], found)
    inputs = [("trace", args.trace), ("--hlo", args.hlo), ("--config", args.config)]
    outputs = [("--output", target) for target in targets.values()]
    refuse_inputs(outputs, inputs + option_inputs(args))
    for target in targets.values():
        check_destination("--output", target)
    if form == "xplane":
        formats = {found.formats[host] for host in targets}
        if formats != {"xplane"}:
            raise ConfigError(
                f"{trace_path}: the trace is trace-viewer JSON, not an xplane: there is no "
                ".xplane.pb to annotate; export it as Chrome JSON (--output FILE.json.gz)"
            )
    progress = Progress()
    started = time.perf_counter()
    export = exportable(request, progress=progress)
    if form == "xplane":
        for host, file, _ in export.hosts:
            target = targets[host]
            progress(f"annotating {host}")
            with atomic_file(target, "--output") as temporary:
                count = write_annotated(str(file), temporary, export, host)
            _wrote(target, f"{count.annotated} of {count.events} op events annotated", started)
    else:
        target = targets[""]
        progress("writing the Chrome trace")
        with atomic_file(target, "--output") as temporary:
            written = write_chrome(export, temporary, args.counter_bins)
        _wrote(
            target,
            f"{written.op_slices} op slices with profan's figures, {written.counters} counter "
            f"events, {written.processes} device(s)",
            started,
        )
    missing = export.unjoined_rows()
    if missing:
        print(
            f"profan: note: {missing} op executions were not found among the trace's events "
            "again; they carry no figures in the output",
            file=sys.stderr,
        )
    return 0


def _wrote(target: Path, what: str, started: float) -> None:
    size = target.stat().st_size
    elapsed = time.perf_counter() - started
    print(f"profan: wrote {target} ({si(size, 'B')}, {what}; {elapsed:.1f} s)", file=sys.stderr)

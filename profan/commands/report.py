"""``profan report TRACE``: where the time went and how far each op was from the roofline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from profan.api import DEFAULT_TOP, TRACE_INPUTS, ReportOptions, json_text
from profan.commands.arguments import add_trace_options
from profan.errors import ConfigError
from profan.outputs import check_destination, option_inputs, refuse_inputs, write_file, write_stdout
from profan.report.analysis.pipeline import Progress, report_of, text_of

if TYPE_CHECKING:
    from profan.report.model import Report
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help=TRACE_INPUTS)
    parser.add_argument(
        "--format",
        choices=("term", "md", "html", "json", "csv"),
        default="term",
        help="output format (csv: the op table, one row per op, the JSON op fields as columns)",
    )
    parser.add_argument("--out", help="directory for the report file and plots (default: stdout)")
    parser.add_argument(
        "--top",
        type=int,
        help=f"ops the term, md and html formats list (default {DEFAULT_TOP}; json and csv "
        "list every op)",
    )
    parser.add_argument(
        "--sort",
        metavar="COLUMN",
        help="order the ops by a column of the table (measured, ideal, eff, n, flops, bytes, "
        "wait, exposed, op, category, bound, source, program) or a field of the JSON ops; "
        "numbers largest first, text A-Z; COLUMN:asc or COLUMN:desc to choose (default: "
        "measured)",
    )
    parser.add_argument(
        "--filter",
        metavar="EXPR",
        action="append",
        help="list only the ops that match, in every format: category=matmul, bound=hbm, "
        "opcode=fusion, flag=exposed-collective, program=jit_train_step, or bare text found "
        "in the op's name or source line; case does not matter; repeat to require several",
    )
    add_trace_options(parser)
    parser.add_argument("--plots", action="store_true", help="also write plot PNGs under --out")


def run(args: argparse.Namespace, options: RunOptions) -> int:
    if args.top is not None and args.top < 1:
        raise ConfigError("--top must be at least 1")
    chosen = ReportOptions(
        chip=args.chip,
        hlo=args.hlo,
        run=args.run,
        config=args.config,
        top=args.top or DEFAULT_TOP,
        sort=args.sort,
        filter=args.filter or (),
    )
    filters, order = chosen.filters(), chosen.order()  # (a bad one fails before the trace)
    out_dir = Path(args.out) if args.out else None
    _note_unused(args, out_dir)
    if out_dir is not None:
        _check_out_dir(out_dir, Path(args.trace))
        _check_outputs(args, out_dir)
    quiet = args.format in ("json", "csv")  # data for a program: nothing else on stderr
    progress = Progress(False) if quiet else Progress()
    source = chosen.source(args.trace, options, page=args.format == "html")
    top = chosen.top
    # What the text depends on beside the report.  A rendering that writes nothing else (PNGs
    # under --out for Markdown, or for HTML with --plots) is cached as text: re-opening then
    # needs neither the report's renderers nor the libraries they load.
    selection = ([str(f) for f in filters], str(order) if order else None)
    rendering = ("report", args.format, top, *_terminal_options(args.format, out_dir), selection)

    def select_and_render(report: Report, plots: bool = False) -> str:
        from profan.report.render.selection import heading, selected

        chosen_ops = selected(report, filters, order)
        title = None
        if filters or order is not None:
            shown = min(top, len(chosen_ops.ops))
            title = heading(shown, len(chosen_ops.ops), len(report.ops), filters, order)
        op_total = sum(op.measured_s for op in report.ops)
        return render(
            chosen_ops,
            args.format,
            top=top,
            out_dir=out_dir,
            plots=plots,
            heading=title,
            op_total=op_total,
        )

    writes_images = out_dir is not None and (
        args.format == "md" or (args.format == "html" and args.plots)
    )
    if writes_images:
        text = select_and_render(report_of(source, progress), plots=args.plots)
    else:

        def render_text(report: Report) -> str:
            return select_and_render(report)

        text = text_of([source], render_text, rendering, progress)
    if out_dir is None:
        write_stdout(text)
    else:
        target = out_dir / REPORT_FILES[args.format]
        write_file(target, text, "--out")
        print(f"profan: wrote {target}", file=sys.stderr)
    return 0


REPORT_FILES = {
    "term": "report.txt",
    "md": "report.md",
    "html": "report.html",
    "json": "report.json",
    "csv": "ops.csv",
}


def _note_unused(args: argparse.Namespace, out_dir: Path | None) -> None:
    """One line on stderr for each option that changes nothing here (not an error: the same
    command line may serve several formats in a script)."""
    if args.plots and (out_dir is None or args.format not in ("html", "md")):
        why = "without --out" if out_dir is None else f"with --format {args.format}"
        print(
            f"profan: note: --plots does nothing {why} (plots are PNG files written under "
            "--out beside an html or md report)",
            file=sys.stderr,
        )
    if args.top is not None and args.format in ("json", "csv"):
        print(
            f"profan: note: --top does nothing with --format {args.format}, which lists every "
            "op (--filter chooses which)",
            file=sys.stderr,
        )


def _check_outputs(args: argparse.Namespace, out_dir: Path) -> None:
    """Before any analysis: no file the report writes (the report, plots) is an input, and
    ``out_dir`` takes files."""
    # (the plots' names, not profan.report.render.plots: it loads matplotlib)
    plots = ("roofline", "time_per_step", "measured_vs_ideal")
    written = [out_dir / REPORT_FILES[args.format], *(out_dir / f"{n}.png" for n in plots)]
    inputs = [("trace", args.trace), ("--hlo", args.hlo), ("--config", args.config)]
    refuse_inputs([("--out", path) for path in written], inputs + option_inputs(args))
    check_destination("--out", out_dir, folder=True)
    out_dir.mkdir(parents=True, exist_ok=True)


def _check_out_dir(out_dir: Path, trace: Path) -> None:
    """Never write into the user's trace directory."""
    trace_dir = trace.resolve() if trace.is_dir() else trace.resolve().parent
    resolved = out_dir.resolve()
    if resolved == trace_dir or trace_dir in resolved.parents:
        raise ConfigError(f"--out {out_dir} is inside the trace directory; choose another place")


def _terminal_options(fmt: str, out_dir: Path | None) -> tuple[bool, int]:
    """(colour, width) of terminal text: the terminal's when printed, plain and the default
    width in a file; other formats have neither."""
    if fmt != "term":
        return False, 0
    from profan.report.render.layout import DEFAULT_WIDTH, terminal_width, use_colour

    if out_dir is not None:
        return False, DEFAULT_WIDTH
    return use_colour(sys.stdout), terminal_width(sys.stdout)


def render(
    report: Report,
    fmt: str,
    *,
    top: int,
    out_dir: Path | None,
    plots: bool = False,
    heading: str | None = None,
    op_total: float | None = None,
) -> str:
    """``report`` in ``fmt``; ``heading``: the op table's title when its ops were selected,
    ``op_total``: the time of all ops (the terminal's % column)."""
    if fmt == "json":
        return json_text(report)
    if fmt == "csv":
        from profan.report.render.ops_table import ops_csv

        return ops_csv(report)
    if fmt == "term":
        from profan.report.render import terminal

        colour, width = _terminal_options(fmt, out_dir)
        return terminal.render(
            report, top=top, colour=colour, width=width, heading=heading, op_total=op_total
        )
    if fmt == "html":
        from profan.report.render import html

        if plots and out_dir is not None:  # the page draws its own charts: PNGs only if asked
            from profan.report.render import plots as plot_module

            plot_module.write_pngs(plot_module.render_png(report), out_dir)
        return html.render(report, top=top)
    from profan.report.render import markdown
    from profan.report.render import plots as plot_module

    images: dict[str, str] = {}
    if out_dir is not None:
        for path in plot_module.write_pngs(plot_module.render_png(report), out_dir):
            images[path.stem] = path.name
    return markdown.render(report, top=top, images=images, heading=heading)

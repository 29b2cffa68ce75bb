"""``profan report TRACE``: where the time went and how far each op was from the roofline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from profan.errors import ConfigError
from profan.outputs import check_destination, option_inputs, refuse_inputs, write_file, write_stdout
from profan.report.config import load_rule_config
from profan.report.pipeline import Progress, report_for, text_for

if TYPE_CHECKING:
    from profan.report.model import Report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help="trace directory or .xplane.pb file")
    parser.add_argument(
        "--format", choices=("term", "md", "html", "json"), default="term", help="output format"
    )
    parser.add_argument("--out", help="directory for the report file and plots (default: stdout)")
    parser.add_argument("--top", type=int, default=20, help="ops to list (default 20)")
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")
    parser.add_argument("--config", help="profan.toml with [rules] thresholds")
    parser.add_argument("--plots", action="store_true", help="also write plot PNGs under --out")


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise ConfigError("--top must be at least 1")
    config = load_rule_config(args.config)
    progress = Progress(False) if args.format == "json" else Progress()
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        _check_out_dir(out_dir, Path(args.trace))
        _check_outputs(args, out_dir)
    options = {
        "chip": args.chip,
        "hlo": args.hlo,
        "run": args.run,
        "config": config,
        "progress": progress,
        "use_cache": not args.no_cache,
        "page": args.format == "html",
    }
    # What the text depends on beside the report.  A rendering that writes nothing else (PNGs
    # under --out for Markdown, or for HTML with --plots) is cached as text: re-opening then
    # needs neither the report's renderers nor the libraries they load.
    rendering = ("report", args.format, args.top, *_terminal_options(args.format, out_dir))
    writes_images = out_dir is not None and (
        args.format == "md" or (args.format == "html" and args.plots)
    )
    if writes_images:
        report = report_for(args.trace, **options)
        text = render(report, args.format, top=args.top, out_dir=out_dir, plots=args.plots)
    else:

        def render_text(report: Report) -> str:
            return render(report, args.format, top=args.top, out_dir=out_dir)

        text = text_for([args.trace], render_text, rendering, **options)
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
}


def _check_outputs(args: argparse.Namespace, out_dir: Path) -> None:
    """Before any analysis: no file the report writes (the report, plots) is an input, and
    ``out_dir`` takes files."""
    # (the plots' names, not profan.report.plots: it loads matplotlib)
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
    from profan.report.layout import DEFAULT_WIDTH, terminal_width, use_colour

    if out_dir is not None:
        return False, DEFAULT_WIDTH
    return use_colour(sys.stdout), terminal_width(sys.stdout)


def render(report, fmt: str, *, top: int, out_dir: Path | None, plots: bool = False) -> str:  # type: ignore[no-untyped-def]
    if fmt == "json":
        import msgspec  # (json.dumps with an indent is pure Python: 10x slower)

        data = msgspec.json.encode(report.to_dict())
        return msgspec.json.format(data, indent=1).decode("utf-8") + "\n"
    if fmt == "term":
        from profan.report import terminal

        colour, width = _terminal_options(fmt, out_dir)
        return terminal.render(report, top=top, colour=colour, width=width)
    if fmt == "html":
        from profan.report import html

        if plots and out_dir is not None:  # the page draws its own charts: PNGs only if asked
            from profan.report import plots as plot_module

            plot_module.write_pngs(plot_module.render_png(report), out_dir)
        return html.render(report, top=top)
    from profan.report import markdown
    from profan.report import plots as plot_module

    images: dict[str, str] = {}
    if out_dir is not None:
        for path in plot_module.write_pngs(plot_module.render_png(report), out_dir):
            images[path.stem] = path.name
    return markdown.render(report, top=top, images=images)

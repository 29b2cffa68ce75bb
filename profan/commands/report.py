"""``profan report TRACE``: where the time went and how far each op was from the roofline."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from profan.errors import ConfigError
from profan.report.config import load_rule_config
from profan.report.pipeline import Progress, report_for


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
    report = report_for(
        args.trace, chip=args.chip, hlo=args.hlo, run=args.run, config=config, progress=progress
    )
    out_dir = Path(args.out) if args.out else None
    if out_dir is not None:
        _check_out_dir(out_dir, Path(args.trace))
        out_dir.mkdir(parents=True, exist_ok=True)
    text = render(report, args.format, top=args.top, out_dir=out_dir, plots=args.plots)
    if out_dir is None:
        sys.stdout.write(text)
    else:
        name = {
            "term": "report.txt",
            "md": "report.md",
            "html": "report.html",
            "json": "report.json",
        }
        target = out_dir / name[args.format]
        target.write_text(text, encoding="utf-8")
        print(f"profan: wrote {target}", file=sys.stderr)
    return 0


def _check_out_dir(out_dir: Path, trace: Path) -> None:
    """Never write into the user's trace directory."""
    trace_dir = trace.resolve() if trace.is_dir() else trace.resolve().parent
    resolved = out_dir.resolve()
    if resolved == trace_dir or trace_dir in resolved.parents:
        raise ConfigError(f"--out {out_dir} is inside the trace directory; choose another place")


def render(report, fmt: str, *, top: int, out_dir: Path | None, plots: bool = False) -> str:  # type: ignore[no-untyped-def]
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=1) + "\n"
    if fmt == "term":
        from profan.report import terminal

        colour = out_dir is None and terminal.use_colour(sys.stdout)
        width = terminal.terminal_width(sys.stdout) if out_dir is None else terminal.DEFAULT_WIDTH
        return terminal.render(report, top=top, colour=colour, width=width)
    from profan.report import plots as plot_module

    if fmt == "html":
        from profan.report import html

        pngs = plot_module.render_png(report)
        if plots and out_dir is not None:
            plot_module.write_pngs(pngs, out_dir)
        return html.render(report, pngs, top=top)
    from profan.report import markdown

    images: dict[str, str] = {}
    if out_dir is not None:
        for path in plot_module.write_pngs(plot_module.render_png(report), out_dir):
            images[path.stem] = path.name
    return markdown.render(report, top=top, images=images)

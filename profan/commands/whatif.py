"""``profan whatif TRACE --chip NAME`` / ``--hlo DIR`` / ``--mesh AXIS=N,...``: the measured step
projected onto another chip, a recompiled program or another mesh (``profan.whatif``;
docs/whatif.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from profan.api import TRACE_INPUTS
from profan.errors import ConfigError
from profan.outputs import write_stdout

if TYPE_CHECKING:
    from profan.report.model import Report
    from profan.roofline import ModuleOpRecord
    from profan.trace.options import RunOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", help=TRACE_INPUTS)
    parser.add_argument("--chip", help="project onto this catalogued chip (see `profan chips`)")
    parser.add_argument(
        "--hlo",
        metavar="DIR",
        help="project a recompiled program (another batch, mesh or sharding) from its HLO dump",
    )
    parser.add_argument(
        "--mesh",
        metavar="AXIS=N,...",
        help="the same program on another mesh (axes resized, e.g. data=2,model=4): collectives "
        "recosted for the new group sizes, per-device work scaled by the shard sizes; an estimate",
    )
    parser.add_argument(
        "--source-hlo", metavar="DIR", help="the measured program's HLO dump, as report's --hlo"
    )
    parser.add_argument("--top", type=int, default=20, help="ops to list (default 20)")
    parser.add_argument("--format", choices=("term", "md", "json", "html"), default="term")


def run(args: argparse.Namespace, options: RunOptions) -> int:
    from profan.report.analysis.pipeline import Progress, report_of, request_for
    from profan.whatif import render
    from profan.whatif.project import project_chip, project_hlo

    if sum(bool(x) for x in (args.chip, args.hlo, args.mesh)) != 1:
        raise ConfigError("whatif: give one of --chip NAME, --hlo DIR or --mesh AXIS=N,...")
    request = request_for(args.trace, hlo=args.source_hlo, options=options)
    source = report_of(request, Progress(False))
    if args.chip:
        # the same inputs (their key parts taken once) scored against the other chip
        other = report_of(request.replace(chip=args.chip), Progress(False))
        projection = project_chip(source, other)
    elif args.mesh:
        from profan.whatif.mesh import parse_mesh, project_mesh

        projection = project_mesh(source, parse_mesh(args.mesh))
    else:
        projection = project_hlo(source, recompiled_roofline(args.hlo, source), args.hlo)
    if args.format == "json":
        text = render.to_json(projection)
    elif args.format == "md":
        text = render.markdown(projection, args.top)
    elif args.format == "html":
        text = render.to_html(projection, args.top)
    else:
        text = render.terminal(projection, args.top)
    write_stdout(text)
    return 0


def recompiled_roofline(path: str, source: Report) -> list[ModuleOpRecord]:
    """The compile-time roofline (``score_module``) of the recompiled program's module in
    ``path`` that has the name of the profile's busiest module (else the largest)."""
    from pathlib import Path

    from profan.roofline import score_module
    from profan.sharding import describe
    from profan.trace.hlofiles import modules_from_path

    modules = modules_from_path(Path(path))
    busiest: dict[str, float] = {}
    for entry in source.ops:
        busiest[entry.module] = busiest.get(entry.module, 0.0) + entry.measured_s
    wanted = max(busiest, key=busiest.__getitem__) if busiest else None
    named = [m for m in modules if m.name == wanted]
    module = named[0] if named else max(modules, key=lambda m: len(m.computations))
    return score_module(module, source.chip.name, sharding=describe(module))

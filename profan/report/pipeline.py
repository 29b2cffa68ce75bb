"""From a trace path to a ``Report``: load, describe sharding, score, build, run the rules.

Each step runs once: the sharding of every module is described once and handed to scoring
(meshes for the collectives' times) and to the report builder (matmul splits, global shapes).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from profan import chips, roofline, sharding
from profan.errors import ConfigError, ProfanError, TraceError
from profan.report.build import Analysis, build_report
from profan.report.config import RuleConfig
from profan.report.keys import base_name
from profan.report.model import Report
from profan.sharding import ProgramMesh, ShardingReport
from profan.trace import load
from profan.trace.hlofiles import modules_before_optimizations
from profan.trace.profile import Profile
from profan.trace.storage import is_remote


class Progress:
    """One line per phase on stderr, only when it is a terminal (or forced)."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"profan: [{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


def _get_chip(name: str | None) -> chips.Chip | None:
    if name is None:
        return None
    try:
        return chips.get_chip(name)
    except KeyError:
        raise ConfigError(f"unknown chip {name!r} (see `profan chips`)") from None


def describe_shardings(
    profile: Profile, program_meshes: Mapping[str, ProgramMesh] | None = None
) -> dict[str, ShardingReport]:
    """``profan.sharding.describe`` of every module of the profile, by module key.
    ``program_meshes`` (by module base name, ``jit_layer``): the mesh each program was written
    for, when the caller knows it (``profan.capture`` does), so axes carry the program's names."""
    meshes = program_meshes or {}
    out: dict[str, ShardingReport] = {}
    for key, module in profile.modules.items():
        try:
            out[key] = sharding.describe(module, meshes.get(base_name(key)))
        except ProfanError:
            continue  # sharding we cannot read is shown as missing, not fatal to the report
    return out


def dumped_program_meshes(hlo: Path) -> dict[str, ProgramMesh]:
    """The mesh each program names in an XLA dump's modules before optimisations (JAX writes the
    mesh, axis names included, there; the optimised modules keep only XLA's names), by module
    base name.  A name two dumped programs share with different meshes is left out."""
    found: dict[str, ProgramMesh | None] = {}
    for module in modules_before_optimizations(hlo):
        mesh = sharding.program_mesh(module)
        if mesh is None:
            continue
        name = base_name(module.name)
        if name in found and found[name] is not None and found[name].spec != mesh.spec:
            found[name] = None  # ambiguous: two programs of this name on different meshes
        elif name not in found:
            found[name] = mesh
    return {name: mesh for name, mesh in found.items() if mesh is not None}


def resolve_layout(path: str | Path, hlo: str | None) -> tuple[str, str | None]:
    """A run directory laid out as ``trace/`` (the profiler's output) beside ``hlo/`` (XLA's text
    dumps), as ``profan``'s fixtures and many CI jobs keep them: read the trace from ``trace/``
    and, unless ``--hlo`` says otherwise, join it to the dumps in ``hlo/``."""
    folder = Path(path)
    if folder.is_dir() and not (folder / "plugins").is_dir() and (folder / "trace").is_dir():
        if hlo is None and (folder / "hlo").is_dir():
            hlo = str(folder / "hlo")
        return str(folder / "trace"), hlo
    return str(path), hlo


def analyse(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    progress: Progress | None = None,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
) -> Analysis:
    progress = progress or Progress(False)
    if not is_remote(path) and not Path(path).exists():  # a URL is checked when it is listed
        raise TraceError(str(path), "no such file or directory")
    progress(f"loading {path}")
    trace_path, hlo = resolve_layout(path, hlo)
    profile = load(trace_path, hlo=hlo, run=run, progress=progress.enabled or None)
    progress(f"loaded {len(profile.ops)} op events, {len(profile.modules)} modules")
    progress("describing sharding")
    meshes = {**(dumped_program_meshes(Path(hlo)) if hlo else {}), **(program_meshes or {})}
    shardings = describe_shardings(profile, meshes)
    progress("scoring")
    score = roofline.score(profile, _get_chip(chip), shardings=shardings)
    return Analysis(profile, score, shardings)


def report_for(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    config: RuleConfig | None = None,
    progress: Progress | None = None,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
    page: bool = False,
) -> Report:
    """The report of a trace, or of a JSON report file (read back as it was written).
    ``page``: also what only the HTML page shows (``profan.report.page_data``)."""
    progress = progress or Progress(False)
    if str(path).endswith(".json") and Path(path).is_file():
        return read_json_report(path)
    analysis = analyse(
        path, chip=chip, hlo=hlo, run=run, progress=progress, program_meshes=program_meshes
    )
    progress("building the report")
    report = build_report(analysis, config)
    if page:
        from profan.report.page_data import add_page_data  # only the HTML page pays for it

        add_page_data(report, analysis.profile)
    return report


def read_json_report(path: str | Path) -> Report:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: cannot read JSON report: {error}") from None
    return Report.from_dict(data, where=str(path))

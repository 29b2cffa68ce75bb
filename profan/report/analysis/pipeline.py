"""From a trace path to a ``Report``: load, describe sharding, score, build, run the rules.

A command makes one ``Request`` (``request_for``: the inputs located, its options) and hands it
here (``report_of``, ``text_of``, ``analyse_request``); ``report_for`` and ``analyse`` make one
from keywords.  Each step runs once: the sharding of every module is described once and handed
to scoring (meshes for the collectives' times) and to the report builder (matmul splits, global
shapes), and each cache key is taken once (``profan.report.analysis.request``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from profan.cache.keys import digest_behind, finish_digests
from profan.cache.store import entry_exists, writing_behind
from profan.errors import ConfigError, ProfanError, TraceError
from profan.report.analysis.request import Inputs, JsonReport, Request
from profan.report.stored import read_report, read_text, text_key, write_report, write_text
from profan.trace.discover import find_run
from profan.trace.options import RunOptions
from profan.trace.storage import file_url_path, is_remote

if TYPE_CHECKING:  # the rest is imported when a report is built, not when one is reused
    from profan import chips
    from profan.hlo.model import Module
    from profan.report.analysis.build import Analysis
    from profan.report.model import Report
    from profan.report.rules.config import RuleConfig
    from profan.roofline.scoring import ModuleScoring
    from profan.sharding import ProgramMesh, ShardingReport
    from profan.trace.profile import Profile


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
    """The chip named on the command line (``get_chip`` raises ``ConfigError`` for one it does
    not know, naming those it does)."""
    from profan import chips

    return None if name is None else chips.get_chip(name)


def describe_shardings(
    profile: Profile,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
    described: Mapping[str, tuple[Module, ShardingReport]] | None = None,
) -> dict[str, ShardingReport]:
    """``profan.sharding.describe`` of every module of the profile, by module key.
    ``program_meshes`` (by module base name, ``jit_layer``): the mesh each program was written
    for, when the caller knows it (``profan.capture`` does), so axes carry the program's names.
    ``described``: key -> (module, its description with these meshes) made before."""
    from profan import sharding
    from profan.report.keys import base_name

    meshes = program_meshes or {}
    out: dict[str, ShardingReport] = {}
    for key, module in profile.modules.items():
        known = (described or {}).get(key)
        if known is not None and known[0] is module:
            out[key] = known[1]
            continue
        try:
            out[key] = sharding.describe(module, meshes.get(base_name(key)))
        except ProfanError:
            continue  # sharding we cannot read is shown as missing, not fatal to the report
    return out


def dumped_program_meshes(hlo: Path) -> dict[str, ProgramMesh]:
    """The mesh each program names in an XLA dump's modules before optimisations (JAX writes the
    mesh, axis names included, there; the optimised modules keep only XLA's names), by module
    base name.  A name two dumped programs share with different meshes is left out."""
    from profan import sharding
    from profan.report.keys import base_name
    from profan.trace.hlofiles import modules_before_optimizations

    found: dict[str, ProgramMesh | None] = {}
    for module in modules_before_optimizations(hlo):
        mesh = sharding.program_mesh(module)
        if mesh is None:
            continue
        name = base_name(module.name)
        seen = found.get(name)
        if seen is not None and seen.spec != mesh.spec:
            found[name] = None  # ambiguous: two programs of this name on different meshes
        elif name not in found:
            found[name] = mesh
    return {name: mesh for name, mesh in found.items() if mesh is not None}


# the --hlo given (a str, a path, None): resolve_layout returns it unchanged or a str
_Hlo = TypeVar("_Hlo", bound=str | os.PathLike[str] | None)


def resolve_layout(path: str | os.PathLike[str], hlo: _Hlo) -> tuple[str, _Hlo | str]:
    """A run directory laid out as ``trace/`` (the profiler's output) beside ``hlo/`` (XLA's text
    dumps), as ``profan``'s fixtures and many CI jobs keep them: read the trace from ``trace/``
    and, unless ``--hlo`` says otherwise, join it to the dumps in ``hlo/``.  ``file://`` URLs
    are their local paths (``local_path``)."""
    folder, dumps = Path(local_path(path)), local_path(hlo)
    if folder.is_dir() and not (folder / "plugins").is_dir() and (folder / "trace").is_dir():
        if dumps is None and (folder / "hlo").is_dir():
            return str(folder / "trace"), str(folder / "hlo")
        return str(folder / "trace"), dumps
    return str(local_path(path)), dumps


_P = TypeVar("_P", bound=str | os.PathLike[str] | None)


def local_path(path: _P) -> _P | str:
    """``path``, or the local path a ``file://`` URL names (``file:///abs``,
    ``file://localhost/abs``; ``TraceError`` for one naming another machine), as the command
    line takes them (``profan.inputs.check_inputs``)."""
    local = file_url_path(path) if isinstance(path, str) else None
    return path if local is None else local


def locate(path: str | Path, hlo: str | None = None, run: str | None = None) -> Inputs:
    """The inputs of ``path`` (``TraceError`` when there is no such trace)."""
    path, hlo = local_path(path), local_path(hlo)
    if not is_remote(path) and not Path(path).exists():  # a URL is checked when it is listed
        raise TraceError(str(path), "no such file or directory")
    trace, hlo = resolve_layout(path, hlo)
    return Inputs(trace, hlo, find_run(trace, run))


def request_for(
    path: str | Path,
    *,
    hlo: str | None = None,
    run: str | None = None,
    chip: str | None = None,
    config: RuleConfig | None = None,
    page: bool = False,
    options: RunOptions | None = None,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
) -> Request:
    """The request for the report of ``path`` (located now: ``TraceError`` when there is no
    such trace) with these options (``Request``; no ``options``: the defaults)."""
    return Request(
        locate(path, hlo, run),
        options or RunOptions(),
        chip=chip,
        config=config,
        page=page,
        program_meshes=program_meshes,
        path=str(path),
    )


def source_for(
    path: str | Path,
    *,
    hlo: str | None = None,
    run: str | None = None,
    chip: str | None = None,
    config: RuleConfig | None = None,
    page: bool = False,
    options: RunOptions | None = None,
) -> Request | JsonReport:
    """A JSON report file given where a trace could be, else ``request_for`` the trace."""
    if is_json_report(path):
        return JsonReport(str(path))
    return request_for(path, hlo=hlo, run=run, chip=chip, config=config, page=page, options=options)


def is_json_report(path: str | Path) -> bool:
    """Whether ``path`` is a JSON report (read back, never analysed)."""
    return str(path).endswith(".json") and Path(path).is_file()


@contextmanager
def reading_ahead(request: Request | None) -> Iterator[bool]:
    """Within: the trace of ``request`` is read by a worker process started now, while this
    one imports the pipeline, parses the HLO dump and prepares the rest
    (``profan.trace.prefetch``: one big local host, an idle CPU), when it will be read at all:
    not when a report or the loaded profile of these inputs is in the cache.  That is told
    without hashing a trace file the cache has not seen (nothing is stored of it): a new trace
    starts reading before its hash is taken.  The read is stopped on the way out if the loader
    did not take it.  Cache entries are written behind the work meanwhile
    (``store.writing_behind``), and waited for on the way out.

    Yields whether to look the inputs up in the cache before building: not for a trace file
    the cache has not seen as it is now that a worker reads.  Its lookups could only find the
    same bytes written again at the same path (keys name the path), and its hash (~0.06 s for
    69 MB) would lengthen this process's path, which is as long as the worker's: it is taken
    once the read is done (``trace.pod``), on the CPU the worker leaves, and the entries are
    stored under it (the request's keys are taken when first asked).  Without a worker, the
    hash runs in a thread beside the imports."""
    started, hashing, unseen = None, False, False
    if request is not None and _will_read(request):
        from profan.trace import prefetch  # (a report found in the cache reads nothing)

        options = request.options
        # before any thread: it forks
        started = prefetch.start(request.inputs.run, options.workers, options.scheduler)
        unseen = options.use_cache and not request.fingerprint.seen_before()
        hashing = unseen and started is None
    try:
        with writing_behind():
            if hashing:
                assert request is not None
                _import_while_hashing(request.inputs.run.files.values())
            yield not (unseen and started is not None)
    finally:
        if unseen:
            finish_digests()
        if started is not None:
            started.stop()


def _import_while_hashing(files: Iterable[Any]) -> None:
    """Start hashing trace files the cache has not seen (their keys need the hash: 69 MB take
    ~0.1 s) in a thread, and meanwhile import what builds a report, which the command will do
    anyway once their keys have been looked up and found nothing (a file the cache has not
    seen has nothing stored of it, short of a copy of one it has)."""
    digest_behind(files)
    import profan.report.analysis.build
    import profan.trace.api  # noqa: F401


def _will_read(request: Request) -> bool:
    if not request.options.use_cache or not request.fingerprint.seen_before():
        return True
    return not any(
        key is not None and entry_exists(kind, key)
        for kind, key in (
            ("reports", request.report_key()),
            ("profiles", request.fingerprint.events_key()),
        )
    )


def analyse(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    progress: Progress | None = None,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
    use_cache: bool = True,
) -> Analysis:
    """Load, describe the sharding of every module, score (``use_cache``: the loaded profile
    may come from the cache, ``profan.cache``)."""
    request = request_for(
        path,
        hlo=hlo,
        run=run,
        chip=chip,
        options=RunOptions(use_cache=use_cache),
        program_meshes=program_meshes,
    )
    with reading_ahead(request):
        return analyse_request(request, progress or Progress(False))


def analyse_request(request: Request, progress: Progress) -> Analysis:
    """``analyse`` of a request (its inputs located, its options)."""
    from profan import roofline
    from profan.report.analysis.build import Analysis
    from profan.trace.api import load_run

    inputs = request.inputs
    progress(f"loading {inputs.trace}")
    options = request.load_options(progress=progress.enabled or None)
    meshes = dict(request.program_meshes or {})
    ahead = _prepare_while_reading(inputs, meshes)
    dumped = ahead.modules if ahead else None
    profile = load_run(inputs.trace, inputs.run, options, dumped, request.fingerprint)
    progress(f"loaded {len(profile.ops)} op events, {len(profile.modules)} modules")
    progress("describing sharding")
    if ahead is None:
        meshes = {**(dumped_program_meshes(Path(inputs.hlo)) if inputs.hlo else {}), **meshes}
    else:
        meshes = ahead.meshes
    shardings = describe_shardings(profile, meshes, ahead.shardings if ahead else None)
    progress("scoring")
    scorings = ahead.scorings if ahead else None
    chip = _get_chip(request.chip)
    score = roofline.score(profile, chip, shardings=shardings, scorings=scorings)
    return Analysis(profile, score, shardings)


@dataclass(slots=True)
class _Ahead:
    """What is made of the ``--hlo`` dump while a worker reads the trace: its modules (the
    profile's, as the loader keys them), the programs' meshes, each module's sharding and its
    scoring with every scheduled instruction's cost estimated (``ModuleScoring``)."""

    modules: list[Module]
    meshes: dict[str, ProgramMesh]
    shardings: dict[str, tuple[Module, ShardingReport]]
    scorings: dict[str, ModuleScoring]


def _prepare_while_reading(inputs: Inputs, program_meshes: dict[str, ProgramMesh]) -> _Ahead | None:
    """The work on the ``--hlo`` dump that needs no trace, done while a worker reads it
    (``reading_ahead``); None when no read is under way or the dump cannot be read (the loader
    then parses it and reports what is wrong, as without a read ahead)."""
    from profan.trace import prefetch

    if inputs.hlo is None or not prefetch.reading(inputs.run):
        return None
    from profan import sharding
    from profan.report.keys import base_name
    from profan.roofline.scoring import ModuleScoring
    from profan.trace.hlofiles import modules_from_path

    try:
        modules = modules_from_path(Path(inputs.hlo))
        meshes = {**dumped_program_meshes(Path(inputs.hlo)), **program_meshes}
    except ProfanError:
        return None
    ahead = _Ahead(modules, meshes, {}, {})
    for module in modules:
        key = module.name  # the loader's key of a --hlo module (the first of a name wins)
        if key in ahead.scorings:
            continue
        report: ShardingReport | None
        try:
            report = sharding.describe(module, meshes.get(base_name(key)))
        except ProfanError:
            report = None  # described again after the load, and left out then as now
        else:
            ahead.shardings[key] = (module, report)
        ahead.scorings[key] = scoring = ModuleScoring(module, report)
        scoring.estimate_ahead()
    return ahead


def report_for(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    config: RuleConfig | None = None,
    progress: Progress | None = None,
    program_meshes: Mapping[str, ProgramMesh] | None = None,
    use_cache: bool = True,
    page: bool = False,
) -> Report:
    """The report of a trace, or of a JSON report file (read back as it was written): the
    keywords make the request (``request_for``) that ``report_of`` builds.

    ``use_cache``: reuse the report built before from the same inputs and options, and keep
    this one (``profan.report.stored``); the profile it is built from may come from the cache
    too.  A report for a caller that knows the program's meshes is not cached.  ``page``: also
    what only the HTML page shows (``profan.report.analysis.page_data``; part of the key)."""
    if is_json_report(path):
        return read_json_report(path)
    request = request_for(
        path,
        hlo=hlo,
        run=run,
        chip=chip,
        config=config,
        page=page,
        options=RunOptions(use_cache=use_cache),
        program_meshes=program_meshes,
    )
    return report_of(request, progress or Progress(False))


def report_of(source: Request | JsonReport, progress: Progress) -> Report:
    """The report a request asks for: from the cache when it holds it, else built (and kept
    there); a JSON report is read back."""
    if isinstance(source, JsonReport):
        return read_json_report(source.path)
    with reading_ahead(source) as look_up:
        return _report(source, progress, look_up)


def text_of(
    sources: Sequence[Request | JsonReport],
    render: Callable[..., str],
    rendering: tuple[Any, ...],
    progress: Progress,
) -> str:
    """``render(*reports)`` of the reports of ``sources`` (``report_of`` each), the text itself
    reused from the cache when the same rendering (``rendering``: what it depends on beside the
    reports, e.g. the format and its options) was made from the same reports before.  For
    renderings without side effects; a JSON report among them is read, never cached."""
    # one trace (not a diff of two) is read ahead while the keys are taken and the rest imported
    ahead = sources[0] if len(sources) == 1 and isinstance(sources[0], Request) else None
    with reading_ahead(ahead) as look_up:
        return _text(sources, render, rendering, progress, look_up)


def _text(
    sources: Sequence[Request | JsonReport],
    render: Callable[..., str],
    rendering: tuple[Any, ...],
    progress: Progress,
    look_up: bool = True,
) -> str:
    """``text_of``; ``look_up``: see ``reading_ahead``."""

    def rendered_key() -> str | None:
        keys = [source.report_key() if isinstance(source, Request) else None for source in sources]
        taken = [key for key in keys if key is not None]  # (a JSON report has none)
        return text_key(*taken, *rendering) if len(taken) == len(sources) else None

    if look_up:
        known = rendered_key()
        text = None if known is None else read_text(known)
        if text is not None:
            names = [source.path for source in sources]
            progress(f"{', '.join(names)}: this rendering, from the cache")
            return text
    reports = [
        read_json_report(source.path)
        if isinstance(source, JsonReport)
        else _report(source, progress, look_up)
        for source in sources
    ]
    text = render(*reports)
    written = rendered_key()
    if written is not None:
        write_text(written, text)
    return text


def _report(request: Request, progress: Progress, look_up: bool = True) -> Report:
    """The report stored under the request's key (when ``look_up``), else built (and stored
    there; a key not looked up is taken only to store it)."""
    if look_up:
        key = request.report_key()
        cached = None if key is None else read_report(key)
        if cached is not None:
            progress(f"{request.inputs.trace}: the report of these inputs, from the cache")
            return cached
    from profan.report.analysis.build import build_report

    analysis = analyse_request(request, progress)
    progress("building the report")
    report = build_report(analysis, request.config)
    if request.page:
        from profan.report.analysis.page_data import add_page_data  # only the HTML page pays for it

        add_page_data(report, analysis.profile)
    written = request.report_key()
    if written is not None:
        write_report(written, report)
    return report


def read_json_report(path: str | Path) -> Report:
    from profan.report.model import Report
    from profan.tomlschema import read_config

    data = read_config(path, what="the JSON report", syntax="json")
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ConfigError(f"{path}: schema_version: must be a whole number, got {version!r}")
    return Report.from_dict(data, where=str(path))

"""Run a JAX program, profile it and analyse the profile in one call.

``profan.capture(fn, *args, steps=3, warmup=1, **kwargs)`` compiles ``fn`` and runs the warm-up
steps outside the trace, records ``steps`` steps with ``jax.profiler`` into a private temporary
directory and returns the analysed ``Report`` (``Report.to_dict()`` is the JSON report). The HLO of
the programs comes from the trace itself, so no XLA dump flags are needed.

Code that runs its own loop uses the same machinery as a context manager::

    with profan.Capture(steps=3, warmup=1) as run:
        for batch in batches:
            with run.step():
                state = train_step(state, batch)
    report = run.report

The first ``warmup`` steps run untraced, the next ``steps`` are traced (one profiler step each)
and any later steps run untraced again. JAX is imported only when a capture starts: without the
``[jax]`` extra the rest of profan works and ``capture`` says how to install it.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

from profan.errors import ProfanError, TraceError

if TYPE_CHECKING:  # this module stays light: ``import profan`` re-exports it
    from profan.report.model import Report, StepRow
    from profan.report.rules.config import RuleConfig
    from profan.sharding import ProgramMesh

# The event JAX records (jax.monitoring) each time XLA compiles a program.
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# Step annotations carry this name (profan's loaders read steps from StepTraceAnnotation).
STEP_NAME = "profan_step"


class CaptureError(ProfanError):
    """A capture that cannot run: no JAX, a profiler already running, nothing traced."""


class CaptureWarning(UserWarning):
    """Something in the traced steps that distorts what they show (e.g. a compilation)."""


def _jax() -> ModuleType:
    try:
        import jax
    except ImportError:
        raise CaptureError(
            "profan.capture needs JAX: pip install 'profan[jax]' (or install jax for your "
            "accelerator, see https://docs.jax.dev/en/latest/installation.html)"
        ) from None
    return jax


def _name_of(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None and hasattr(fn, "func"):  # functools.partial
        return _name_of(fn.func)
    return str(name or type(fn).__name__)


class Capture:
    """Profile the steps of a loop the caller runs (see the module docstring).

    ``keep_trace``: False deletes the trace after the analysis; True keeps the private temporary
    directory; a path writes the trace there (its earlier runs are left alone). ``chip`` and
    ``rules`` are passed to the analysis as ``profan report --chip`` and ``[rules]`` would be.
    ``program_meshes`` (from :func:`program_meshes`) names the mesh axes as the program does;
    without it the report names them ``axis0``, ``axis1``, ...
    """

    def __init__(
        self,
        *,
        steps: int = 3,
        warmup: int = 1,
        keep_trace: bool | str | Path = False,
        chip: str | None = None,
        rules: RuleConfig | None = None,
        name: str = "steps",
        program_meshes: Mapping[str, ProgramMesh] | None = None,
    ) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise CaptureError(f"steps must be a positive integer, got {steps!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise CaptureError(f"warmup must be an integer >= 0, got {warmup!r}")
        self.steps = steps
        self.warmup = warmup
        if isinstance(keep_trace, str | Path):
            if not str(keep_trace):
                raise CaptureError("keep_trace: an empty path")
            self._keep_path: Path | None = Path(keep_trace)
            self._keep_temp = False
        else:
            self._keep_path, self._keep_temp = None, bool(keep_trace)
        self.chip = chip
        self.rules = rules
        self.program_meshes = dict(program_meshes or {})
        # (imported here, not with the module: ``import profan`` stays light)
        from profan.report.model import CaptureInfo

        self.info = CaptureInfo(name, steps, warmup)
        self.report: Report | None = None
        self._jax: ModuleType | None = None
        self._dir: Path | None = None
        self._tracing = False
        self._done = False
        self._seen = 0  # steps entered so far, warm-up included
        self._compiles = 0

    # -- the loop's side ----------------------------------------------------------------------

    def __enter__(self) -> Capture:
        self._jax = _jax()
        self._dir = self._trace_dir()
        return self

    @contextmanager
    def step(self, wait: Any = None) -> Iterator[None]:
        """One step of the loop. At its end the step waits for ``wait`` (arrays; ``()`` when the
        body waited itself) or, by default, for every live array. Device work whose outputs are
        already dropped cannot be waited for: keep or pass the step's outputs."""
        if self._jax is None:
            raise CaptureError("Capture.step() used outside `with Capture(...)`")
        index = self._seen
        self._seen += 1
        traced = self.warmup <= index < self.warmup + self.steps
        if traced and not self._tracing:
            self._start()
        if not traced:
            yield
            self.block(wait)
            return
        number = index - self.warmup
        started = time.perf_counter()
        with self._jax.profiler.StepTraceAnnotation(STEP_NAME, step_num=number):
            yield
            self.block(wait)
        self.info.step_wall_s.append(time.perf_counter() - started)
        self.info.traced_steps += 1
        if self.info.traced_steps == self.steps:
            self._stop()

    def block(self, value: Any = None) -> None:
        """Wait for ``value``'s arrays, or for every live array when ``value`` is None."""
        if self._jax is None:
            raise CaptureError("Capture.block() used outside `with Capture(...)`")
        jax = self._jax
        jax.block_until_ready(jax.live_arrays() if value is None else value)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if self._tracing:
                self._stop()
            if kind is None:
                self.report = self._analyse()
        finally:
            if not self._keep_temp and self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)

    # -- internals ----------------------------------------------------------------------------

    def _trace_dir(self) -> Path:
        # Always a fresh private directory (mkdtemp: readable by its owner only), so that the
        # profiler's run is the only one there; a ``keep_trace`` path receives it afterwards.
        return Path(tempfile.mkdtemp(prefix="profan-capture-"))

    def _on_event(self, event: str, duration_s: float, **_: Any) -> None:
        if event == _COMPILE_EVENT:
            self._compiles += 1

    def _start(self) -> None:
        assert self._jax is not None and self._dir is not None
        try:
            self._jax.profiler.start_trace(str(self._dir))
        except RuntimeError as error:
            raise CaptureError(
                f"cannot start the JAX profiler ({error}); is another trace running? "
                "profan.capture records its own trace"
            ) from None
        self._jax.monitoring.register_event_duration_secs_listener(self._on_event)
        self._tracing = True

    def _stop(self) -> None:
        assert self._jax is not None
        self._tracing = False
        self._jax.monitoring.unregister_event_duration_listener(self._on_event)
        self._jax.profiler.stop_trace()
        self.info.compilations_in_trace = self._compiles
        if self._compiles:
            warnings.warn(
                CaptureWarning(
                    f"profan.capture({self.info.function}): {self._compiles} XLA compilation(s) "
                    "ran inside the traced steps, so their times include compiling; if every "
                    "step compiles, shapes or static arguments change between steps"
                ),
                stacklevel=4,
            )

    def _analyse(self) -> Report:
        from profan.report.analysis.pipeline import Progress, report_of, request_for
        from profan.trace.options import RunOptions

        assert self._dir is not None
        if self.info.traced_steps == 0:
            raise CaptureError(
                f"profan.capture({self.info.function}): no step was traced: the loop ran "
                f"{self._seen} step(s) and the first {self.warmup} are warm-up"
            )
        runs = _runs(self._dir)
        if len(runs) != 1:
            raise CaptureError(f"the JAX profiler wrote {len(runs)} runs under {self._dir}")
        # the user's defaults ($PROFAN_CHIPS, $PROFAN_KERNELS, ...), read as the CLI reads them
        options = RunOptions.from_environment()
        try:
            with options.in_force():
                request = request_for(
                    self._dir,
                    run=runs[0],
                    chip=self.chip,
                    config=self.rules,
                    options=options,
                    program_meshes=self.program_meshes,
                )
                report = report_of(request, Progress(False))
        except TraceError as error:
            raise CaptureError(
                f"profan.capture({self.info.function}): {error.reason}; did the traced steps "
                "run JAX programs, and wait for them (keep the steps' outputs or pass them to "
                "step(wait=...))?"
            ) from None
        self.info.last_step_cut_short = _cut_short(report.steps)
        if self.info.last_step_cut_short:
            warnings.warn(
                CaptureWarning(
                    f"profan.capture({self.info.function}): the last traced step did less work "
                    "than the steps before it: its device work was still running when the "
                    "trace stopped; keep the step's outputs or pass them to step(wait=...)"
                ),
                stacklevel=3,
            )
        folder, run = self._dir, runs[0]
        if self._keep_path is not None:
            folder, run = self._keep_path, _move_run(self._dir, runs[0], self._keep_path)
        self.info.trace_kept = self._keep_temp or self._keep_path is not None
        report.trace.path = (
            str(folder)
            if self.info.trace_kept
            else f"<profan.capture of {self.info.function}; trace not kept>"
        )
        report.trace.run = run
        report.trace.capture = dataclasses.replace(
            self.info, step_wall_s=list(self.info.step_wall_s)
        )
        return report


def _cut_short(steps: list[StepRow]) -> bool:
    """Whether the last step's ideal time (what its ops should take, from their FLOPs and bytes)
    is below every earlier step's: a step whose work the trace did not see to the end."""
    ideal = [
        value
        for step in steps
        if step.score is not None
        and isinstance(value := step.score.ideal_s, int | float)
        and math.isfinite(value)  # (as the JSON has it: an unknown ideal is null there)
    ]
    if len(ideal) < 2 or len(ideal) < len(steps):  # fewer than two, or a step without one
        return False
    return ideal[-1] < min(ideal[:-1]) * (1 - 1e-6)


def _move_run(source: Path, run: str, destination: Path) -> str:
    """Move the profiler's run into ``destination``'s ``plugins/profile``, under a new name when
    that run name (the profiler's timestamp, to the second) is taken there."""
    profile = destination / "plugins" / "profile"
    profile.mkdir(parents=True, exist_ok=True)
    name, n = run, 1
    while (profile / name).exists():
        name, n = f"{run}_{n}", n + 1
    shutil.move(str(source / "plugins" / "profile" / run), str(profile / name))
    return name


def _runs(folder: Path) -> list[str]:
    """The profiler's run directories (``plugins/profile/<run>``) under a trace directory."""
    profile = folder / "plugins" / "profile"
    return sorted(p.name for p in profile.iterdir() if p.is_dir()) if profile.is_dir() else []


def capture(
    fn: Callable[..., Any],
    *args: Any,
    steps: int = 3,
    warmup: int = 1,
    keep_trace: bool | str | Path = False,
    chip: str | None = None,
    rules: RuleConfig | None = None,
    **kwargs: Any,
) -> Report:
    """Profile ``fn(*args, **kwargs)`` for ``steps`` steps after ``warmup`` untraced ones.

    ``fn`` is compiled before the trace starts even with ``warmup=0`` (when it is a jitted
    function, whose mesh then names the report's axes); each step waits for its outputs.
    ``steps``, ``warmup``, ``keep_trace``, ``chip`` and ``rules`` belong to capture; every other
    keyword goes to ``fn`` (wrap ``fn`` in ``functools.partial`` to pass one of those names).
    """
    _jax()
    name = _name_of(fn)
    meshes: dict[str, ProgramMesh] = {}
    if hasattr(fn, "lower"):
        lowered = fn.lower(*args, **kwargs)
        if warmup == 0:  # compile outside the trace; jax reuses the executable for the call
            lowered.compile()
        meshes = _meshes_of(lowered, name)
    session = Capture(
        steps=steps,
        warmup=warmup,
        keep_trace=keep_trace,
        chip=chip,
        rules=rules,
        name=name,
        program_meshes=meshes,
    )
    with session:
        for _ in range(warmup + steps):
            with session.step(wait=()):
                session.block(fn(*args, **kwargs))
    assert session.report is not None
    return session.report


def program_meshes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, ProgramMesh]:
    """The mesh a jitted ``fn`` names for these arguments, by program name (``jit_step``), for
    ``Capture(program_meshes=...)``: read by profan.sharding from the program JAX lowers, before
    XLA's optimisations replace the names with its own. Empty when ``fn`` is not jitted or the
    program names no mesh."""
    _jax()
    if not hasattr(fn, "lower"):
        return {}
    return _meshes_of(fn.lower(*args, **kwargs), _name_of(fn))


def _meshes_of(lowered: Any, name: str) -> dict[str, ProgramMesh]:
    text = lowered.as_text(dialect="hlo")
    if "xla.sdy" not in text and "mesh[" not in text:
        return {}  # names no mesh: not worth parsing
    from profan.hlo import parse_module
    from profan.report.keys import base_name
    from profan.sharding import program_mesh

    try:
        module = parse_module(text)
        mesh = program_mesh(module)
    except ProfanError as error:
        warnings.warn(
            CaptureWarning(f"profan.capture({name}): cannot read the program's mesh: {error}"),
            stacklevel=3,
        )
        return {}
    return {} if mesh is None else {base_name(module.name): mesh}

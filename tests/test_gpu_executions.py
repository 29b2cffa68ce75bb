"""GPU op executions as the hardware ran them (``profan.trace.gpu``), checked against counts made
here from the raw events, read with protobuf alone (``fixtures/inspect_xplane.py``), never
with profan's reader:

* per device, the kernels of one (program, op) grouped by kernel name: each kernel the op
  launches once per execution occurs once per execution, so the most frequent name's count is
  the op's executions.  Memsets and fills are set aside (a cuDNN call clears a varying number
  of buffers per execution); so are kernels inside command buffers (``command_buffer_N``: their
  instructions are found by ``profan.trace.command_buffers``, tested in
  test_trace_command_buffers.py), and an op that launches nothing but memsets;
* an op of a program's entry computation (outside loops and conditionals: XLA's HloProto,
  embedded in the trace) runs once per execution of its program, on each device; a program's
  executions are the host's ``GpuExecutable::ExecuteThunks`` spans of its module.

Regressions: on ROCm each ``jit_dot`` program of the gemm trace ran its GEMM 3 times, back to
back (was merged into one execution of 3x the time); on the H100 and H200 each execution of the
train step's ``custom-call.0`` (a memset, then the GEMM) is one, though copies on other streams
start between its two kernels (was split: 21 executions of 12, 117% efficiency).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import profan
from profan.report.analysis.pipeline import describe_shardings, resolve_layout
from profan.roofline import score
from profan.trace.schema import load_schema
from tests.conftest import FIXTURES_DIR, gpu_fixtures
from tests.raw_xplane import inspect_xplane

FIXTURE_FOLDERS = [
    folder
    for group in ("gpu_kernels", "gpu_transformer", "gpu_transformer_nocb")
    for folder in gpu_fixtures(group)
]
CORPUS_TRACES = [
    "mi300x_jax08_gemm",
    "mi300x_jax08_attention",
    "mi300x_jax_conv",
    "mi300x_jax_conv_legacy",
]
MEMSET = re.compile(r"^(Memset|memset|fill)|fill(_kernel)?\b", re.IGNORECASE)
COMMAND_BUFFER = re.compile(r"^command_buffer(_\d+)?$")
COPY = re.compile(r"copyBuffer|memcpy|Memcpy|Memset")
DEVICE_PREFIX = re.compile(r"^\[(\d+)\] ")


@dataclass
class RawTrace:
    """What the test needs of one xplane file, read with protobuf alone."""

    # (device, program, op) -> kernel name -> kernels (memsets and command buffers aside)
    kernels: dict[tuple[int, int, str], Counter[str]] = field(default_factory=dict)
    # program -> device -> executions, from the host's ExecuteThunks spans (device None: the
    # spans do not name theirs (ROCm): each executing thread ran the program as often)
    program_runs: dict[int, dict[int | None, int]] = field(default_factory=dict)
    # device -> its kernels that carry no hlo_op though they are no copies (the profiler lost
    # the annotation: on mi300x_jax_conv's GPU 0, two kernels of one execution)
    unannotated: Counter[int] = field(default_factory=Counter)
    entry_ops: dict[int, set[str]] = field(default_factory=dict)  # program -> entry's ops


def _stats(plane: Any, event: Any, ix: ModuleType) -> dict[str, Any]:
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    found: dict[str, Any] = {}
    for stat in event.stats:
        value = ix.stat_value(stat)
        if stat.WhichOneof("value") == "ref_value":
            value = names.get(value)
        found[names.get(stat.metadata_id, "?")] = value
    return found


@cache
def _raw(path: str) -> RawTrace:
    ix = inspect_xplane()
    space = ix.read_xspace(path)
    raw = RawTrace()
    kernels: dict[tuple[int, int, str], Counter[str]] = defaultdict(Counter)
    module_programs: dict[str, set[int]] = defaultdict(set)
    spans: list[tuple[str, int | None, str, int, int]] = []  # line, device, module, start, end
    launches: list[tuple[int, int]] = []  # (time, program)
    for plane in space.planes:
        device = re.match(r"^/device:GPU:(\d+)$", plane.name)
        if device:
            ordinal = int(device.group(1))
            for line in plane.lines:
                for event in line.events:
                    stats = _stats(plane, event, ix)
                    op, name = stats.get("hlo_op"), plane.event_metadata[event.metadata_id].name
                    if op is None and not COPY.search(name):
                        raw.unannotated[ordinal] += 1
                    if op is None or COMMAND_BUFFER.match(op) or MEMSET.search(name):
                        continue
                    kernels[(ordinal, int(stats["program_id"]), op)][name] += 1
        elif plane.name == "/host:metadata":
            hlo = load_schema("hlo.proto")["xla.HloProto"]
            names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            for meta in plane.event_metadata.values():
                stats = {names[s.metadata_id]: s for s in meta.stats}
                if "Hlo Proto" not in stats:
                    continue
                program = re.match(r"^(.*)\((\d+)\)$", meta.name)
                assert program, meta.name
                module = hlo.FromString(stats["Hlo Proto"].bytes_value).hlo_module
                entry = [c for c in module.computations if c.id == module.entry_computation_id]
                raw.entry_ops[int(program.group(2))] = {i.name for i in entry[0].instructions}
                module_programs[program.group(1)].add(int(program.group(2)))
        elif plane.name == "/host:CPU":
            for line in plane.lines:
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    stats = _stats(plane, event, ix)
                    if name.endswith("GpuExecutable::ExecuteThunks"):
                        prefix = DEVICE_PREFIX.match(name)
                        on = int(prefix.group(1)) if prefix else None
                        end = start + event.duration_ps
                        spans.append((line.name, on, stats["module_name"], start, end))
                    elif "correlation_id" in stats and "program_id" in stats:
                        launches.append((start, int(stats["program_id"])))
    raw.kernels = dict(kernels)
    for number in {p for ps in module_programs.values() for p in ps}:
        raw.program_runs[number] = {}
        for on in [*raw.unannotated, *{on for _, on, _, _, _ in spans}]:
            counts = _runs_of(number, on, spans, module_programs, launches)
            if counts is not None:
                raw.program_runs[number][on] = counts
    return raw


def _runs_of(
    program: int,
    device: int | None,
    spans: list[tuple[str, int | None, str, int, int]],
    module_programs: dict[str, set[int]],
    launches: list[tuple[int, int]],
) -> int | None:
    """Executions of ``program`` on ``device`` (None: on each executing thread of the spans
    naming no device); None when the threads disagree or none ran it."""
    per_line: Counter[str] = Counter()
    for line, on, module, start, end in spans:
        if on != device:
            continue
        programs = module_programs.get(module, set())
        if len(programs) != 1:  # programs of one name told apart by what the span launched
            programs = {p for time, p in launches if start <= time <= end}
        if programs == {program}:
            per_line[line] += 1
    counts = set(per_line.values())
    return counts.pop() if len(counts) == 1 else None


def _executions(profile: profan.Profile) -> Counter[tuple[int, int, str]]:
    ops = profile.ops
    return Counter(
        (int(d), int(p), str(o))
        for d, p, o in zip(ops["device"], ops["program_id"], ops["op_name"], strict=True)
    )


def _fixture_trace(folder: str) -> tuple[Path, profan.Profile]:
    [path] = (FIXTURES_DIR / folder / "trace").rglob("*.xplane.pb")
    trace, hlo = resolve_layout(FIXTURES_DIR / folder, None)
    return path, _loaded(str(trace), str(hlo) if hlo is not None else None)


@cache
def _loaded(trace: str, hlo: str | None) -> profan.Profile:
    return profan.load(trace, hlo=hlo)


def _check_kernel_counts(path: Path, profile: profan.Profile) -> int:
    """profan's executions of each (device, program, op) are the raw count; the ops compared."""
    raw = _raw(str(path))
    found = _executions(profile)
    wrong = {
        key: (found[key], max(names.values()))
        for key, names in raw.kernels.items()
        if found[key] != max(names.values())
    }
    assert not wrong, f"(device, program, op): (profan, kernels by name) {wrong}"
    return len(raw.kernels)


def _check_program_runs(path: Path, profile: profan.Profile) -> int:
    """Each entry-computation op runs once per program execution on each device that ran it;
    the (device, program, op) compared."""
    raw = _raw(str(path))
    compared, wrong = 0, {}
    for (device, program, op), count in _executions(profile).items():
        runs = raw.program_runs.get(program, {})
        expected = runs.get(device, runs.get(None))  # type: ignore[call-overload]
        if op not in raw.entry_ops.get(program, set()) or expected is None:
            continue
        compared += 1
        # (an execution whose kernels lost their hlo_op is missing from profan's count too)
        if not expected - raw.unannotated[device] <= count <= expected:
            wrong[(device, program, op)] = (count, expected)
    assert not wrong, f"(device, program, op): (profan's executions, program's) {wrong}"
    return compared


# The command-buffer recordings: every kernel ran inside a graph, nothing to count by name.
KERNEL_COUNTED = [f for f in FIXTURE_FOLDERS if not f.startswith("gpu_transformer_h")]
KERNEL_COUNTED = [f for f in KERNEL_COUNTED if f not in gpu_fixtures("gpu_transformer")]


@pytest.mark.parametrize("folder", KERNEL_COUNTED)
def test_fixture_executions_are_the_kernels_count(folder: str) -> None:
    path, profile = _fixture_trace(folder)
    assert _check_kernel_counts(path, profile) > 10


@pytest.mark.parametrize("name", CORPUS_TRACES)
def test_corpus_executions_are_the_kernels_count(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / "traces" / f"{name}.xplane.pb"
    assert _check_kernel_counts(path, _loaded(str(path), None)) >= 4


@pytest.mark.parametrize("folder", FIXTURE_FOLDERS)
def test_fixture_entry_ops_run_once_per_program_execution(folder: str) -> None:
    path, profile = _fixture_trace(folder)
    assert _check_program_runs(path, profile) > 0


@pytest.mark.parametrize("name", CORPUS_TRACES)
def test_corpus_entry_ops_run_once_per_program_execution(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / "traces" / f"{name}.xplane.pb"
    if not any(_raw(str(path)).program_runs.values()):
        pytest.skip(f"{name}: no GpuExecutable::ExecuteThunks spans (an older profiler)")
    assert _check_program_runs(path, _loaded(str(path), None)) > 0


def test_back_to_back_rocm_gemms_are_three_executions(corpus_dir: Path) -> None:
    path = corpus_dir / "traces" / "mi300x_jax08_gemm.xplane.pb"
    profile = _loaded(str(path), None)
    dots = profile.ops[profile.ops["module"] == "jit_dot"]
    per_program = dots.groupby("program_id", observed=True).size()
    assert len(per_program) == 6
    assert (per_program == 3).all(), per_program.to_dict()
    assert (dots["kernel_count"] == 1).all()


@pytest.mark.parametrize("folder", gpu_fixtures("gpu_transformer_nocb"))
def test_a_memset_and_gemm_split_by_other_streams_copies_is_one_execution(folder: str) -> None:
    _, profile = _fixture_trace(folder)
    gemm = profile.ops[profile.ops["op_name"] == "custom-call.0"]
    assert len(gemm) == 12
    assert (gemm["kernel_count"] == 2).all()
    scored = score(profile, shardings=describe_shardings(profile)).ops
    (row,) = [op for op in scored if op.name == "custom-call.0"]
    assert row.occurrences == 12
    assert row.efficiency is not None and row.efficiency <= 1.0

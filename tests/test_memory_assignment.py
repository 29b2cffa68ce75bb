"""profan.memory from the buffer assignments traces embed, against XLA's own figures.

Oracles: ``compiled.memory_analysis()`` recorded by ``make_fixtures.py --memory`` for every CPU
fixture program (the recompiled buffer assignment is checked against the trace's, here too), and
the ``memory_analysis`` the GPU fixtures' meta.json carries for every program.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from profan.memory import ProgramMemory, analyze_trace
from profan.memory.model import ALIASED, KINDS, MemoryReport
from profan.memory.source import decode, from_trace
from tests.conftest import FIXTURES_DIR, gpu_chip, gpu_fixtures

CPU_PROGRAMS = ("matmul", "mlp", "mlp_worse", "collectives", "transformer", "fsdp", "scan_layers")
GPU_FIXTURES = (
    *gpu_fixtures("gpu_kernels"),
    *gpu_fixtures("gpu_transformer"),
    *gpu_fixtures("gpu_transformer_nocb"),
)
TOTALS = {
    "argument_bytes": "argument_size_in_bytes",
    "output_bytes": "output_size_in_bytes",
    "alias_bytes": "alias_size_in_bytes",
    "temp_bytes": "temp_size_in_bytes",
}


@cache
def _report(name: str) -> MemoryReport:
    return analyze_trace(FIXTURES_DIR / name / "trace", use_cache=False)


def _program(name: str, module_name: str) -> ProgramMemory:
    found = [
        p
        for p in _report(name).programs
        if p.module.split("(")[0] == module_name and p.memory_space == "device"
    ]
    assert len(found) == 1, [p.module for p in found]
    return found[0]


def _oracle(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES_DIR / name / "memory_analysis.json").read_text())


@pytest.mark.parametrize("name", CPU_PROGRAMS)
def test_cpu_totals_equal_xla_memory_analysis(name: str) -> None:
    oracle = _oracle(name)
    program = _program(name, oracle["module_name"])
    for mine, theirs in TOTALS.items():
        assert getattr(program, mine) == oracle[theirs], (mine, oracle)
    # XLA's CPU peak_memory_in_bytes counts only what lives the whole program (its heap
    # simulation part is 0 on CPU): profan's peak minus the simulated heap is that figure.
    assert program.peak_bytes - program.heap_peak_bytes == oracle["peak_memory_in_bytes"]
    assert oracle["host_argument_size_in_bytes"] == 0  # nothing in host memory on these


@pytest.mark.parametrize("name", CPU_PROGRAMS)
def test_cpu_oracle_describes_the_traced_compilation(name: str) -> None:
    """The recorded memory analysis came from a recompilation whose buffer assignment (heap
    traces aside: memory_analysis() omits them) is byte-identical to the one in the trace."""
    oracle = _oracle(name)
    assert oracle["matches_trace_buffer_assignment"] is True
    (program,) = [
        p
        for p in from_trace(FIXTURES_DIR / name / "trace").programs
        if p.name == oracle["module_name"]
    ]
    proto, _ = decode(program, use_cache=False)
    assignment = proto.buffer_assignment
    assignment.ClearField("heap_simulator_traces")
    digest = hashlib.sha256(assignment.SerializeToString()).hexdigest()
    assert digest == oracle["buffer_assignment_sha256"]


def _gpu_programs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name in GPU_FIXTURES:
        meta = json.loads((FIXTURES_DIR / name / "meta.json").read_text())
        found += [(name, p) for p in meta["programs"] if p.get("memory_analysis")]
    return found


@pytest.mark.parametrize(
    ("name", "program"), _gpu_programs(), ids=lambda v: v if isinstance(v, str) else v["name"]
)
def test_gpu_totals_and_peak_equal_xla(name: str, program: dict[str, Any]) -> None:
    oracle = program["memory_analysis"]
    mine = _program(name, program["module_name"]) if "gpu_kernels" not in name else None
    if mine is None:  # several gpu_kernels programs share a module name: match by totals too
        candidates = [
            p
            for p in _report(name).programs
            if p.module.split("(")[0] == program["module_name"]
            and p.argument_bytes == oracle["argument_size_in_bytes"]
        ]
        assert candidates, program["module_name"]
        mine = candidates[0]
    for ours, theirs in TOTALS.items():
        assert getattr(mine, ours) == oracle[theirs]
    # On GPU XLA's peak_memory_in_bytes is the same simulation: equal to the byte.
    assert mine.peak_bytes == oracle["peak_memory_in_bytes"]


@pytest.mark.parametrize("name", gpu_fixtures("gpu_transformer"))
def test_gpu_transformer_donation_and_breakdown(name: str) -> None:
    program = _program(name, "jit_train_step")
    meta = json.loads((FIXTURES_DIR / name / "meta.json").read_text())
    (truth,) = [p for p in meta["programs"] if p["name"] == "train_step"]
    assert program.alias_bytes == truth["memory_analysis"]["alias_size_in_bytes"] > 0
    donated = [b for b in program.live_at_peak if b.kind == ALIASED]
    # Every weight is donated: 8 arrays of params[...] (bf16), read from JAX's argument paths.
    assert len(donated) == 8
    assert all(b.op_path and b.op_path.startswith("params[") for b in donated)
    assert program.breakdown is not None
    assert program.breakdown.parameters_bytes == program.alias_bytes
    assert program.breakdown.inputs_bytes == 4 * 1025 * 4  # tokens s32[4,1025]
    assert program.peak_instruction and program.peak_position is not None
    assert program.chip == gpu_chip(name)
    assert program.hbm_bytes == {"h100": 80e9, "h200": 141e9}[program.chip]  # chips.toml


def _all_reports(source: str, request: pytest.FixtureRequest) -> list[MemoryReport]:
    if source == "fixtures":
        return [_report(p) for p in (*CPU_PROGRAMS, *GPU_FIXTURES)]
    corpus = request.getfixturevalue("corpus_dir") / "traces"
    return [
        analyze_trace(xplane, use_cache=False)
        for xplane in sorted(corpus.glob("*.xplane.pb"))
        if not xplane.name.startswith("corrupt")
    ]


@pytest.mark.parametrize("source", ["fixtures", pytest.param("corpus", marks=pytest.mark.corpus)])
def test_invariants_over_every_program_of_every_trace(
    source: str, request: pytest.FixtureRequest
) -> None:
    """Every program of every fixture and corpus trace: the live buffers add up to the peak,
    the peak covers what lives the whole program, the heap never exceeds its allocation, the
    timeline's maximum is the peak, and the breakdown's parts add up to the peak."""
    reports = _all_reports(source, request)
    count = 0
    for report in reports:
        for program in report.programs:
            count += 1
            where = (report.path, program.module, program.memory_space)
            assert sum(b.size_bytes for b in program.live_at_peak) == program.peak_bytes, where
            whole = (
                program.argument_bytes
                + program.output_bytes
                - program.alias_bytes
                + program.constant_bytes
            )
            assert program.peak_bytes >= whole >= 0, where
            assert program.peak_bytes <= whole + program.temp_bytes, where
            assert program.fragmentation_bytes >= 0, where
            assert program.logical_temp_bytes >= program.heap_peak_bytes or not program.temp_bytes
            if program.timeline:
                heap = [p.heap_bytes for p in program.timeline]
                assert max(heap) == program.peak_bytes, where
                assert heap[program.peak_position] == program.peak_bytes, where
            sizes = [b.size_bytes for b in program.live_at_peak]
            assert sizes == sorted(sizes, reverse=True)
            assert all(b.kind in KINDS and b.size_bytes >= 0 for b in program.live_at_peak)
            if program.breakdown is not None and program.memory_space == "device":
                b = program.breakdown
                parts = (
                    b.parameters_bytes
                    + b.optimizer_state_bytes
                    + b.inputs_bytes
                    + b.outputs_bytes
                    + b.temporaries_at_peak_bytes
                    + b.other_bytes
                )
                assert parts == program.peak_bytes, where
            if program.hbm_bytes:
                assert program.headroom_bytes == program.hbm_bytes - program.peak_bytes
    assert count >= {"fixtures": 200, "corpus": 50}[source], count


@pytest.mark.corpus
def test_every_corpus_trace_has_peaks_and_top_buffers(corpus_dir: Path) -> None:
    traces = sorted(
        p for p in (corpus_dir / "traces").glob("*.xplane.pb") if "corrupt" not in p.name
    )
    assert len(traces) == 5
    for xplane in traces:
        report = analyze_trace(xplane, use_cache=False)
        device = [p for p in report.programs if p.memory_space == "device"]
        assert device, xplane
        assert all(p.peak_bytes > 0 and p.top_buffers() for p in device), xplane
        assert report.chip is not None  # TPU v6e / MI300X recognised from the device planes

"""The kernels each GPU op ran (``Profile.kernels``, JSON ``ops[].kernels``), checked against
the raw kernel events read here with protobuf alone (``fixtures/inspect_xplane.py``), never
with profan's reader.

* per device, every (program, op, kernel name) outside command buffers: profan's count and
  summed time are the raw events', exactly (to the picosecond);
* kernels inside command buffers (``command_buffer_N``, CUDA graphs) are attributed to
  instructions by ``profan.trace.command_buffers`` (tested in test_trace_command_buffers.py):
  per device and program, each kernel name's count and time over all ops are the raw ones, and
  an op's entry for it is never less than its own launches;
* the report: each op's kernels, summed over devices, add up to its executions' kernel count
  and its measured time; where no graph kernel is involved they are the raw ones, name by name.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import profan
from profan.report.analysis.kernels import launch_of, tile_of
from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.render.ops_table import ops_csv
from tests.conftest import FIXTURES_DIR, gpu_fixtures
from tests.raw_xplane import raw_kernels

FIXTURE_FOLDERS = [
    folder
    for group in ("gpu_kernels", "gpu_transformer_nocb", "gpu_transformer")
    for folder in gpu_fixtures(group)
]
CORPUS_TRACES = ["mi300x_jax08_gemm", "mi300x_jax08_attention"]
COMMAND_BUFFER = re.compile(r"^command_buffer_\d+$")

Key = tuple[int, int, str, str]  # device, program, op, kernel name
Totals = dict[Any, list[int]]  # key -> [count, picoseconds]


@cache
def _raw(path: str) -> tuple[Totals, Totals, dict[tuple[int, str, str], set[str]]]:
    """Raw kernels with an hlo_op: outside command buffers by (device, program, op, kernel),
    inside by (device, program, kernel); and the kernel_details stats each (program, op,
    kernel) had."""
    plain: Totals = defaultdict(lambda: [0, 0])
    graph: Totals = defaultdict(lambda: [0, 0])
    details: dict[tuple[int, str, str], set[str]] = defaultdict(set)
    for event in raw_kernels(path).kernels:
        op, kernel, stats = event.stats["hlo_op"], event.name, event.stats
        program = int(stats["program_id"])
        found = (
            graph[(event.device, program, kernel)]
            if COMMAND_BUFFER.match(op)
            else plain[(event.device, program, op, kernel)]
        )
        found[0] += 1
        found[1] += event.duration_ps
        if "kernel_details" in stats:
            details[(program, op, kernel)].add(stats["kernel_details"])
    return dict(plain), dict(graph), details


def _trace(folder: str) -> tuple[str, str | None]:
    [path] = (FIXTURES_DIR / folder / "trace").rglob("*.xplane.pb")
    _, hlo = resolve_layout(FIXTURES_DIR / folder, None)
    return str(path), str(hlo) if hlo is not None else None


def _paths(corpus: Path | None, name: str) -> tuple[str, str | None]:
    if corpus is None:
        return _trace(name)
    return str(corpus / "traces" / f"{name}.xplane.pb"), None


@cache
def _profile(path: str, hlo: str | None) -> profan.Profile:
    return profan.load(path, hlo=hlo)


def _profile_totals(profile: profan.Profile) -> Totals:
    assert profile.kernels is not None, "a GPU profile lists its kernels"
    found: Totals = defaultdict(lambda: [0, 0])
    table = profile.kernels
    for device, program, op, kernel, count, time_s in zip(
        table["device"], table["program_id"], table["op_name"], table["kernel"],
        table["count"], table["time_s"], strict=True,
    ):  # fmt: skip
        entry = found[(int(device), int(program), str(op), str(kernel))]
        entry[0] += int(count)
        entry[1] += round(float(time_s) * 1e12)
    return dict(found)


def _check_profile(path: str, hlo: str | None) -> None:
    plain, graph, _ = _raw(path)
    found = _profile_totals(_profile(path, hlo))
    graph_names = {(d, p, k) for d, p, k in graph}
    # outside command buffers: exactly the raw events, op by op
    for key, (count, picoseconds) in plain.items():
        device, program, _, kernel = key
        have = found.get(key, [0, 0])
        if (device, program, kernel) in graph_names:
            assert have[0] >= count and have[1] >= picoseconds, key
        else:
            assert have == [count, picoseconds], key
    # every kernel is somewhere, once: per (device, program, kernel) the raw totals
    by_name: Totals = defaultdict(lambda: [0, 0])
    for (device, program, _, kernel), (count, picoseconds) in found.items():
        by_name[(device, program, kernel)][0] += count
        by_name[(device, program, kernel)][1] += picoseconds
    expected: Totals = defaultdict(lambda: [0, 0])
    for (device, program, _, kernel), (count, picoseconds) in plain.items():
        expected[(device, program, kernel)][0] += count
        expected[(device, program, kernel)][1] += picoseconds
    for key, (count, picoseconds) in graph.items():
        expected[key][0] += count
        expected[key][1] += picoseconds
    assert dict(by_name) == dict(expected)


@pytest.mark.parametrize("folder", FIXTURE_FOLDERS)
def test_fixture_kernels_per_device_are_the_raw_events(folder: str) -> None:
    _check_profile(*_paths(None, folder))


@pytest.mark.parametrize("name", CORPUS_TRACES)
def test_corpus_kernels_per_device_are_the_raw_events(corpus_dir: Path, name: str) -> None:
    _check_profile(*_paths(corpus_dir, name))


def _check_report(path: str, hlo: str | None) -> int:
    """Each op's kernels against its executions and the raw events; the ops checked."""
    plain, graph, details = _raw(path)
    profile = _profile(path, hlo)
    report = report_for(path, hlo=hlo, use_cache=False)
    executions: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for module_key, op, count in zip(
        profile.ops["module_key"], profile.ops["op_name"], profile.ops["kernel_count"], strict=True
    ):
        executions[(str(module_key), str(op))][0] += int(count)
    in_graph = {(p, k) for _, p, k in graph}
    raw_by_op: dict[tuple[int, str], dict[str, list[int]]] = defaultdict(
        lambda: defaultdict(lambda: [0, 0])
    )
    for (_, program, op, kernel), (count, picoseconds) in plain.items():
        raw_by_op[(program, op)][kernel][0] += count
        raw_by_op[(program, op)][kernel][1] += picoseconds
    programs = {
        str(k): int(p)
        for k, p in zip(profile.kernels["module_key"], profile.kernels["program_id"], strict=True)
    }
    checked = 0
    for op in report.ops:
        assert op.kernels is not None, op.label
        assert sum(k["count"] for k in op.kernels) == executions[(str(op.program), op.name)][0]
        assert sum(k["time_s"] for k in op.kernels) == pytest.approx(op.measured_s, rel=1e-9)
        times = [k["time_s"] for k in op.kernels]
        assert times == sorted(times, reverse=True), "heaviest first"
        program = programs.get(str(op.program))
        raw = raw_by_op.get((program, op.name)) if program is not None else None
        if raw is None or any((program, name) in in_graph for name in raw):
            continue
        assert {k["name"]: k["count"] for k in op.kernels} == {n: c for n, (c, _) in raw.items()}
        for kernel in op.kernels:
            assert round(kernel["time_s"] * 1e12) == raw[kernel["name"]][1]
            known = details.get((program, op.name, kernel["name"]), set())
            assert kernel["launch_configs"] == len(known)
            if len(known) == 1:
                assert kernel["launch"] == launch_of(next(iter(known)))
        checked += 1
    return checked


@pytest.mark.parametrize(
    "folder", [f for g in ("gpu_kernels", "gpu_transformer_nocb") for f in gpu_fixtures(g)]
)
def test_fixture_report_lists_each_ops_kernels(folder: str) -> None:
    assert _check_report(*_paths(None, folder)) > 10


def test_corpus_report_lists_each_ops_kernels(corpus_dir: Path) -> None:
    assert _check_report(*_paths(corpus_dir, "mi300x_jax08_gemm")) > 3


def test_csv_carries_each_ops_kernels_as_compact_text(corpus_dir: Path) -> None:
    path = str(corpus_dir / "traces" / "mi300x_jax08_gemm.xplane.pb")
    report = report_for(path, use_cache=False)
    rows = list(csv.DictReader(io.StringIO(ops_csv(report))))
    assert [row["name"] for row in rows] == [op.name for op in report.ops]
    for row, op in zip(rows, report.ops, strict=True):
        expected = "; ".join(f"{k['name']}×{k['count']}" for k in op.kernels or [])
        assert row["kernel_summary"] == expected, op.label
    assert any(row["kernel_summary"].startswith("Cijk_") for row in rows)


def test_launch_details_are_the_stat_key_by_key() -> None:
    nvidia = (
        "regs:168 static_shared:0 dynamic_shared:213188 grid:2,66,1 block:384,1,1 occ_pct:18.75"
    )
    assert launch_of(nvidia) == {
        "regs": 168,
        "static_shared": 0,
        "dynamic_shared": 213188,
        "grid": [2, 66, 1],
        "block": [384, 1, 1],
        "occ_pct": 18.75,
    }
    rocm = " grid:8,32,1 block:256,1,1 private_mem:0 group_mem:12800 occ_pct:0"
    assert launch_of(rocm)["group_mem"] == 12800


def test_tiles_read_only_where_the_convention_is_documented() -> None:
    tensile = "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB1_APM1"
    assert tile_of(tensile) == {"text": "MT256x224x64", "m": 256, "n": 224, "k": 64}
    xmma = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1"
    assert tile_of(xmma) == {"text": "tilesize128x128x32", "m": 128, "n": 128, "k": 32}
    cutlass = "void cutlass::Kernel2<cutlass_80_tensorop_c1688gemm_64x64_16x4_nn_align1>(x)"
    assert tile_of(cutlass) == {"text": "64x64_16x4", "m": 64, "n": 64, "k": 16, "stages": 4}
    assert tile_of("nvjet_sm90_tst_176x128_64x5_1x2_h_bz_TNN") == {
        "text": "176x128_64x5",
        "as_named": True,
    }
    assert tile_of("loop_add_fusion_5") is None
    assert tile_of("cudnn_generated_fort_native_sdpa_sm90_knob_7_64x128x128_4x1x1") is None

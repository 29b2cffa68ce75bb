"""The committed CPU traces hold what the loaders rely on, read with protobuf only (no profan).

Uses fixtures/inspect_xplane.py, which declares the XSpace schema itself. The checks join the
trace against the fixture's own HLO dump and meta.json, so they fail if a regeneration produced
a trace of a different program, lost the step annotations or the HLO protos.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.raw_xplane import inspect_xplane

PROGRAMS = ("matmul", "mlp", "mlp_worse", "collectives", "transformer", "fsdp", "scan_layers")
OP_STATS = {"hlo_op", "hlo_module", "program_id", "device_ordinal", "run_id"}


@pytest.fixture(scope="module")
def inspector() -> ModuleType:
    return inspect_xplane()


def _events(plane: Any, ix: ModuleType) -> list[tuple[str, str, dict[str, Any]]]:
    """(line name, event name, stats by name) with ref_value stats resolved to their string."""
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    out = []
    for line in plane.lines:
        for event in line.events:
            stats = {}
            for stat in event.stats:
                if stat.WhichOneof("value") == "ref_value":
                    stats[names[stat.metadata_id]] = names[stat.ref_value]
                else:
                    stats[names[stat.metadata_id]] = ix.stat_value(stat)
            out.append((line.name, plane.event_metadata[event.metadata_id].name, stats))
    return out


@pytest.fixture(params=PROGRAMS)
def traced(
    request: pytest.FixtureRequest, fixtures_dir: Path, inspector: ModuleType
) -> dict[str, Any]:
    folder = fixtures_dir / request.param
    meta = json.loads((folder / "meta.json").read_text())
    (xplane,) = (folder / "trace").rglob("*.xplane.pb")
    space = inspector.read_xspace(str(xplane))
    planes = {p.name: p for p in space.planes}
    return {"meta": meta, "folder": folder, "planes": planes, "ix": inspector}


def test_planes_present(traced: dict[str, Any]) -> None:
    assert {"/host:CPU", "/host:metadata"} <= set(traced["planes"])


def test_op_events_carry_the_join_stats(traced: dict[str, Any]) -> None:
    meta = traced["meta"]
    events = _events(traced["planes"]["/host:CPU"], traced["ix"])
    ops = [e for e in events if "hlo_op" in e[2]]
    assert ops
    for line, name, stats in ops:
        assert set(stats) >= OP_STATS, (line, name, stats)
        assert line.startswith(("tf_XLAPjRtCpuClient/", "tf_XLAEigen/")), line
        assert stats["hlo_module"] == meta["module_name"]
        assert name == stats["hlo_op"]
    # One run_id per traced step; every device of the mesh (or the single one) took part.
    assert len({s["run_id"] for _, _, s in ops}) == meta["trace"]["steps"]
    devices = 1 if meta["mesh"] is None else meta["device_count"]
    assert {s["device_ordinal"] for _, _, s in ops} == set(range(devices))
    # Each (run, device) ran the same ops; a thread line is not a device: the devices move
    # between worker threads, so only (run_id, device_ordinal) identifies one execution.
    per_execution: dict[tuple[int, int], list[str]] = defaultdict(list)
    lines_of_device: dict[int, set[str]] = defaultdict(set)
    for line, _, s in ops:
        per_execution[(s["run_id"], s["device_ordinal"])].append(s["hlo_op"])
        lines_of_device[s["device_ordinal"]].add(line)
    assert len({tuple(sorted(v)) for v in per_execution.values()}) == 1
    if devices > 1:
        assert max(len(v) for v in lines_of_device.values()) > 1


def test_every_traced_op_is_an_instruction_of_the_dump(traced: dict[str, Any]) -> None:
    meta, folder = traced["meta"], traced["folder"]
    text = (folder / meta["hlo_files"][0]["file"]).read_text()
    defined = set(re.findall(r"^\s+(?:ROOT )?%?([\w.\-]+) = ", text, re.M))
    events = _events(traced["planes"]["/host:CPU"], traced["ix"])
    op_names = {s["hlo_op"] for _, _, s in events if "hlo_op" in s}
    assert op_names <= defined, sorted(op_names - defined)


def test_metadata_plane_holds_the_hlo_proto_of_the_program(traced: dict[str, Any]) -> None:
    meta, ix = traced["meta"], traced["ix"]
    plane = traced["planes"]["/host:metadata"]
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    protos = {}
    for entry in plane.event_metadata.values():
        stats = {names[s.metadata_id]: ix.stat_value(s) for s in entry.stats}
        if "Hlo Proto" in stats:
            protos[stats["program_id"]] = (entry.name, stats["Hlo Proto"])
    events = _events(traced["planes"]["/host:CPU"], ix)
    (program_id,) = {s["program_id"] for _, _, s in events if "hlo_op" in s}
    name, proto = protos[program_id]
    assert name == f"{meta['module_name']}({program_id})"
    assert meta["module_name"].encode() in proto and len(proto) > 200


def test_step_annotations_match_meta(traced: dict[str, Any]) -> None:
    meta = traced["meta"]
    events = _events(traced["planes"]["/host:CPU"], traced["ix"])
    steps = sorted(s["step_num"] for _, _, s in events if "step_num" in s)
    if meta["trace"]["step_trace_annotation"]:
        assert steps == list(range(meta["trace"]["steps"]))
        names = {n for _, n, s in events if "step_num" in s}
        assert names == {meta["trace"]["step_annotation_name"]}
    else:
        assert steps == []


def test_meta_observed_counts_match_the_committed_trace(traced: dict[str, Any]) -> None:
    meta = traced["meta"]
    observed = meta["trace"]["observed"]
    events = _events(traced["planes"]["/host:CPU"], traced["ix"])
    ops = [s for _, _, s in events if "hlo_op" in s]
    assert observed["op_events"] == len(ops)
    devices = len(observed["device_ordinals"])
    assert observed["executions"] == observed["run_ids"] * devices
    (per_execution,) = observed["op_events_per_execution"]
    assert observed["op_events"] == observed["executions"] * per_execution
    assert observed["run_ids"] == meta["trace"]["steps"]
    durations = [
        e.duration_ps
        for line in traced["planes"]["/host:CPU"].lines
        for e in line.events
        if any(
            traced["planes"]["/host:CPU"].stat_metadata[s.metadata_id].name == "hlo_op"
            for s in e.stats
        )
    ]
    assert observed["op_duration_ps_total"] == sum(durations)

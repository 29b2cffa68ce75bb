"""infer_mesh on small synthetic modules: corner cases the fixtures do not reach."""

from __future__ import annotations

import json

from profan.hlo.parser import parse_module
from profan.sharding import describe, infer_mesh


def synthetic_module(*collectives: str, num_partitions: int = 8) -> str:
    # Collectives over global device ids, as SPMD-partitioned modules print them.
    collectives = tuple(
        f"{c}, channel_id={i + 1}"
        + (", use_global_device_ids=true" if "replica_groups" in c else "")
        for i, c in enumerate(collectives)
    )
    body = "\n".join(
        f"  %c{i} = f32[8]{{0}} {c}, to_apply=%add"
        if "all-reduce" in c
        else f"  %c{i} = f32[8]{{0}} {c}"
        for i, c in enumerate(collectives)
    )
    return f"""HloModule synthetic_collectives, num_partitions={num_partitions}

%add (x: f32[], y: f32[]) -> f32[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(%x, %y)
}}

ENTRY %main (p: f32[8]) -> f32[8] {{
  %p = f32[8]{{0}} parameter(0)
{body}
  ROOT %r = f32[8]{{0}} copy(%p)
}}
"""


def _mesh(*collectives: str, num_partitions: int = 8):
    return infer_mesh(parse_module(synthetic_module(*collectives, num_partitions=num_partitions)))


def test_three_axes_from_three_strides() -> None:
    mesh = _mesh(
        "all-reduce(%p), replica_groups=[4,2]<=[8]",
        "all-reduce(%p), replica_groups=[4,2]<=[4,2]T(1,0)",
        "all-reduce(%p), replica_groups=[4,2]<=[2,4]T(1,0)",
    )
    assert [(a.size, a.stride) for a in mesh.axes] == [(2, 4), (2, 2), (2, 1)]
    axes = [c.axes for c in mesh.collectives]
    assert axes == [["axis2"], ["axis1"], ["axis0"]]


def test_group_over_two_axes_and_permute() -> None:
    mesh = _mesh(
        "all-reduce(%p), replica_groups={{0,1},{2,3},{4,5},{6,7}}",
        "all-reduce(%p), replica_groups={{0,1,2,3,4,5,6,7}}",
        "collective-permute(%p), source_target_pairs={{0,2},{2,4},{4,6},{6,0}}",
    )
    assert mesh.shape == {"axis0": 4, "axis1": 2}
    assert mesh.collectives[1].axes == ["axis0", "axis1"]
    assert mesh.collectives[2].axes == ["axis0"]


def test_device_in_two_groups_is_reported_not_raised() -> None:
    mesh = _mesh(
        "all-reduce(%p), replica_groups={{0,1,2,3},{3,4,5,6}}",
        "all-reduce(%p), replica_groups={{0,1,2},{3,4,5,6,7}}",
        "all-reduce(%p), replica_groups={{0,2,4,6},{1,3,5,7}}",
    )
    first, second, good = mesh.collectives
    assert first.axes is None and "device 3 is in group 0 and group 1" in first.reason
    assert second.axes is None and "unequal sizes" in second.reason
    assert good.axes == ["axis0"]
    json.dumps(mesh.to_dict())


def test_undecodable_groups_are_reported() -> None:
    mesh = _mesh(
        "all-reduce(%p), replica_groups=[2,2]<=[16]",
        num_partitions=4,
    )
    (collective,) = mesh.collectives
    assert collective.axes is None and "do not decode" in collective.reason


def test_non_iota_device_order_found_from_the_groups() -> None:
    # Devices paired as {0,3},{1,2} (e.g. a physical ring order): no iota mesh has these groups.
    mesh = _mesh(
        "all-reduce(%p), replica_groups={{0,3},{1,2}}",
        num_partitions=4,
    )
    (collective,) = mesh.collectives
    assert collective.axes is not None, collective.reason
    assert mesh.order_source != "iota"
    assert any("device order" in a for a in mesh.alternatives)


def test_alternatives_are_stated() -> None:
    mesh = _mesh(
        "all-reduce(%p), replica_groups=[2,4]<=[8]",
    )
    # Groups of 4 could also be a 2×2 sub-mesh: the simplest mesh keeps size 4 whole, and says so.
    assert mesh.shape == {"axis0": 2, "axis1": 4}
    assert any("could be split further" in a for a in mesh.alternatives)


def test_single_device_module_has_no_axes() -> None:
    text = """HloModule synthetic_single, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

ENTRY %main (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4]{0} parameter(0)
}
"""
    report = describe(parse_module(text))
    assert report.mesh.axes == [] and report.collectives == [] and report.matmuls == []


def test_pipeline_chain_and_ring_are_told_apart() -> None:
    module = parse_module(
        synthetic_module(
            # Stage i sends to stage i+1 along the stride-2 axis; the last stage sends nowhere.
            "collective-permute(%p), source_target_pairs={{0,2},{2,4},{4,6},{1,3},{3,5},{5,7}}",
            "collective-permute(%p), "
            "source_target_pairs={{0,1},{1,0},{2,3},{3,2},{4,5},{5,4},{6,7},{7,6}}",
        )
    )
    report = describe(module)
    chain, ring = report.collectives
    assert chain.axes == ["axis0"] and ring.axes == ["axis1"]
    labels = {(s.strategy, tuple(s.axes)) for s in report.strategies}
    assert ("pipeline", ("axis0",)) in labels
    assert ("ring / pipeline (possible)", ("axis1",)) in labels

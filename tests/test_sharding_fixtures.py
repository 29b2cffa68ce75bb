"""infer_mesh / describe against the truth the fixture script recorded for each JAX program."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import pytest

from profan.hlo.devices import decode_replica_groups, decode_source_target_pairs
from profan.hlo.model import Module
from profan.hlo.parser import parse_module
from profan.sharding import describe, program_mesh
from tests.conftest import FIXTURES_DIR

# The CPU programs' fixtures: one program each, with its truth (the GPU groups hold several
# programs and have tests of their own).
NAMES = sorted(
    p.parent.name
    for p in FIXTURES_DIR.glob("*/meta.json")
    if "programs" not in json.loads(p.read_text())
)


def _load(name: str):
    meta = json.loads((FIXTURES_DIR / name / "meta.json").read_text())
    path = next((FIXTURES_DIR / name / "hlo").glob("*after_optimizations.txt"))
    return meta, parse_module(path.read_text(), file=str(path))


def _before(name: str, meta: dict) -> Module:
    """The module JAX handed to XLA (the dump before optimisations), listed in meta.json."""
    (entry,) = [e for e in meta["hlo_files"] if e["file"].endswith("before_optimizations.txt")]
    path = FIXTURES_DIR / name / entry["file"]
    return parse_module(path.read_text(), file=str(path))


def _truth_groups(meta: dict, axes: tuple[str, ...]) -> set[frozenset[int]]:
    """Groups of the recorded mesh along ``axes``, computed from its device_ids array."""
    names = meta["mesh"]["axis_names"]
    sizes = meta["mesh"]["axis_sizes"]
    flat = list(_flatten(meta["mesh"]["device_ids"]))
    groups: dict[tuple[int, ...], set[int]] = {}
    for position, device in enumerate(flat):
        coords = []
        rest = position
        for size in reversed(sizes):
            coords.append(rest % size)
            rest //= size
        coords.reverse()
        key = tuple(c for name, c in zip(names, coords, strict=True) if name not in axes)
        groups.setdefault(key, set()).add(device)
    return {frozenset(g) for g in groups.values()}


def _flatten(nested):
    for item in nested:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def _truth_axes_of(meta: dict, groups: list[list[int]]) -> tuple[str, ...] | None:
    wanted = {frozenset(g) for g in groups}
    names = meta["mesh"]["axis_names"]
    for count in range(len(names) + 1):
        for subset in itertools.combinations(names, count):
            if _truth_groups(meta, subset) == wanted:
                return subset
    return None


def _axis_map(meta: dict, report) -> dict[str, str]:
    """Map each inferred axis to the recorded axis with the same device groups."""
    mapping = {}
    for axis in report.mesh.axes:
        ours = {frozenset(g) for g in report.mesh.groups_along([axis.name])}
        for name in meta["mesh"]["axis_names"]:
            if _truth_groups(meta, (name,)) == ours:
                mapping[axis.name] = name
    return mapping


@pytest.mark.parametrize("name", NAMES)
def test_mesh_axis_sizes_match(name: str) -> None:
    meta, module = _load(name)
    report = describe(module)
    sizes = [a.size for a in report.mesh.axes if a.size > 1]
    if meta["mesh"] is None:
        assert sizes == []
        return
    assert sizes == [s for s in meta["mesh"]["axis_sizes"] if s > 1]
    mapping = _axis_map(meta, report)
    assert sorted(mapping.values()) == sorted(meta["mesh"]["axis_names"])


@pytest.mark.parametrize("name", NAMES)
def test_collective_axes_match(name: str) -> None:
    meta, module = _load(name)
    report = describe(module)
    if meta["mesh"] is None:
        assert report.collectives == []
        return
    mapping = _axis_map(meta, report)
    by_name = {c.name: c for c in report.collectives}
    recorded = meta["hlo_collectives"]
    assert {c["name"] for c in recorded} == set(by_name)
    for entry in recorded:
        ours = by_name[entry["name"]]
        assert ours.axes is not None, ours.reason
        text = entry["groups"].split("=", 1)[1]
        if entry["groups"].startswith("source_target_pairs"):
            pairs = decode_source_target_pairs(text)
            # The truth: the recorded axes along which each pair's devices differ.
            expected = set()
            for source, target in pairs:
                for axis in meta["mesh"]["axis_names"]:
                    if any(source in g and target in g for g in _truth_groups(meta, (axis,))):
                        expected.add(axis)
            assert {mapping[a] for a in ours.axes} == expected
        else:
            groups = decode_replica_groups(text, num_devices=meta["device_count"])
            expected_axes = _truth_axes_of(meta, groups)
            assert expected_axes is not None
            assert {mapping[a] for a in ours.axes} == set(expected_axes)
    # Every collective the program asked for is found with its axes.
    found = Counter(
        (c.kind, frozenset(mapping[a] for a in c.axes or ())) for c in report.collectives
    )
    for truth in meta["truth"]["collectives"]:
        assert found[(truth["kind"], frozenset(truth["axes"]))] > 0, truth


def _truth_key(matmul: dict) -> tuple:
    flops = 2 * math.prod(matmul["dim_sizes"].values())
    operands = sorted([math.prod(matmul["lhs_shape"]), math.prod(matmul["rhs_shape"])])
    axes = frozenset(a for axes in matmul["split"].values() for a in axes)
    return (tuple(operands), math.prod(matmul["out_shape"]), flops, axes,
            frozenset(matmul["partial_sum_axes"]))  # fmt: skip


def _our_key(matmul, mapping: dict[str, str]) -> tuple:
    operands = sorted([math.prod(matmul.global_lhs), math.prod(matmul.global_rhs)])
    axes = frozenset(
        mapping.get(a, a)
        for split in (matmul.lhs_split, matmul.rhs_split, matmul.out_split)
        for axes in split.values()
        for a in axes
    )
    partial = frozenset(mapping.get(a, a) for a in matmul.partial_sum_axes)
    return (tuple(operands), math.prod(matmul.global_out), matmul.global_flops, axes, partial)


@pytest.mark.parametrize("name", NAMES)
def test_matmul_global_shapes_match(name: str) -> None:
    """Every matmul's global operand/result sizes, FLOPs, split axes and summed axes match."""
    meta, module = _load(name)
    report = describe(module)
    mapping = _axis_map(meta, report) if meta["mesh"] else {}
    ours = Counter(_our_key(m, mapping) for m in report.matmuls)
    truth = Counter(_truth_key(m) for m in meta["truth"]["matmuls"])
    assert ours == truth


@pytest.mark.parametrize("name", [n for n in NAMES if n in ("mlp", "transformer")])
def test_strategy_labels(name: str) -> None:
    meta, module = _load(name)
    report = describe(module)
    mapping = _axis_map(meta, report)
    labels = {(s.strategy, tuple(mapping[a] for a in s.axes)) for s in report.strategies}
    assert ("data parallel", ("data",)) in labels
    assert ("tensor parallel (column split)", ("model",)) in labels
    assert ("tensor parallel (row split)", ("model",)) in labels
    assert all(s.evidence for s in report.strategies)
    # Nothing claims the batch axis is a tensor-parallel axis or vice versa.
    assert ("data parallel", ("model",)) not in labels
    assert not any(s.startswith("tensor") and axes == ("data",) for s, axes in labels)
    json.dumps(report.to_dict())


def test_transformer_matmuls_carry_their_scope() -> None:
    """Each matmul's named scope (layer, attention/MLP block) matches the recorded one."""
    meta, module = _load("transformer")
    report = describe(module)
    mapping = _axis_map(meta, report)
    ours = Counter(
        (_our_key(m, mapping)[:3], "/".join((m.scope or "").split("/")[1:])) for m in report.matmuls
    )
    truth = Counter((_truth_key(m)[:3], m["scope"]) for m in meta["truth"]["matmuls"])
    assert ours == truth


# --- the program's own axis names --------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_module_before_optimizations_names_the_recorded_mesh(name: str) -> None:
    """JAX writes the mesh into the module it hands XLA: names, sizes and device order are the
    ones the generator recorded from the jax Mesh."""
    meta, _ = _load(name)
    program = program_mesh(_before(name, meta))
    if meta["mesh"] is None:
        assert program is None
        return
    assert program is not None
    assert list(program.spec.axis_names) == meta["mesh"]["axis_names"]
    assert list(program.spec.axis_sizes) == meta["mesh"]["axis_sizes"]
    assert list(program.spec.device_ids) == list(_flatten(meta["mesh"]["device_ids"]))
    assert "xla.sdy.meshes" in program.source


@pytest.mark.parametrize("name", [n for n in NAMES if n != "matmul"])
def test_optimized_module_alone_has_generic_names(name: str) -> None:
    """The optimised module carries no names of the program's: XLA's mesh forms use made-up
    ``axis_N`` names, which are not taken for the program's."""
    meta, module = _load(name)
    assert program_mesh(module) is None
    report = describe(module)
    assert report.mesh.names_from is None
    assert [a.name for a in report.mesh.axes] == [f"axis{i}" for i in range(len(report.mesh.axes))]
    assert not set(report.mesh.shape) & set(meta["mesh"]["axis_names"])


def test_xla_prints_generated_mesh_names_in_some_optimized_dumps() -> None:
    """The case the previous test guards: these dumps do print mesh-form groups, with axis_N."""
    for name in ("fsdp", "transformer", "mlp_worse"):
        text = next((FIXTURES_DIR / name / "hlo").glob("*after_optimizations.txt")).read_text()
        assert "replica_groups=mesh['axis_0'=" in text, name


@pytest.mark.parametrize("name", [n for n in NAMES if n != "matmul"])
def test_collective_axes_carry_the_programs_names(name: str) -> None:
    """With the program's mesh, every collective's axes are the recorded mesh's own names: the
    axes along which its groups vary, computed from meta.json's device ids (no mapping)."""
    meta, module = _load(name)
    report = describe(module, program_mesh(_before(name, meta)))
    sizes = dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))
    assert report.mesh.shape == {a: s for a, s in sizes.items() if s > 1}
    assert report.mesh.names_from is not None
    by_name = {c.name: c for c in report.collectives}
    for entry in meta["hlo_collectives"]:
        ours = by_name[entry["name"]]
        assert ours.axes is not None, ours.reason
        text = entry["groups"].split("=", 1)[1]
        if entry["groups"].startswith("source_target_pairs"):
            continue  # pairs: checked through the truth collectives below
        groups = decode_replica_groups(text, num_devices=meta["device_count"])
        assert set(ours.axes) == set(_truth_axes_of(meta, groups)), entry["name"]
    found = Counter((c.kind, frozenset(c.axes or ())) for c in report.collectives)
    for truth in meta["truth"]["collectives"]:
        assert found[(truth["kind"], frozenset(truth["axes"]))] > 0, truth
    # Matmul splits and strategies read the same names.
    split_axes = {a for m in report.matmuls for axes in m.lhs_split.values() for a in axes}
    assert split_axes <= set(sizes)
    assert {a for s in report.strategies for a in s.axes} <= set(sizes)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "matmul"])
def test_the_module_before_optimizations_is_described_with_its_names(name: str) -> None:
    """Described on its own, the module JAX handed XLA (shardings, no collectives yet) names
    its axes; each named axis's device groups are the recorded mesh's along that name."""
    meta, _ = _load(name)
    report = describe(_before(name, meta))
    assert report.mesh.names_from is not None
    for axis in report.mesh.axes:
        ours = {frozenset(g) for g in report.mesh.groups_along([axis.name])}
        assert ours == _truth_groups(meta, (axis.name,)), axis

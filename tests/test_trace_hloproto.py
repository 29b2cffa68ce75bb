"""Embedded HloProto -> profan's model, checked against XLA's own text of the same modules.

The TPU corpus trace comes with its modules printed by XLA (``tpu_v6e_inference.hlo/``); every
CPU fixture has XLA's dump of its main module next to the trace.  Both are parsed with
``profan.hlo`` and compared instruction by instruction with the modules decoded from the trace.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profan.hlo import parse_file
from profan.hlo.devices import decode_replica_groups
from profan.hlo.model import Module
from profan.hlo.views import backend_config
from profan.trace.hloproto import module_from_proto_bytes, shape_text
from profan.trace.xplane import read_host

FIXTURES = ("matmul", "mlp", "mlp_worse", "collectives", "transformer")
# Header attributes that live in XLA's module config, not in the HloModuleProto.
CONFIG_ONLY = {
    "allow_spmd_sharding_propagation_to_output",
    "allow_spmd_sharding_propagation_to_parameters",
}


def _normalise(value: str | None) -> str | None:
    """Text differences that are not differences: '%' name prefixes and /*index=N*/ comments."""
    if value is None:
        return None
    value = re.sub(r"/\*index=\d+\*/", "", value)
    return re.sub(r"%(?=[\w.-])", "", value)


def _compare(ours: Module, xla: Module, skip: set[str] = frozenset()) -> int:
    """Assert the modules agree; return the number of instructions compared."""
    assert ours.name == xla.name
    assert {c.name for c in ours.computations} == {c.name for c in xla.computations}
    assert ours.entry.name == xla.entry.name
    for key in set(xla.attributes) - CONFIG_ONLY:
        assert _normalise(ours.attributes.get(key)) == _normalise(xla.attributes[key]), key
    compared = 0
    for computation in xla.computations:
        mine = ours.computation(computation.name)
        assert [i.name for i in mine.instructions] == [i.name for i in computation.instructions]
        assert mine.execution_thread == computation.execution_thread
        for a, b in zip(mine.instructions, computation.instructions, strict=True):
            assert (a.opcode, a.shape, a.is_root, a.parameter_number, a.literal) == (
                b.opcode,
                b.shape,
                b.is_root,
                b.parameter_number,
                b.literal,
            ), a.name
            assert a.operand_names == [n.lstrip("%") for n in b.operand_names], a.name
            keys = (set(a.attributes) | set(b.attributes)) - skip
            for key in keys:
                assert _normalise(a.attributes.get(key)) == _normalise(b.attributes.get(key)), (
                    a.name,
                    key,
                )
            compared += 1
    return compared


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_modules_match_xla_dump(fixtures_dir: Path, name: str) -> None:
    xplane = next((fixtures_dir / name / "trace").rglob("*.xplane.pb"))
    host = read_host(str(xplane), "vm")
    dump = parse_file(next((fixtures_dir / name / "hlo").glob("*after_optimizations.txt")))
    candidates = [
        module_from_proto_bytes(data, where=str(xplane))
        for module_name, data in host.hlo_protos.values()
        if module_name == dump.name
    ]
    same = [
        m
        for m in candidates
        if {c.name for c in m.computations} == {c.name for c in dump.computations}
    ]
    assert same, f"no embedded module matches the dump of {dump.name}"
    assert _compare(same[0], dump) == sum(len(c) for c in dump.computations)
    # The one decoder of backend configs (profan.hlo.views) reads the embedded module's configs
    # as it reads XLA's text: the same JSON objects, instruction by instruction.
    decoded = {i.name: backend_config(i) for i in same[0].instructions() if i.backend_config}
    assert decoded == {i.name: backend_config(i) for i in dump.instructions() if i.backend_config}
    if name in ("mlp", "mlp_worse", "transformer"):  # their CPU fusions carry JSON configs
        assert any(isinstance(config, dict) for config in decoded.values())


def test_tpu_modules_match_xla_text(corpus_dir: Path) -> None:
    host = read_host(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"), "tpu")
    texts = {
        m.name: m
        for m in (
            parse_file(p) for p in (corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*.hlo")
        )
    }
    assert len(host.hlo_protos) == len(texts) == 4
    for program_id, (name, data) in host.hlo_protos.items():
        ours = module_from_proto_bytes(data, where=name)
        xla = texts[name]
        # The reference text was printed from a proto round trip that lost the iota replica
        # groups of the all-reduce (it prints replica_groups={}): compared separately below.
        _compare(ours, xla, skip={"replica_groups", "metadata"})
        assert f"({program_id})" in next(
            p.name for p in (corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob(f"{name}(*")
        )


def test_tpu_all_reduce_groups_agree_with_parameter_sharding(corpus_dir: Path) -> None:
    host = read_host(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"), "tpu")
    name, data = next(v for v in host.hlo_protos.values() if v[0] == "jit__psum")
    module = module_from_proto_bytes(data, where=name)
    all_reduce = module.entry.get("all-reduce")
    param = module.entry.get("param")
    # devices=[2,1,1,1,1,4]<=[8]: dim 0 split over devices {0..3} vs {4..7}; summing over it
    # pairs device d with d+4.
    assert param.attributes["sharding"] == "{devices=[2,1,1,1,1,4]<=[8] last_tile_dim_replicate}"
    groups = decode_replica_groups(all_reduce.attributes["replica_groups"])
    assert sorted(map(sorted, groups)) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert module.num_partitions == 8


def test_layouts_tiles_memory_spaces_and_metadata(corpus_dir: Path) -> None:
    host = read_host(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"), "tpu")
    name, data = next(v for v in host.hlo_protos.values() if v[0] == "jit_f")
    module = module_from_proto_bytes(data, where=name)
    copy_start = module.entry.get("copy-start")
    assert shape_text(copy_start.shape) == (
        "(f32[5,1024,1024,256]{3,2,1,0:T(8,128)}, f32[5,1024,1024,256]{3,2,1,0:T(8,128)S(5)}, "
        "u32[]{:S(2)})"
    )
    assert copy_start.shape.tuple_shapes[1].layout.memory_space == 5
    fusion = module.entry.get("broadcast_add_fusion")
    assert fusion.attributes["kind"] == "kLoop"
    assert fusion.attributes["calls"] == "fused_computation"
    assert module.computation("fused_computation").root.opcode == "add"
    # metadata points into the stack-frame tables of the module
    located = [
        i for i in module.instructions() if "stack_frame_id=" in i.attributes.get("metadata", "")
    ]
    assert located
    frame_id = int(re.search(r"stack_frame_id=(\d+)", located[0].attributes["metadata"])[1])
    assert frame_id in module.stack_frames.stack_frames

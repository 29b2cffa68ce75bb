"""profan's per-op FLOPs and bytes against the TPU compiler's own figures in a real v6e trace.

``tpu_v6e_inference.xplane.pb`` carries, per op, the ``flops`` and ``bytes_accessed`` XLA's TPU
backend computed (``bytes_accessed`` counts every memory space: XProf's "measured memory BW").
profan estimates each op from the HLO text of the same modules
(``tpu_v6e_inference.hlo/<module>(<program_id>).hlo``) and must agree on >= 95% of the ops, its
bytes in every space (``OpCost.all_space_bytes``) against ``bytes_accessed``.

The trace is read here with a minimal XSpace schema of the test's own (built from descriptors
with the protobuf runtime), so this cross-check does not depend on profan's trace reader.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from profan.cost import estimate
from profan.hlo.parser import parse_module


def _xspace_class() -> type:
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="profan_test_xplane.proto", package="profan_test", syntax="proto3"
    )

    def message(name: str, fields: list[tuple], parent=None):
        target = (parent.nested_type if parent else proto.message_type).add(name=name)
        for fname, number, ftype, repeated, type_name in fields:
            entry = target.field.add(
                name=fname,
                number=number,
                type=ftype,
                label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL,
            )
            if type_name:
                entry.type_name = type_name
        return target

    i64, dbl, u64, s, b, msg = (
        field.TYPE_INT64, field.TYPE_DOUBLE, field.TYPE_UINT64, field.TYPE_STRING,
        field.TYPE_BYTES, field.TYPE_MESSAGE,
    )  # fmt: skip
    message("XStat", [("metadata_id", 1, i64, 0, None), ("double_value", 2, dbl, 0, None),
                      ("uint64_value", 3, u64, 0, None), ("int64_value", 4, i64, 0, None),
                      ("str_value", 5, s, 0, None), ("bytes_value", 6, b, 0, None),
                      ("ref_value", 7, u64, 0, None)])  # fmt: skip
    message("XEventMetadata", [("id", 1, i64, 0, None), ("name", 2, s, 0, None),
                               ("stats", 5, msg, 1, ".profan_test.XStat")])  # fmt: skip
    message("XStatMetadata", [("id", 1, i64, 0, None), ("name", 2, s, 0, None)])
    plane = message("XPlane", [
        ("id", 1, i64, 0, None), ("name", 2, s, 0, None),
        ("event_metadata", 4, msg, 1, ".profan_test.XPlane.EventMetadataEntry"),
        ("stat_metadata", 5, msg, 1, ".profan_test.XPlane.StatMetadataEntry"),
    ])  # fmt: skip
    entries = (
        ("EventMetadataEntry", ".profan_test.XEventMetadata"),
        ("StatMetadataEntry", ".profan_test.XStatMetadata"),
    )
    for entry_name, value_type in entries:
        fields = [("key", 1, i64, 0, None), ("value", 2, msg, 0, value_type)]
        entry = message(entry_name, fields, plane)
        entry.options.map_entry = True
    message("XSpace", [("planes", 1, msg, 1, ".profan_test.XPlane")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("profan_test.XSpace"))


def _stat_value(stat):
    for name in ("double_value", "uint64_value", "int64_value", "str_value", "ref_value"):
        if getattr(stat, name):
            return getattr(stat, name)
    return None


def trace_op_figures(path: Path) -> dict[tuple[int, str], dict]:
    """(program_id, op name) -> {'flops', 'bytes_accessed', 'line'} from the device planes."""
    space = _xspace_class()()
    space.ParseFromString(path.read_bytes())
    figures: dict[tuple[int, str], dict] = {}
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU"):
            continue
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for meta in plane.event_metadata.values():
            stats = {names[s.metadata_id]: _stat_value(s) for s in meta.stats}
            if "program_id" not in stats or " = " not in meta.name:
                continue
            op_name = meta.name.split(" = ", 1)[0].lstrip("%")
            figures.setdefault(
                (int(stats["program_id"]), op_name),
                {"flops": stats.get("flops") or 0, "bytes_accessed": stats.get("bytes_accessed"),
                 "line": meta.name},
            )  # fmt: skip
    return figures


def test_v6e_trace_per_op_flops_and_bytes_agree(corpus_dir: Path) -> None:
    traces = corpus_dir / "traces"
    modules = {}
    for path in (traces / "tpu_v6e_inference.hlo").glob("*.hlo"):
        program_id = int(re.search(r"\((\d+)\)", path.name).group(1))
        modules[program_id] = parse_module(path.read_text(), file=str(path))
    figures = trace_op_figures(traces / "tpu_v6e_inference.xplane.pb")
    assert len(figures) >= 15, "expected the trace's XLA Ops with their cost stats"

    agree, disagree = [], []
    for (program_id, op_name), theirs in sorted(figures.items()):
        module = modules[program_id]
        instruction = next(
            (c.get(op_name) for c in module.computations if c.get(op_name) is not None), None
        )
        assert instruction is not None, f"{op_name} not in the module's HLO text"
        ours = estimate(instruction, module)
        flops_ok = (ours.flops or 0) == pytest.approx(theirs["flops"], rel=0.01)
        bytes_ok = ours.all_space_bytes == pytest.approx(theirs["bytes_accessed"], rel=0.01)
        (agree if flops_ok and bytes_ok else disagree).append(
            (op_name, ours.flops, theirs["flops"], ours.bytes_by_space, theirs["bytes_accessed"])
        )
    share = len(agree) / (len(agree) + len(disagree))
    # Every op of this trace agrees (17 of 17).  The rules the TPU figures revealed:
    # * broadcast.2 reads a scalar in S(6) (SMEM): 4 bytes this compiler does not count beside
    #   the 5.37 GB output (within 1%);
    # * copy-start/copy-done move an array between host memory S(5) and HBM: the start reads the
    #   source, the done writes the destination, each in its own space (5.37 GB on each half;
    #   XProf's op profile puts the HBM side's in HBM: tests/test_xprof_op_profile.py);
    # * all-reduce: one FLOP per element, input + output bytes (as XLA's HloCostAnalysis).
    assert share >= 0.95, f"only {share:.0%} agree; disagreeing: {disagree}"
    assert not disagree, f"these ops disagree (update the list above): {disagree}"

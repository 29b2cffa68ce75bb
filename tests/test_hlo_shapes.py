"""One shape/layout printer (profan.hlo.shapes.shape_to_text), checked against XLA's printing:

* every array shape XLA printed in the corpus and the fixtures decodes and prints back as XLA
  wrote it (tiles ``T(8,128)(2,1)``, memory spaces, element sizes, dynamic ``<=N`` and ``?``…);
* shapes converted from the HloProtos embedded in real traces print exactly as XLA printed the
  same instructions in its text dumps (TPU v6e corpus trace, CPU and GPU fixtures).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import parse_module
from profan.hlo.model import Shape
from profan.hlo.shapes import decode_shape, is_unknown, shape_to_text
from profan.trace.hloproto import module_from_proto_bytes
from profan.trace.xplane import read_host
from tests.conftest import FIXTURES_DIR

# An array shape as the grammar's SHAPE token reads it (hlo.lark: _SHAPE_TEXT).
_SHAPE = re.compile(r"[a-z][a-z0-9]*\[[^\]\n]*\](?:[ \t]*\{(?:[^{}\n=%\"]|\{[^{}\n=%\"]*\})*\})?")
_DTYPE_NAMES = r"(?:pred|[suf]\d+|bf16|c64|c128|f8e\w+|f4e2m1fn|token|opaque)"
# `%name = <shape> opcode(` of one printed instruction line.
_LINE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][a-z0-9_\-]*)\(", re.M)
_INDEX_COMMENT = re.compile(r"/\*index=\d+\*/")


def _shape_tokens(text: str) -> set[str]:
    found = set()
    for match in _SHAPE.finditer(text):
        token = match.group(0)
        if re.match(_DTYPE_NAMES + r"\[", token):
            found.add("".join(token.split()))
    return found


@pytest.mark.corpus
def test_every_printed_shape_prints_back_as_xla_wrote_it(corpus_dir: Path) -> None:
    texts = [p.read_text(errors="replace") for p in (corpus_dir / "hlo" / "xla").glob("*.hlo")]
    texts += [p.read_text() for p in (corpus_dir / "traces" / "tpu_v6e_inference.hlo").iterdir()]
    texts += [p.read_text() for p in FIXTURES_DIR.glob("**/hlo/*.txt")]
    tokens: set[str] = set()
    for text in texts:
        tokens |= _shape_tokens(text)
    differ = {}
    layouts = tiled = dynamic = 0
    for token in sorted(tokens):
        try:
            shape = decode_shape(token)
        except HloSyntaxError:  # a token XLA's parser tests write wrong on purpose
            continue
        printed = shape_to_text(shape)
        if printed != token:
            differ[token] = printed
        assert decode_shape(printed) == shape, token
        layouts += shape.layout is not None
        tiled += shape.layout is not None and len(shape.layout.tiles) > 1
        dynamic += any(shape.dynamic)
    # Hand-written test text may spell out a default XLA's printer leaves out: memory space 0.
    written_defaults = {t for t, p in differ.items() if t.replace(":S(0)}", "}") == p}
    assert set(differ) == written_defaults == {"f32[4096]{0:S(0)}"}, list(differ.items())[:10]
    assert len(tokens) > 5000 and layouts > 3000 and tiled > 50 and dynamic > 20


def _printed_shapes(text: str) -> dict[tuple[str, str], str]:
    """(computation, instruction) -> the shape text XLA printed for it (index comments out)."""
    module = parse_module(text)
    owner = {i.name: i.computation for i in module.instructions()}
    found = {}
    for match in _LINE.finditer(text):
        name = match.group(1)
        if name in owner:
            found[(owner[name], name)] = _INDEX_COMMENT.sub("", match.group(2)).strip()
    return found


def _compare_module(proto_bytes: bytes, text: str, where: str) -> int:
    ours = module_from_proto_bytes(proto_bytes, where=where)
    printed = _printed_shapes(text)
    compared = 0
    for instruction in ours.instructions():
        expected = printed.get((instruction.computation, instruction.name))
        if expected is None:
            continue
        assert shape_to_text(instruction.shape) == expected, (where, instruction.name)
        compared += 1
    header = re.search(r"entry_computation_layout=(\{.*?\})(?:, [a-z_]+=|\n)", text)
    if header is not None:
        layout = _INDEX_COMMENT.sub("", header.group(1))
        assert ours.attributes["entry_computation_layout"] == layout, where
    return compared


@pytest.mark.corpus
def test_tpu_trace_shapes_print_as_xla_printed_them(corpus_dir: Path) -> None:
    host = read_host(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"), "tpu")
    texts = {}
    for path in (corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*.hlo"):
        texts[path.name.split("(")[0]] = path.read_text()
    compared = 0
    for name, data in host.hlo_protos.values():
        compared += _compare_module(data, texts[name], name)
    # the copies to and from host memory carry S(5), the parameters tiles T(8,128)(2,1)
    assert compared > 20


def _fixture_pairs() -> list[tuple[Path, Path]]:
    pairs = []
    for dump in sorted(FIXTURES_DIR.glob("*/hlo/*after_optimizations.txt")):
        trace = dump.parent.parent / "trace"
        if trace.is_dir():
            pairs.append((dump, next(trace.rglob("*.xplane.pb"))))
    return pairs


@pytest.mark.parametrize(
    "dump,xplane", _fixture_pairs(), ids=lambda p: p.parent.parent.name if p.suffix else None
)
def test_fixture_trace_shapes_print_as_the_dump(dump: Path, xplane: Path) -> None:
    text = dump.read_text()
    name = re.match(r"HloModule (\S+?),", text).group(1)
    host = read_host(str(xplane), "vm")
    candidates = [data for module, data in host.hlo_protos.values() if module == name]
    assert candidates
    compared = max(_compare_module(data, text, dump.name) for data in candidates)
    assert compared > 0


def test_synthetic_dynamic_dimensions_print_as_xla_does() -> None:
    # `<=N` is a bounded dynamic dimension, `?` an unbounded one (-1 in profan's model, and
    # INT64_MIN in XLA's ShapeProto: both print `?`).
    assert shape_to_text(decode_shape("f32[<=8,?,3]{2,1,0}")) == "f32[<=8,?,3]{2,1,0}"
    assert shape_to_text(Shape("f32", (-(2**63), 4), (True, False))) == "f32[?,4]"
    assert is_unknown(Shape("tuple", tuple_shapes=(Shape("f32", (2,)), Shape("unknown"))))
    assert not is_unknown(decode_shape("f32[2]{0}")) and not is_unknown(None)


def _fill_shape_proto(shape: Shape, proto: object, types: dict[str, int]) -> None:
    """Write ``shape`` into an ``xla.ShapeProto`` the way XLA stores it (unbounded ``?`` as
    INT64_MIN, tiles' ``*`` as INT64_MIN, level types as enum numbers)."""
    proto.element_type = types[shape.dtype.upper()]
    proto.dimensions.extend(-(2**63) if d < 0 else d for d in shape.dims)
    proto.is_dynamic_dimension.extend(shape.dynamic)
    layout = shape.layout
    if layout is None:
        return
    target = proto.layout
    target.minor_to_major.extend(layout.minor_to_major)
    for tile in layout.tiles:
        target.tiles.add().dimensions.extend(-(2**63) if d is None else d for d in tile)
    target.element_size_in_bits = layout.element_size_bits or 0
    target.memory_space = layout.memory_space
    target.dim_level_types.extend("DCSH".index(t) for t in layout.dim_level_types)
    target.tail_padding_alignment_in_elements = layout.tail_padding_alignment or 0
    if layout.index_primitive_type:
        target.index_primitive_type = types[layout.index_primitive_type.upper()]
    if layout.pointer_primitive_type:
        target.pointer_primitive_type = types[layout.pointer_primitive_type.upper()]
    target.dynamic_shape_metadata_prefix_bytes = layout.dynamic_shape_metadata_prefix_bytes or 0
    for config in layout.split_configs:
        dimension, _, points = config.partition(":")
        entry = target.split_configs.add()
        entry.dimension = int(dimension)
        entry.split_indices.extend(int(p) for p in points.split(",") if p)
    if layout.physical_shape is not None:
        _fill_shape_proto(layout.physical_shape, target.physical_shape, types)
    if not shape.dims and target.ListFields() == [
        (type(target).DESCRIPTOR.fields_by_name["minor_to_major"], [])
    ]:
        proto.ClearField("layout")


@pytest.mark.corpus
def test_hloproto_conversion_prints_every_corpus_layout_as_xla(corpus_dir: Path) -> None:
    # Real traces hold few layout forms (the v6e one: T(8,128), T(128), S(5), S(6)).  Every
    # layout the corpus prints is written into an xla.ShapeProto as XLA stores it, carried
    # through the trace's HloProto conversion, and must print back as XLA printed it.  The
    # copy hloproto.py had printed `T(8,128)T(2,1)` and `<=-1` here.
    from profan.trace.schema import load_schema

    classes = load_schema("hlo.proto")
    enum = classes["xla.HloProto"].DESCRIPTOR.file.enum_types_by_name["PrimitiveType"]
    types = {value.name: value.number for value in enum.values}
    tokens: set[str] = set()
    for path in (corpus_dir / "hlo" / "xla").glob("*.hlo"):
        tokens |= {
            t
            for t in _shape_tokens(path.read_text(errors="replace"))
            if ":" in t or "?" in t or "<=" in t
        }
    shapes = []
    for token in sorted(tokens):
        try:
            shape = decode_shape(token)
        except HloSyntaxError:
            continue
        if shape_to_text(shape) == token and not any(
            "+" in t or "~" in t for t in (shape.layout.dim_level_types if shape.layout else ())
        ):
            shapes.append((token, shape))
    proto = classes["xla.HloProto"]()
    module = proto.hlo_module
    module.name = "layouts"
    computation = module.computations.add()
    computation.name, computation.id = "main", 1
    module.entry_computation_id, module.entry_computation_name = 1, "main"
    for number, (_, shape) in enumerate(shapes):
        instruction = computation.instructions.add()
        instruction.name, instruction.opcode, instruction.id = f"p{number}", "parameter", number + 1
        instruction.parameter_number = number
        _fill_shape_proto(shape, instruction.shape, types)
    computation.root_id = len(shapes)
    converted = module_from_proto_bytes(proto.SerializeToString(), where="synthetic proto")
    printed = [shape_to_text(p.shape) for p in converted.entry.params]
    assert printed == [token for token, _ in shapes]
    multi_tile = [t for t, s in shapes if s.layout is not None and len(s.layout.tiles) > 1]
    unbounded = [t for t, _ in shapes if "?" in t]
    assert len(shapes) > 300 and len(multi_tile) > 20 and unbounded, (len(multi_tile), unbounded)

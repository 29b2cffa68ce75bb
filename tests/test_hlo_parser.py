"""Unit tests of the HLO parser on real HLO: fixtures made with JAX and XLA's own test modules."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import parse_file, parse_instruction, parse_module
from profan.hlo.model import UNBOUNDED_DIM
from profan.hlo.printer import instruction_to_text, module_to_text
from profan.hlo.shapes import _fast_decode, decode_shape, decode_shape_by_grammar
from profan.hlo.views import (
    backend_config,
    called_computations,
    control_predecessors,
    custom_call_target,
    metadata,
    source_location,
    stack_trace,
)

XPROF_LINE = (
    "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,8192]{2,1,0:"
    "T(8,128)(2,1)} %p0, s32[]{:T(128)} %p1), kind=kCustom, calls=%all-reduce-scatter.3, "
    'metadata={op_type="dot" op_name="jit(f)/dot_general" source_file="model.py" source_line=42}'
)


pytestmark = pytest.mark.usefixtures("private_cache")


def _corpus_module(corpus_dir: Path, name: str):
    return parse_file(corpus_dir / "hlo" / "xla" / name)


def _fixture_dumps(fixtures_dir: Path) -> list[tuple[Path, dict]]:
    """Each fixture dump with the counts XLA's own parser found (recorded in meta.json)."""
    found = []
    for meta_path in sorted(fixtures_dir.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        for entry in meta.get("hlo_files", []):
            if "xla_counts" in entry:
                found.append((meta_path.parent / entry["file"], entry["xla_counts"]))
    return found


def test_fixture_dumps_match_xla_counts(fixtures_dir: Path) -> None:
    dumps = _fixture_dumps(fixtures_dir)
    if not dumps:
        pytest.skip("no fixture dumps with XLA counts yet")
    for path, counts in dumps:
        module = parse_file(path)
        found = (len(module.computations), sum(len(c) for c in module.computations))
        assert found == (counts["computations"], counts["instructions"]), path
        assert module.entry.is_entry
        assert parse_module(module_to_text(module)) == module


def test_tiled_layout_with_memory_space_decodes() -> None:
    shape = decode_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}")
    assert shape.dtype == "bf16" and shape.dims == (32, 32, 4096)
    assert shape.layout is not None
    assert shape.layout.minor_to_major == (2, 1, 0)
    assert shape.layout.tiles == ((8, 128), (2, 1))
    assert shape.layout.memory_space == 1
    assert shape.num_elements == 32 * 32 * 4096 and shape.element_bits == 16


def test_exotic_layout_items_decode() -> None:
    shape = decode_shape(
        "u4[<=8,?,16]{2,1,0:D(D,C+)T(*,128)()L(4)#(s32)*(u32)E(4)S(2)SC(0:2,4)P(u8[8]{0})M(8)}"
    )
    assert shape.dims == (8, UNBOUNDED_DIM, 16)
    assert shape.dynamic == (True, True, False)
    layout = shape.layout
    assert layout is not None
    assert layout.dim_level_types == ("D", "C+")
    assert layout.tiles == ((None, 128), ())
    assert layout.tail_padding_alignment == 4
    assert layout.index_primitive_type == "s32" and layout.pointer_primitive_type == "u32"
    assert layout.element_size_bits == 4 and shape.element_bits == 4
    assert layout.memory_space == 2
    assert layout.split_configs == ("0:2,4",)
    assert layout.physical_shape is not None and layout.physical_shape.dims == (8,)
    assert layout.dynamic_shape_metadata_prefix_bytes == 8


def test_fast_shape_path_agrees_with_the_grammar(corpus_dir: Path) -> None:
    import re

    text = (
        (corpus_dir / "hlo" / "xla")
        .joinpath("xla__backends__cpu__benchmarks__hlo__gemma2_2b_keras_jax.hlo")
        .read_text()
    )
    shapes = set(re.findall(r"[a-z][a-z0-9]*\[[\d,]*\](?:\{[^{}=%\n\"]*\})?", text))
    tpu = {"bf16[8,128]{1,0:T(8,128)(2,1)S(1)}", "s4[64]{0:T(256)E(4)}", "f32[]{:T(128)}"}
    checked = 0
    for shape_text in sorted(shapes | tpu):
        fast = _fast_decode(shape_text)
        if fast is not None:
            assert fast == decode_shape_by_grammar(shape_text), shape_text
            checked += 1
    assert checked > 50


def test_parse_instruction_of_an_xprof_line() -> None:
    instruction = parse_instruction(XPROF_LINE)
    assert instruction.name == "fusion.3" and instruction.opcode == "fusion"
    assert instruction.fusion_kind == "kCustom"
    assert called_computations(instruction) == ["all-reduce-scatter.3"]
    assert [o.name for o in instruction.operands] == ["p0", "p1"]
    first = instruction.operands[0].shape
    assert first is not None and first.dims == (32, 32, 8192) and first.layout.memory_space == 0
    second = instruction.operands[1].shape
    assert second is not None and second.layout.tiles == ((128,),)
    assert instruction.shape.layout.memory_space == 1
    assert metadata(instruction).source_file == "model.py"
    assert metadata(instruction).source_line == 42
    assert metadata(instruction).op_type == "dot"


def test_parse_instruction_without_percent_signs_or_shapes() -> None:
    instruction = parse_instruction("ROOT add.1 = f32[4]{0} add(p0, p1), metadata={}")
    assert instruction.is_root and instruction.operand_names == ["p0", "p1"]
    assert all(o.shape is None for o in instruction.operands)


def test_stack_frame_ids_resolve_to_the_matmul_source_lines(fixtures_dir: Path) -> None:
    meta_path = fixtures_dir / "mlp" / "meta.json"
    if not meta_path.is_file():
        pytest.skip("mlp fixture not present")
    meta = json.loads(meta_path.read_text())
    # The lines where the program's matmuls are written, recorded by the fixture generator.
    truth_lines = {m["source"]["line"] for m in meta["truth"]["matmuls"] if m.get("source")}
    module = parse_file(meta_path.parent / meta["hlo_files"][0]["file"])
    assert module.stack_frames
    dots = [i for i in module.instructions() if i.opcode == "dot"]
    assert dots and truth_lines
    for dot in dots:
        assert metadata(dot).stack_frame_id is not None
        location = source_location(module, dot)
        assert location is not None
        assert location.file.endswith("make_fixtures.py")
        assert location.line in truth_lines, (dot.name, location)
        assert location.function is not None
        assert str(location) == f"{location.file}:{location.line}"
        assert stack_trace(module, dot)[0] == location


def test_source_file_and_line_in_metadata_resolve(corpus_dir: Path) -> None:
    module = _corpus_module(corpus_dir, "xla__backends__cpu__benchmarks__hlo__jax.b380442861.hlo")
    with_source = [
        i for i in module.instructions() if "source_line=" in i.attributes.get("metadata", "")
    ]
    assert with_source
    for instruction in with_source:
        location = source_location(module, instruction)
        assert location is not None
        assert f'source_file="{location.file}"' in instruction.attributes["metadata"]
        assert f"source_line={location.line}" in instruction.attributes["metadata"]


def test_stack_frames_in_xla_corpus(corpus_dir: Path) -> None:
    module = _corpus_module(
        corpus_dir,
        "xla__backends__cpu__benchmarks__hlo__jax.issue.33666.linx.frag_0100.module_0005.hlo",
    )
    assert module.stack_frames.file_names == {
        1: "/pscratch/sd/c/carag/LINX/scripts/frag_mwe_short.py"
    }
    sliced = next(i for i in module.instructions() if metadata(i).stack_frame_id == 1)
    location = source_location(module, sliced)
    assert location is not None
    assert (location.line, location.column, location.function) == (9, 25, "<module>")


def test_backend_config_json_and_custom_call_target() -> None:
    quoted = parse_instruction(
        '%cc = f32[2]{0} custom-call(f32[2]{0} %x), custom_call_target="foo\\"bar", '
        'backend_config="{\\"k\\": [1, 2]}"'
    )
    assert custom_call_target(quoted) == 'foo"bar'
    assert backend_config(quoted) == {"k": [1, 2]}
    bare = parse_instruction(
        '%f = f32[2]{0} fusion(%x), kind=kLoop, calls=%c, backend_config={"a":{"b":{"c":1}}}'
    )
    assert backend_config(bare) == {"a": {"b": {"c": 1}}}
    raw = parse_instruction('%f = f32[2]{0} custom-call(%x), backend_config="opaque"')
    assert raw.backend_config == '"opaque"' and backend_config(raw) is None


def test_called_computations_of_every_kind() -> None:
    loop = parse_instruction("%w = (s32[]) while((s32[]) %t), condition=%cond, body=%body")
    assert called_computations(loop) == ["cond", "body"]
    branches = parse_instruction(
        "%c = f32[] conditional(s32[] %i, f32[] %a, f32[] %b), branch_computations={%b0, %b1}"
    )
    assert called_computations(branches) == ["b0", "b1"]
    reduce = parse_instruction(
        "%r = f32[] reduce(f32[8]{0} %x, f32[] %z), dimensions={0}, to_apply=%add"
    )
    assert called_computations(reduce) == ["add"]
    ordered = parse_instruction("%a = f32[] add(%x, %y), control-predecessors={%p, %q}")
    assert control_predecessors(ordered) == ["p", "q"]


def test_attribute_values_of_every_form_stay_raw() -> None:
    line = (
        "%ar = f32[8]{0} all-reduce(f32[8]{0} %x), replica_groups=[2,4]<=[4,2]T(1,0), "
        "sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}, window={size=3x3 stride=2x2}, "
        "dim_labels=b01f_01io->b01f, padding=0_0x1_1, slice={[0:2:1], [0:4]}, "
        "mesh_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_0'}, to_apply=%add"
    )
    attributes = parse_instruction(line).attributes
    assert attributes["replica_groups"] == "[2,4]<=[4,2]T(1,0)"
    assert attributes["sharding"] == "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"
    assert attributes["window"] == "{size=3x3 stride=2x2}"
    assert attributes["dim_labels"] == "b01f_01io->b01f"
    assert attributes["padding"] == "0_0x1_1"
    assert attributes["slice"] == "{[0:2:1], [0:4]}"
    assert attributes["mesh_groups"] == "mesh['axis_0'=4,'axis_1'=2] {'axis_0'}"
    assert list(attributes) == [
        "replica_groups",
        "sharding",
        "window",
        "dim_labels",
        "padding",
        "slice",
        "mesh_groups",
        "to_apply",
    ]


def test_constants_keep_their_literal() -> None:
    module = parse_module(
        "HloModule synthetic_literals\n\nENTRY e {\n"
        "  a = f32[2,2]{1,0} constant({ { 1, 2 }, { 3, -inf } })\n"
        "  b = (f32[], s32[]) constant((1.5, 2))\n"
        "  ROOT c = pred[] constant(true)\n}\n"
    )
    literals = [i.literal for i in module.entry.instructions]
    assert literals == ["{ { 1, 2 }, { 3, -inf } }", "(1.5, 2)", "true"]
    assert parse_module(module_to_text(module)) == module


def test_syntax_error_fields_point_at_the_bad_token() -> None:
    text = (
        "HloModule synthetic_bad\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n"
        "  ROOT r = f32[2]{0} add(p, p)), x=1\n}\n"
    )
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(text, file="bad.hlo")
    error = caught.value
    assert (error.file, error.line) == ("bad.hlo", 5)
    assert error.column == text.splitlines()[4].index("))") + 2
    assert "add(p, p))" in error.text and error.expected
    assert str(error).startswith("bad.hlo:5:")


def test_unexpected_end_and_bad_shape_are_syntax_errors() -> None:
    with pytest.raises(HloSyntaxError) as caught:
        parse_module("HloModule synthetic_cut\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0)\n")
    assert caught.value.line == 3 and "end of input" in caught.value.reason
    with pytest.raises(HloSyntaxError) as bad_shape:
        parse_instruction("%x = f32[2]{0:Q(3)} parameter(0)")
    assert bad_shape.value.line == 1
    with pytest.raises(HloSyntaxError):
        parse_instruction("%x = f32[2]{0} parameter(zero)")
    with pytest.raises(HloSyntaxError, match="given twice"):
        parse_instruction("%x = f32[] add(%a, %b), metadata={}, metadata={}")


def test_parse_file_uses_the_cache(tmp_path: Path, fixtures_dir: Path, private_cache: Path) -> None:
    source = fixtures_dir / "matmul/hlo/module_0012.jit_matmul.cpu_after_optimizations.txt"
    if not source.is_file():
        pytest.skip("matmul fixture not present")
    copy = tmp_path / "m.hlo"
    copy.write_text(source.read_text())
    first = parse_file(copy)
    entries = list((private_cache / "hlo").glob("*.entry"))
    assert len(entries) == 1
    assert parse_file(copy) == first
    copy.write_text(source.read_text().replace("HloModule ", "HloModule changed_", 1))
    assert parse_file(copy).name.startswith("changed_")
    assert len(list((private_cache / "hlo").glob("*.entry"))) == 2
    entries[0].write_bytes(b"damaged")
    copy.write_text(source.read_text())
    assert parse_file(copy) == first  # a damaged entry is a miss, not an error


def test_non_utf8_file_is_a_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "synthetic_binary.hlo"
    path.write_bytes(b"HloModule m\n\xff\xfe")
    with pytest.raises(HloSyntaxError, match="UTF-8"):
        parse_file(path)


def test_async_sugar_becomes_async_start_with_a_wrapped_computation(corpus_dir: Path) -> None:
    module = _corpus_module(
        corpus_dir, "xla__backends__gpu__transforms__stream_attribute_annotator_test__3.hlo"
    )
    start = module.entry.get("dynamic-update-slice-start.2")
    done = module.entry.get("dynamic-update-slice-done.2")
    assert start is not None and done is not None
    assert (start.opcode, done.opcode) == ("async-start", "async-done")
    assert called_computations(start) == called_computations(done)
    wrapped = module.computation(called_computations(start)[0])
    assert wrapped.root.opcode == "dynamic-update-slice"
    # One parameter per operand of the start, shaped like the start's operand tuple.
    assert [p.shape for p in wrapped.params] == list(start.shape.tuple_shapes[0].tuple_shapes)
    assert wrapped.root.shape == start.shape.tuple_shapes[1] == done.shape


def test_native_async_collectives_stay_as_written() -> None:
    start = parse_instruction(
        "%ags = (f32[8]{0}, f32[64]{0}) all-gather-start(f32[8]{0} %x), dimensions={0}, "
        "replica_groups={{0,1,2,3,4,5,6,7}}"
    )
    assert start.opcode == "all-gather-start" and start.attributes["dimensions"] == "{0}"


def test_attribute_values_are_kept_verbatim_across_the_corpus(corpus_dir: Path) -> None:
    # Every attribute value profan keeps must be text that is in the file, exactly; and every
    # `name=` the file's instruction lines hold must be found as an attribute somewhere.
    root = corpus_dir / "hlo" / "xla"
    # Comments are not part of values: a value may be file text with its /*...*/ cut out
    # (XLA prints `/*index=5*/` inside long shardings and layouts).
    names = sorted(p.name for p in root.glob("*.hlo"))[::40]
    checked = 0
    for name in names:
        text = (root / name).read_text()
        try:
            module = parse_module(text)
        except HloSyntaxError:
            continue
        uncommented = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        generated = {c.name for c in module.computations if c.name not in text}
        for instruction in module.instructions():
            for key, value in instruction.attributes.items():
                # Names of computations profan made (async sugar, bodies written inline).
                if value.startswith("%") and value[1:] in generated:
                    continue
                assert key in text, (name, instruction.name, key)
                assert value in text or value in uncommented, (name, instruction.name, key)
                checked += 1
    assert checked > 500


def _outside_strings(value: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', value)


@pytest.mark.parametrize(
    "name",
    [
        # `/*index=5*/` inside the header's layout and an instruction's tuple sharding
        "xla__tools__benchmarks__hlo__nv_maxtext_1n1g_jit_train_step_before_optimization.hlo",
        # `/*i0=0*/` inside constant literals
        "xla__hlo__parser__hlo_parser_test__47.hlo",
        "xla__backends__gpu__transforms__cudnn_simplify_padding_test__10.hlo",
    ],
)
def test_no_comment_leaks_into_attribute_values_or_literals(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / "hlo" / "xla" / name
    text = path.read_text()
    assert "/*" in text  # the file does have comments inside values
    module = parse_module(text)
    values = list(module.attributes.values())
    for instruction in module.instructions():
        values.extend(instruction.attributes.values())
        if instruction.literal:
            values.append(instruction.literal)
    assert values
    leaked = [v[:80] for v in values if "/*" in _outside_strings(v) or "//" in _outside_strings(v)]
    assert not leaked
    again = parse_module(module_to_text(module))
    assert again == module


def test_line_comment_after_an_attribute_is_not_part_of_it_synthetic() -> None:
    for line in (
        "%g = f32[] get-tuple-element((f32[], s32[]) %p), index=0// dead",
        "%g = f32[] get-tuple-element((f32[], s32[]) %p), index=0  // dead",
        "%g = f32[] get-tuple-element((f32[], s32[]) %p), index=/* first */0 /* x */",
    ):
        instruction = parse_instruction(line)
        assert instruction.attributes == {"index": "0"}, line
    # A '/' that starts no comment stays in the value.
    divided = parse_instruction("%g = f32[] get-tuple-element((f32[]) %p), index=0, k=a/b")
    assert divided.attributes["k"] == "a/b"


def test_index_comments_and_root_in_a_single_line() -> None:
    instruction = parse_instruction(
        "ROOT %tuple.1 = (s32[], u32[20]{0}, /*index=2*/u32[]) tuple(%add.16, %add.22, "
        '/*index=2*/%Arg_3.1), metadata={op_name="x"}'
    )
    assert instruction.is_root and instruction.operand_names == ["add.16", "add.22", "Arg_3.1"]
    assert [s.dtype for s in instruction.shape.tuple_shapes] == ["s32", "u32", "u32"]


def test_parse_file_without_a_writable_cache(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fixtures_dir / "matmul/hlo/module_0012.jit_matmul.cpu_after_optimizations.txt"
    if not source.is_file():
        pytest.skip("matmul fixture not present")
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(blocker))
    assert parse_file(source) == parse_module(source.read_text())


# (computations, instructions) that XLA's own parser (jaxlib 0.10.2) finds in the HLO text of
# the TPU v6e trace's modules, measured with hlo_module_from_text beside this test's writing.
TPU_TRACE_MODULES = {
    "jit__psum(9646411105960254074).hlo": (2, 6),
    "jit_broadcast_in_dim(11287434908481120160).hlo": (1, 3),
    "jit_convert_element_type(2433868464432466958).hlo": (1, 3),
    "jit_f(12190760917235803885).hlo": (4, 31),
}


@pytest.mark.parametrize("name", sorted(TPU_TRACE_MODULES))
def test_tpu_trace_modules_parse_like_xla(corpus_dir: Path, name: str) -> None:
    path = corpus_dir / "traces" / "tpu_v6e_inference.hlo" / name
    module = parse_file(path)
    counts = (len(module.computations), sum(len(c) for c in module.computations))
    assert counts == TPU_TRACE_MODULES[name]
    assert parse_module(module_to_text(module)) == module
    if name.startswith("jit_f("):
        layouts = {
            (leaf.dims, leaf.layout.tiles, leaf.layout.memory_space)
            for i in module.instructions()
            for leaf in i.shape.leaves()
            if leaf.layout is not None
        }
        # The module holds f32[5,1024,1024,256]{3,2,1,0:T(8,128)S(5)} and its HBM twin,
        # scalars f32[]{:T(128)} and u32[]{:S(2)}.
        assert ((5, 1024, 1024, 256), ((8, 128),), 5) in layouts
        assert ((5, 1024, 1024, 256), ((8, 128),), 0) in layouts
        assert ((), ((128,),), 0) in layouts
        assert ((), (), 2) in layouts


# The line issue 2 (and the developer guide) give as what users paste from XProf.
XPROF_ELIDED_LINE = (
    "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(...), kind=kCustom, "
    "calls=%all-reduce-scatter.3"
)


def test_xprof_line_with_operands_left_out_parses() -> None:
    from profan.attribute import classify
    from profan.cost import estimate

    instruction = parse_instruction(XPROF_ELIDED_LINE)
    assert instruction.opcode == "fusion"
    assert instruction.operands == [] and instruction.operands_elided
    assert instruction.elided_operand_count is None
    assert instruction.shape.dims == (32, 32, 4096) and instruction.shape.dtype == "bf16"
    assert instruction.shape.layout is not None and instruction.shape.layout.memory_space == 1
    assert called_computations(instruction) == ["all-reduce-scatter.3"]
    assert instruction.fusion_kind == "kCustom"
    assert "fusion(...)" in instruction_to_text(instruction)
    assert parse_instruction(instruction_to_text(instruction)) == instruction
    # Downstream: no body, so no FLOPs; the fused collective is recognised by `calls=`.
    assert estimate(instruction).flops is None
    assert classify(instruction).category == "collective"


def test_elided_operands_differ_from_none_synthetic() -> None:
    shown = parse_instruction("%f = f32[8]{0} fusion(), kind=kLoop, calls=%c")
    elided = parse_instruction("%f = f32[8]{0} fusion(...), kind=kLoop, calls=%c")
    assert not shown.operands_elided and elided.operands_elided
    assert shown != elided


def test_operand_list_cut_short_keeps_the_operands_shown_synthetic() -> None:
    # XLA's compact operand printing: the first operands, then `...(+N)` for the rest.
    line = (
        "%fusion.7 = bf16[8,128]{1,0} fusion(bf16[8,128]{1,0} %p0, f32[128]{0} %p1, "
        "s32[] %p2, bf16[8,128]{1,0} %p3, ...(+2)), kind=kLoop, calls=%fused_computation.7"
    )
    instruction = parse_instruction(line)
    assert instruction.operand_names == ["p0", "p1", "p2", "p3"]
    assert instruction.operands[1].shape is not None and instruction.operands[1].shape.dims == (
        128,
    )
    assert instruction.operands_elided and instruction.elided_operand_count == 2
    assert "...(+2)" in instruction_to_text(instruction)
    assert parse_instruction(instruction_to_text(instruction)) == instruction
    trailing = parse_instruction("%a = f32[8]{0} add(%x, ...)")
    assert trailing.operand_names == ["x"] and trailing.elided_operand_count is None


def test_elided_operands_are_rejected_in_a_module_synthetic() -> None:
    text = (
        "HloModule m\n\nENTRY %e () -> f32[8] {\n  ROOT %f = f32[8]{0} fusion(...), calls=%c\n}\n"
    )
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(text)
    assert caught.value.line == 4 and "single line" in caught.value.reason


def test_unnamed_shape_operand_kept_in_a_single_line_synthetic() -> None:
    # XLA's single-instruction parser makes such operands parameters; profan keeps their shape.
    instruction = parse_instruction("%r = f32[] add(f32[] %a, f32[])")
    assert [o.name for o in instruction.operands] == ["a", ""]
    assert (
        instruction.operands[1].shape is not None and instruction.operands[1].shape.dtype == "f32"
    )
    assert parse_instruction(instruction_to_text(instruction)) == instruction


def test_operands_printed_without_names_synthetic() -> None:
    # HloPrintOptions with print_operand_names off (XLA's fingerprint form): shapes only.
    instruction = parse_instruction(
        "%c = (f32[], s32[]) call((f32[], s32[]), f32[2]{0}), to_apply=%f"
    )
    shapes = [o.shape for o in instruction.operands]
    assert [o.name for o in instruction.operands] == ["", ""]
    assert shapes[0] is not None and shapes[0].is_tuple and len(shapes[0].tuple_shapes) == 2
    assert shapes[1] is not None and shapes[1].dims == (2,)
    assert parse_instruction(instruction_to_text(instruction)) == instruction


def test_grammars_load_from_the_installed_package_and_from_a_checkout(tmp_path: Path) -> None:
    # The wheel puts grammars/ inside the package (pyproject force-include): Lark reads them
    # with open_from_package there; a checkout reads grammars/ beside the package.
    import shutil
    import subprocess
    import sys

    repo = Path(__file__).resolve().parent.parent
    installed = tmp_path / "site"
    shutil.copytree(
        repo / "profan", installed / "profan", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(repo / "grammars", installed / "profan" / "grammars")
    script = (
        "import profan.paths as p; from profan.hlo import parse_module, parse_instruction;"
        "from profan.hlo.views import backend_config;"
        "module = parse_module('ENTRY e {\\n ROOT p = f32[2]{0:T(2)} parameter(0)\\n}');"
        "call = parse_instruction('%c = f32[] custom-call(), backend_config={a = 1 : i64}');"
        "print((p.PACKAGE_DIR / 'grammars').is_dir(), module.entry.root.shape.dims,"
        " backend_config(call))"
    )
    for where, packaged in ((installed, True), (repo, False)):
        found = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(where), "PROFAN_CACHE_DIR": str(tmp_path / "c")},
            capture_output=True,
            text=True,
            check=True,
        )
        assert found.stdout.split() == [str(packaged), "(2,)", "{'a':", "1}"]


def test_every_fixture_dump_prints_back_to_the_same_model(fixtures_dir: Path) -> None:
    # parse(to_text(m)) == m on every HLO text the fixtures hold (CPU and GPU dumps, before and
    # after optimisations, compiled_as_text), %name#N elements and inline computations included.
    dumps = [
        p for p in sorted(fixtures_dir.glob("**/hlo/*.txt")) if "buffer-assignment" not in p.name
    ]
    assert len(dumps) > 40
    for path in dumps:
        module = parse_file(path)
        assert parse_module(module_to_text(module)) == module, path.name


# A bug in the model builder is profan's fault, not the user's (issue 18).
_MATMUL_DUMP = "matmul/hlo/module_0012.jit_matmul.cpu_after_optimizations.txt"


def test_a_builder_bug_is_an_internal_error_not_a_syntax_error(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from profan.cli import main
    from profan.errors import EXIT_INTERNAL
    from profan.hlo.builder import ModelBuilder

    path = fixtures_dir / _MATMUL_DUMP
    parse_module(path.read_text())  # the dump itself is good

    def broken(self: ModelBuilder, *args: object, **kwargs: object) -> None:
        raise KeyError("injected by the test")

    monkeypatch.setattr(ModelBuilder, "_operand_list", broken)
    with pytest.raises(KeyError, match="injected by the test"):
        parse_module(path.read_text(), file=path.name)
    with pytest.raises(KeyError, match="injected by the test"):
        parse_instruction(XPROF_LINE)
    assert main(["hlo", str(path)]) == EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "injected by the test" in err
    assert "syntax error" not in err and "Traceback" not in err


def test_a_malformed_dump_stays_a_syntax_error_with_its_position(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from profan.cli import main
    from profan.errors import EXIT_BAD_INPUT

    lines = (fixtures_dir / _MATMUL_DUMP).read_text().splitlines()
    number = next(n for n, line in enumerate(lines) if " dot(" in line)
    # the real dump with a stray '%' before the dot's first operand (a synthetic corner case)
    lines[number] = lines[number].replace(" dot(%", " dot(%%", 1)
    broken = tmp_path / "synthetic_stray_percent.txt"
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(broken.read_text(), file=broken.name)
    assert caught.value.line == number + 1 and caught.value.column is not None
    assert caught.value.expected
    assert main(["hlo", str(broken)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    where = f"synthetic_stray_percent.txt:{number + 1}:{caught.value.column}"
    assert f"{where}: HLO syntax error" in err
    assert "expected one of" in err and "internal error" not in err


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (
            ", rhs_contracting_dims={0},",
            ", rhs_contracting_dims={0}, rhs_contracting_dims={0},",
            "given twice",
        ),
        (
            "f32[512,1024]{1,0} parameter(1)\n  ROOT",
            "f32[512,1024]{1,,0} parameter(1)\n  ROOT",
            "bad shape",
        ),
    ],
)
def test_an_error_in_a_run_of_lines_names_its_own_line(
    fixtures_dir: Path, old: str, new: str, reason: str
) -> None:
    # The lines of a computation in the commonest form lex as one token; an error the builder
    # finds on the third of them is still placed on that line (a synthetic corner case made
    # from a real dump).
    text = (fixtures_dir / _MATMUL_DUMP).read_text()
    assert text.count(old) == 1
    broken = text.replace(old, new)
    number = broken[: broken.index(new)].count("\n") + 1
    line = broken.splitlines()[number - 1]
    assert line.lstrip().startswith(("ROOT %dot_general.0", "%param_1"))
    with pytest.raises(HloSyntaxError, match=reason) as caught:
        parse_module(broken, file="synthetic.txt")
    assert (caught.value.line, caught.value.column) == (number, len(line) - len(line.lstrip()) + 1)

"""Conformance on XLA's own HLO: every module XLA's parser accepts parses with XLA's counts.

The corpus (../shared/corpus/hlo/xla, 4,681 modules) carries, per module, whether XLA's C++
parser (jaxlib 0.10.2) accepted it and how many computations and instructions it found.  One
module-scoped loop parses them all (a test per module would be slow on CI's cold cache).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import Module, parse_instruction, parse_module
from profan.hlo.printer import module_to_text
from tests.conftest import FIXTURES_DIR
from tests.conftest import HloCorpusOutcome as Outcome
from tests.test_hlo_verify import VERIFIER_REJECTS

pytestmark = [pytest.mark.corpus, pytest.mark.slow]

# Modules XLA accepts whose counts profan does not reproduce: none.  (The last one,
# hlo_module_splitting_test__4, writes an operand as a bare shape, ``add(f32[] %fusion, f32[],
# %res.23)``; XLA's module parser drops such an operand and so does profan now.)
KNOWN_MISSES: set[str] = set()


@pytest.fixture(scope="module")
def outcomes(hlo_corpus_outcomes: list[Outcome]) -> list[Outcome]:
    # parsed once per session (tests/conftest.py), shared with tests/test_hlo_verify.py
    return hlo_corpus_outcomes


def _counts(module: Module) -> tuple[int, int]:
    return len(module.computations), sum(len(c.instructions) for c in module.computations)


def test_corpus_is_the_expected_one(outcomes: list[Outcome]) -> None:
    assert len(outcomes) > 4000
    assert sum(o.row["xla_parses"] for o in outcomes) > 4000


def test_modules_xla_accepts_parse_with_xla_counts(outcomes: list[Outcome]) -> None:
    # the few that XLA's parser takes but its verifier would not (tests/test_hlo_verify.py)
    accepted = [
        o for o in outcomes if o.row["xla_parses"] and o.row["file"] not in VERIFIER_REJECTS
    ]
    misses = {}
    for outcome in accepted:
        expected = (outcome.row["computations"], outcome.row["instructions"])
        if outcome.module is None:
            misses[outcome.row["file"]] = str(outcome.error).splitlines()[0]
        elif _counts(outcome.module) != expected:
            misses[outcome.row["file"]] = f"counts {_counts(outcome.module)} != {expected}"
    rate = 1 - len(misses) / len(accepted)
    print(f"conformance: {len(accepted) - len(misses)}/{len(accepted)} = {rate:.2%}")
    unexpected = {f: why for f, why in misses.items() if f not in KNOWN_MISSES}
    assert not unexpected, unexpected
    assert rate == 1.0


def test_known_misses_are_still_misses(outcomes: list[Outcome]) -> None:
    # When a fix lands, the list above must shrink with it.
    fixed = []
    for outcome in outcomes:
        if outcome.row["file"] in KNOWN_MISSES and outcome.module is not None:
            expected = (outcome.row["computations"], outcome.row["instructions"])
            if _counts(outcome.module) == expected:
                fixed.append(outcome.row["file"])
    assert not fixed, f"now parse correctly, drop from KNOWN_MISSES: {fixed}"


def test_operand_written_as_a_bare_shape_is_dropped_as_xla_does(corpus_dir: Path) -> None:
    # XLA's parser reads `add(f32[] %fusion, f32[], %res.23)` as add(%fusion, %res.23)
    # (its own to_string() prints that); MANIFEST.jsonl has its counts.
    root = corpus_dir / "hlo" / "xla"
    name = "xla__hlo__separate_compilation__hlo_module_splitting_test__4.hlo"
    row = next(
        json.loads(line)
        for line in (root / "MANIFEST.jsonl").read_text().splitlines()
        if json.loads(line)["file"] == name
    )
    module = parse_module((root / name).read_text(), file=name)
    assert _counts(module) == (row["computations"], row["instructions"])
    assert module.computation("main").get("res.f").operand_names == ["fusion", "res.23"]


def test_failures_are_only_hlo_syntax_errors(outcomes: list[Outcome]) -> None:
    others = [
        (o.row["file"], repr(o.error))
        for o in outcomes
        if o.error is not None and not isinstance(o.error, HloSyntaxError)
    ]
    assert not others
    for outcome in outcomes:
        if isinstance(outcome.error, HloSyntaxError):
            assert outcome.error.file == outcome.row["file"]
            assert outcome.error.reason


def test_some_modules_xla_rejects_are_rejected(outcomes: list[Outcome]) -> None:
    rejected = [o for o in outcomes if not o.row["xla_parses"]]
    assert rejected
    assert sum(o.error is not None for o in rejected) > len(rejected) // 4


def test_round_trip_gives_an_equal_model(outcomes: list[Outcome]) -> None:
    unequal = []
    for outcome in outcomes:
        if outcome.module is None:
            continue
        text = module_to_text(outcome.module)
        try:
            again = parse_module(text, file=outcome.row["file"])
        except HloSyntaxError as error:
            unequal.append((outcome.row["file"], str(error)[:200]))
            continue
        if again != outcome.module:
            unequal.append((outcome.row["file"], "differs"))
    assert not unequal, unequal[:10]


def test_integer_attributes_agree_with_the_shapes_they_index(outcomes: list[Outcome]) -> None:
    # Decoded dimension numbers must make sense of the operands XLA printed: a dot's
    # contracting dims pair equal sizes, a get-tuple-element's index picks its element's shape.
    from profan.hlo.graph import ModuleGraph
    from profan.hlo.views import int_attribute, int_list_attribute

    dots = elements = 0
    for outcome in outcomes:
        module = outcome.module
        if module is None or not outcome.row["xla_parses"]:
            continue
        name = outcome.row["file"]
        graph = ModuleGraph(module)
        for instruction in module.instructions():
            if instruction.opcode == "dot":
                lhs, rhs = graph.operand_shape(instruction, 0), graph.operand_shape(instruction, 1)
                if lhs is None or rhs is None or not (lhs.is_array and rhs.is_array):
                    continue
                left = int_list_attribute(instruction, "lhs_contracting_dims")
                right = int_list_attribute(instruction, "rhs_contracting_dims")
                assert len(left) == len(right), (name, instruction.name)
                assert [lhs.dims[d] for d in left] == [rhs.dims[d] for d in right]
                dots += 1
            elif instruction.opcode == "get-tuple-element" and not instruction.implicit:
                source = graph.operand_shape(instruction, 0)
                index = int_attribute(instruction, "index")
                if source is None or not source.is_tuple:
                    continue
                assert index is not None
                element = source.tuple_shapes[index]
                assert (element.dtype, element.dims) == (
                    instruction.shape.dtype,
                    instruction.shape.dims,
                ), (name, instruction.name)
                elements += 1
    assert dots > 500 and elements > 2000
    bare = parse_instruction("%t = f32[2]{0} transpose(%x), dimensions={1,0}")
    assert int_list_attribute(bare, "dimensions") == [1, 0]
    assert int_list_attribute(bare, "absent") == [] and int_attribute(bare, "index", 7) == 7


def test_mesh_form_groups_name_their_mesh(outcomes: list[Outcome]) -> None:
    from profan.hlo import parse_file
    from profan.hlo.devices import decode_replica_groups, replica_groups_mesh

    fixtures = FIXTURES_DIR
    modules = [o.module for o in outcomes if o.module is not None and o.row["xla_parses"]]
    modules += [parse_file(str(p)) for p in fixtures.glob("**/hlo/*after_optimizations.txt")]
    meshes = bad = 0
    for module in modules:
        for instruction in module.instructions():
            value = instruction.attributes.get("replica_groups")
            if value is None:
                continue
            mesh = replica_groups_mesh(value)
            if not value.lstrip().startswith(("mesh", "@mesh")):
                assert mesh is None
                continue
            assert mesh is not None and mesh.axis_names
            try:
                groups = decode_replica_groups(value)
            except HloSyntaxError:  # an axis the mesh does not have (a negative parser test)
                bad += 1
                continue
            # the groups partition the mesh's devices
            assert sorted(d for g in groups for d in g) == sorted(mesh.device_ids)
            meshes += 1
    assert meshes >= 12 and bad <= 2


def test_slice_ranges_give_the_printed_result_dims(outcomes: list[Outcome]) -> None:
    # slice={[start:limit:stride], ...} decoded: ceil((limit - start) / stride) per dim is the
    # result XLA printed, on every slice of every module XLA accepts.
    from profan.hlo.graph import ModuleGraph
    from profan.hlo.views import slice_ranges

    slices = 0
    for outcome in outcomes:
        if outcome.module is None or not outcome.row["xla_parses"]:
            continue
        graph = ModuleGraph(outcome.module)
        for instruction in outcome.module.instructions():
            if instruction.opcode != "slice":
                continue
            operand = graph.operand_shape(instruction, 0)
            ranges = slice_ranges(instruction)
            assert operand is not None and len(ranges) == operand.rank, instruction.name
            dims = tuple(-(-(limit - start) // stride) for start, limit, stride in ranges)
            assert dims == instruction.shape.dims, (outcome.row["file"], instruction.name)
            slices += 1
    assert slices > 1000


def _dims_of(shape: object) -> object:
    if getattr(shape, "is_tuple", False):
        return tuple(_dims_of(s) for s in shape.tuple_shapes)  # type: ignore[attr-defined]
    return shape.dims  # type: ignore[attr-defined]


def test_shape_inference_agrees_with_the_shapes_xla_printed(outcomes: list[Outcome]) -> None:
    # Every instruction XLA could have left shapeless but printed with a shape: what profan
    # would infer from its operands and attributes (window, dim_labels, padding, dot dims,
    # gather dims, …) equals the printed shape.  Broadcast is left out: XLA's parser infers it
    # by prepending `dimensions` (see profan.hlo.inference), which printed broadcasts do not.
    from profan.hlo.graph import ModuleGraph
    from profan.hlo.inference import SHAPE_INFERABLE_OPCODES, infer_shape
    from profan.hlo.shapes import is_unknown

    equal = dtype_only = 0
    differ = []
    for outcome in outcomes:
        if outcome.module is None or not outcome.row["xla_parses"]:
            continue
        graph = ModuleGraph(outcome.module)

        def root_of(name: str, graph: ModuleGraph = graph) -> object:
            found = graph.computation(name)
            return found.root.shape if found is not None else None

        for instruction in outcome.module.instructions():
            if instruction.opcode not in SHAPE_INFERABLE_OPCODES or instruction.implicit:
                continue
            if instruction.opcode == "broadcast":
                continue
            operands = graph.operand_shapes(instruction)
            if any(shape is None or is_unknown(shape) for shape in operands):
                continue
            inferred = infer_shape(instruction, operands, root_of)  # type: ignore[arg-type]
            if inferred == instruction.shape or (
                _dims_of(inferred) == _dims_of(instruction.shape)
                and inferred.dtype == instruction.shape.dtype
            ):
                equal += 1
            elif _dims_of(inferred) == _dims_of(instruction.shape):
                dtype_only += 1  # the text chose the result type (a dot's preferred type, …)
            else:
                differ.append((outcome.row["file"], instruction.name))
    print(f"inference vs printed: {equal} equal, {dtype_only} other type, {len(differ)} differ")
    assert equal > 78_000
    assert dtype_only < 200
    # hand-written modules whose printed shapes contradict their operands (verifier tests, a
    # 3-d convolution whose padded window leaves no output, async wrappers of mismatched calls)
    assert len(differ) <= 13, differ

"""Names resolved as XLA's parser resolves them (profan.hlo.resolve):

* an operand that names no instruction is an ``HloSyntaxError`` at XLA's line and column;
* ``%name#N`` is the get-tuple-element XLA's IR has: on the real GPU dumps the module with its
  implicit elements is the one the profiler's HloProto records;
* computations profan makes (inline attributes, async wrappers) never clash with written ones,
  and blanks that XLA's lexer skips are skipped.
With jax installed, XLA's own parser confirms the synthetic texts are ones it accepts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import parse_file, parse_module
from profan.hlo.model import Computation, Module
from profan.hlo.printer import module_to_text
from profan.trace import load
from tests.conftest import FIXTURES_DIR, gpu_fixtures


def _xla_counts(text: str) -> tuple[int, int] | None:
    """(computations, instructions) as XLA's parser sees ``text``; None without jax."""
    try:
        from jax._src.lib import xla_client
    except ImportError:
        return None
    module = xla_client.hlo.hlo_module_from_text(text)
    computations = list(module.computations())
    return len(computations), sum(len(c.instructions()) for c in computations)


def _counts(module: Module) -> tuple[int, int]:
    return len(module.computations), sum(len(c) for c in module.computations)


@pytest.mark.corpus
def test_undefined_names_are_errors_where_xla_reports_them(corpus_dir: Path) -> None:
    root = corpus_dir / "hlo" / "xla"
    rows = {
        json.loads(line)["file"]: json.loads(line)
        for line in (root / "MANIFEST.jsonl").read_text().splitlines()
    }
    # Modules XLA rejects because a name is not defined in its computation: an operand
    # (`tuple(power)` where `pow` was meant; `aparam` of another computation) or a control
    # predecessor (`control-predecessors={%done}`).
    cases = {
        "xla__hlo__parser__hlo_parser_test__316.hlo": "instruction does not exist: power",
        "xla__hlo__parser__hlo_parser_test__287.hlo": "instruction does not exist: aparam",
        "xla__hlo__parser__hlo_parser_test__256.hlo": "instruction 'done' is not defined",
    }
    for name, reason in cases.items():
        row = rows[name]
        assert not row["xla_parses"]
        xla_line, xla_column = map(
            int, re.search(r"parsing (\d+):(\d+)", row["xla_error"]).groups()
        )
        with pytest.raises(HloSyntaxError) as caught:
            parse_module((root / name).read_text(), file=name)
        error = caught.value
        assert error.reason == reason and error.file == name
        assert error.line == xla_line
        if "does not exist" in reason:  # XLA points at the operand itself
            assert error.column == xla_column
        else:  # XLA points just past `%done`; profan at its start
            assert error.column == xla_column - len("%done")
        assert error.text and "^" in str(error)


def test_synthetic_operand_of_another_computation_is_an_error() -> None:
    text = (
        "HloModule m\nc { p = f32[] parameter(0)\n  ROOT q = f32[] negate(p) }\n"
        "ENTRY e { x = f32[] parameter(0)\n  ROOT y = f32[] add(x, q) }\n"
    )
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(text)
    assert (caught.value.line, caught.value.column) == (5, 25)  # the `q` in add(x, q)
    assert caught.value.reason == "instruction does not exist: q"


@pytest.mark.parametrize(
    "fixture", [*gpu_fixtures("gpu_transformer"), *gpu_fixtures("gpu_transformer_nocb")]
)
def test_tuple_elements_of_the_gpu_dump_are_the_hloproto_ones(fixture: str) -> None:
    # JAX 0.11.2 prints `%arg_tuple.1#26` where the IR has a get-tuple-element: with the
    # elements made explicit, the module is the one the profiler's HloProto holds, instruction
    # for instruction, operand for operand.
    dump = next((FIXTURES_DIR / fixture / "hlo").glob("*after_optimizations.txt"))
    text_module = parse_file(str(dump))
    proto = next(
        m
        for m in load(str(FIXTURES_DIR / fixture / "trace")).modules.values()
        if m.name == text_module.name
    )
    assert _counts(text_module) == _counts(proto)
    implicit = [i for i in text_module.instructions() if i.implicit]
    elements = [i for i in proto.instructions() if i.opcode == "get-tuple-element"]
    assert len(implicit) == len(elements) > 100
    if fixture == "gpu_transformer":
        assert _counts(text_module)[1] == 1379 and len(implicit) == 127
    for computation in proto.computations:
        ours = text_module.computation(computation.name)
        assert len(ours) == len(computation)
        for instruction in computation:
            if instruction.opcode == "get-tuple-element":
                continue
            mine = ours[instruction.name]
            assert [_key(ours, o) for o in mine.operand_names] == [
                _key(computation, o) for o in instruction.operand_names
            ], instruction.name


def _key(computation: Computation, name: str) -> tuple:
    """An operand as what it reads: a get-tuple-element becomes (source, index), recursively."""
    found = computation.get(name)
    if found is None or found.opcode != "get-tuple-element":
        return (name,)
    return (*_key(computation, found.operand_names[0]), int(found.attributes["index"]))


def test_synthetic_nested_tuple_elements_and_their_errors() -> None:
    # `%p0#1#0` reads element 0 of element 1 (XLA's lexer test LexCompactGte has this form).
    base = "HloModule m\nENTRY e {\n  p0 = (f32[10], (f32[20], f32[30])) parameter(0)\n"
    module = parse_module(base + "  ROOT r = f32[20] negate(f32[20] %p0#1#0)\n}\n")
    assert [(i.name, i.opcode, i.implicit) for i in module.entry] == [
        ("p0", "parameter", False),
        ("p0#1", "get-tuple-element", True),
        ("p0#1#0", "get-tuple-element", True),
        ("r", "negate", False),
    ]
    assert module.entry["p0#1#0"].shape.dims == (20,)
    assert parse_module(module_to_text(module)) == module
    for bad, reason in (("%p0#2", "no element 2"), ("%p0#0#0", "is not a tuple")):
        with pytest.raises(HloSyntaxError) as caught:
            parse_module(base + f"  ROOT r = f32[20] negate({bad})\n}}\n")
        assert reason in caught.value.reason and caught.value.line == 4


def test_synthetic_generated_computation_names_never_clash() -> None:
    # Two computations each with an instruction `r` whose reducer is written inline, and a
    # written computation named like profan's wrapper of an async sugar: XLA names the inline
    # computations itself and accepts the module, so profan must too.
    text = """HloModule m
first {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT s = f32[] add(x, y)
  }
}
wrapped_add.start {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
ENTRY second {
  a = f32[4] parameter(0)
  z = f32[] constant(0)
  r = f32[] reduce(a, z), dimensions={0}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT s = f32[] maximum(x, y)
  }
  c = f32[] call(r), to_apply=wrapped_add.start
  start = ((f32[], f32[]), f32[], u32[]) add-start(r, c)
  ROOT done = f32[] add-done(start)
}
"""
    module = parse_module(text)
    names = [c.name for c in module.computations]
    assert len(names) == len(set(names)) == 6
    first, second = module.computation("first"), module.computation("second")
    reducers = {
        module.computation(i["r"].attributes["to_apply"]).root.opcode for i in (first, second)
    }
    assert reducers == {"add", "maximum"}
    assert module.computation(second["c"].attributes["to_apply"]).root.opcode == "negate"
    wrapper = module.computation(second["start"].attributes["calls"])
    assert wrapper.root.opcode == "add" and wrapper.name != "wrapped_add.start"
    assert second["done"].attributes["calls"] == second["start"].attributes["calls"]
    assert parse_module(module_to_text(module)) == module
    assert _xla_counts(text) in (None, _counts(module))
    duplicate = text.replace("wrapped_add.start {", "first {").replace(
        "=wrapped_add.start", "=first"
    )
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(duplicate)
    assert caught.value.reason == "computation first is defined twice" and caught.value.line == 11


_BASE = """HloModule m, is_scheduled=true

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  z = f32[] constant(0)
  r = f32[2]{0} reduce(p, z), dimensions={1}, to_apply=add
  ROOT x = f32[2,3]{1,0} add(p, p)
}
"""
# Blanks and comments XLA's lexer skips between tokens (hlo_lexer.cc skips them everywhere; a
# '{' after a shape is its layout when an integer or ':' follows).
_SPACED = {
    "blank between dtype and dims": ("f32[2,3]{1,0} add", "f32 [2,3]{1,0} add"),
    "line break inside dims": ("f32[2,3]{1,0} add", "f32[2,\n  3]{1,0} add"),
    "line break before the layout": ("f32[2,3]{1,0} add", "f32[2,3]\n  {1,0} add"),
    "comment before the layout": ("f32[2,3]{1,0} add", "f32[2,3] /* layout */ {1,0} add"),
    "blanks inside the layout": ("f32[2,3]{1,0} add", "f32[2,3]{ 1 , 0 } add"),
    "blanks around operands": ("add(p, p)", "add( p ,p )"),
    "blank after an attribute's =": ("dimensions={1}", "dimensions= {1}"),
    "attributes on their own lines": (
        "), dimensions={1}, to_apply",
        "),\n    dimensions={1},\n    to_apply",
    ),
    "ROOT on its own line": ("ROOT x", "ROOT\n  x"),
    "entry brace on the next line": ("ENTRY main {", "ENTRY main\n{"),
    "windows line ends": ("\n", "\r\n"),
    "tabs": ("  ", "\t"),
}


@pytest.mark.parametrize("name", sorted(_SPACED))
def test_synthetic_blanks_xla_skips_are_skipped(name: str) -> None:
    old, new = _SPACED[name]
    assert old in _BASE
    text = (
        _BASE.replace(old, new)
        if name in ("windows line ends", "tabs")
        else _BASE.replace(old, new, 1)
    )
    module = parse_module(text)
    assert module == parse_module(_BASE)
    assert _xla_counts(text) in (None, _counts(module))

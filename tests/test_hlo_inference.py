"""Shapes the text leaves out are inferred as XLA's parser infers them (profan.hlo.inference).

The reference is XLA itself: with jax installed, every corpus module XLA accepts that writes an
instruction without its shape is parsed by XLA's C++ parser and printed back, and each inferred
shape must equal XLA's.  Hand-checked synthetic cases cover the formulas.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import parse_instruction, parse_module
from profan.hlo.model import Shape
from profan.hlo.shapes import is_unknown

# `name = opcode(`: an instruction printed without its shape.
_SHAPELESS = re.compile(r"(?m)^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*([a-z][\w\-]*)\(")


def _dims(shape: Shape) -> object:
    if shape.is_tuple:
        return ("tuple", tuple(_dims(s) for s in shape.tuple_shapes))
    return (shape.dtype, shape.dims)


@pytest.mark.corpus
def test_inferred_shapes_equal_xla_parser(corpus_dir: Path) -> None:
    pytest.importorskip("jax", reason="jax is not installed: XLA's parser is the reference")
    from jax._src.lib import xla_client

    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    equal, differ = 0, []
    for row in rows:
        if not row["xla_parses"]:
            continue
        text = (root / row["file"]).read_text()
        shapeless = {m.group(1) for m in _SHAPELESS.finditer(text) if m.group(2) != "b"}
        if not shapeless:
            continue
        ours = parse_module(text)
        xla = parse_module(xla_client.hlo.hlo_module_from_text(text).to_string())
        for computation in ours.computations:
            try:
                reference = xla.computation(computation.name)
            except KeyError:
                continue  # XLA renamed it (inline and async wrapper computations)
            mine = computation.instructions
            if [i.opcode for i in mine] == [i.opcode for i in reference.instructions]:
                pairs = list(zip(mine, reference.instructions, strict=True))
            else:  # XLA reordered it: names (XLA may rename a repeated one: then skipped)
                pairs = [(i, reference.get(i.name)) for i in mine]
            for instruction, theirs in pairs:
                if instruction.name not in shapeless or theirs is None:
                    continue
                if _dims(instruction.shape) == _dims(theirs.shape):
                    equal += 1
                else:
                    differ.append((row["file"], instruction.name))
    # XLA gives a recv-done the shape of its recv whatever the text says; this hand-written
    # test module prints a recv-done shape that disagrees with its recv, and profan keeps the
    # text's: the get-tuple-element after it differs.
    assert differ == [("xla__hlo__translate__hlo_to_mhlo__tests__import_async__14.hlo", "gte")]
    assert equal > 500


def _parse_one(body: str, params: str) -> Shape:
    module = parse_module(f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {body}\n}}\n")
    return module.entry.root.shape


def test_synthetic_formulas_checked_by_hand() -> None:
    # broadcast: XLA's parser infers with InferBroadcastShape(operand, dimensions), which puts
    # the listed sizes *before* the operand's dims: f32[3] with dimensions={1} -> f32[1,3].
    assert _dims(_parse_one("broadcast(p), dimensions={1}", "  p = f32[3] parameter(0)")) == (
        "f32",
        (1, 3),
    )
    # convolution b01f_01io->b01f: input 5x5, kernel 3x3, pad 1 each side, stride 2:
    # (5 + 1 + 1 - 3) // 2 + 1 = 3 positions per spatial dim; 4 output features.
    conv = _parse_one(
        "convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
        "  x = f32[1,5,5,2] parameter(0)\n  k = f32[3,3,2,4] parameter(1)",
    )
    assert _dims(conv) == ("f32", (1, 3, 3, 4))
    # reduce-window 2x2 stride 2 over 6x4 with no padding: (6-2)//2+1 = 3, (4-2)//2+1 = 2
    window = _parse_one(
        "reduce-window(x, z), window={size=2x2 stride=2x2}, to_apply=add",
        "  x = f32[6,4] parameter(0)\n  z = f32[] constant(0)",
    )
    assert _dims(window) == ("f32", (3, 2))
    # pad 1 low, 2 high, 1 interior on 3 elements: 1 + 3 + 2 (interior) + 2 = 8
    assert _dims(
        _parse_one("pad(x, z), padding=1_2_1", "  x = f32[3] parameter(0)\n  z = f32[] constant(0)")
    ) == ("f32", (8,))
    # gather rows of a [10,8] table with [5,1] indices, slice 1x8, dim 0 collapsed -> [5,8]
    gathered = _parse_one(
        "gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,8}",
        "  t = f32[10,8] parameter(0)\n  i = s32[5,1] parameter(1)",
    )
    assert _dims(gathered) == ("f32", (5, 8))
    # rfft of length 16 over the last dim: 16 // 2 + 1 = 9 complex outputs
    assert _dims(
        _parse_one("fft(x), fft_type=RFFT, fft_length={16}", "  x = f32[4,16] parameter(0)")
    ) == ("c64", (4, 9))
    # topk k=3 of [2,10]: values and s32 indices [2,3]
    assert _dims(_parse_one("topk(x), k=3", "  x = bf16[2,10] parameter(0)")) == (
        "tuple",
        (("bf16", (2, 3)), ("s32", (2, 3))),
    )
    # a variadic reduce over dim 1 of two [4,6] arrays: a tuple of two [4]
    reduced = _parse_one(
        "reduce(a, b, z, w), dimensions={1}, to_apply=pair",
        "  a = f32[4,6] parameter(0)\n  b = s32[4,6] parameter(1)\n"
        "  z = f32[] constant(0)\n  w = s32[] constant(0)",
    )
    assert _dims(reduced) == ("tuple", (("f32", (4,)), ("s32", (4,))))


def test_synthetic_unknown_only_when_it_cannot_be_known() -> None:
    # A single line names operands it does not define: their shapes are unknown, so is the sum.
    line = parse_instruction("%a = add(%x, %y)")
    assert is_unknown(line.shape)
    assert not is_unknown(parse_instruction("%a = add(f32[2]{0} %x, f32[2]{0} %y)").shape)


def test_a_shape_xla_cannot_infer_is_a_syntax_error_at_the_opcode() -> None:
    # XLA: "cannot infer shape for opcode: fusion" (fusion, custom-call, parameter, … need it)
    text = (
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT f = fusion(p), kind=kLoop\n}\n"
    )
    with pytest.raises(HloSyntaxError) as caught:
        parse_module(text)
    assert (caught.value.line, caught.value.column) == (4, 12)
    assert "cannot infer shape for opcode: fusion" in caught.value.reason

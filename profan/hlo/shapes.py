"""Array shapes and layouts: decoding one shape token's text, and printing a ``Shape`` back.

A dump repeats the same few hundred shapes tens of thousands of times, so decoding is memoised
per distinct text.  The common forms (``f32[8,128]{1,0}``, ``bf16[8]{0:T(8,128)(2,1)S(1)}``) go
through one regular expression; anything else goes through the full shape grammar
(``grammars/hlo_shape.lark``), which is also the reference the fast path is tested against.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, cast

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError

from profan.errors import HloSyntaxError
from profan.hlo.model import UNBOUNDED_DIM, Layout, Shape
from profan.hlo.tokens import too_long
from profan.paths import open_grammar

# dtype[static dims]{minor_to_major[:tiles][E(n)][S(n)]}: the forms nearly every shape takes.
# Anything else, malformed lists of integers included (`{1,,0}`), goes to the grammar.
_INTS = r"(?:\d+(?:,\d+)*)?"
_FAST_SHAPE = re.compile(
    rf"([a-z][a-z0-9]*)\[({_INTS})\]"
    rf"(?:\{{({_INTS})(?::((?:T(?:\({_INTS}\))+)?)(?:E\((\d+)\))?(?:S\((\d+)\))?)?\}})?"
)
_TILE = re.compile(r"\(([\d,]*)\)")

_SHAPE_PARSER: Lark | None = None


def _int(text: str) -> int:
    """One integer of a shape; a number too long to convert is a syntax error (one beyond
    int64 is the verifier's: its message names the dimension)."""
    reason = too_long(text)
    if reason is not None:
        raise HloSyntaxError(reason, text=text[:40] + "…")
    return int(text)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(_int(part) for part in text.split(",")) if text else ()


def _fast_decode(text: str) -> Shape | None:
    match = _FAST_SHAPE.fullmatch(text)
    if match is None:
        return None
    dtype, dims_text, m2m_text, tiles_text, element_text, space_text = match.groups()
    dims = _ints(dims_text)
    if m2m_text is None:
        return Shape(dtype, dims, (False,) * len(dims), None)
    tiles = tuple(_ints(tile) for tile in _TILE.findall(tiles_text)) if tiles_text else ()
    layout = Layout(
        minor_to_major=_ints(m2m_text),
        tiles=tiles,
        element_size_bits=_int(element_text) if element_text is not None else None,
        memory_space=_int(space_text) if space_text is not None else 0,
    )
    return Shape(dtype, dims, (False,) * len(dims), layout)


class _ShapeBuilder(Transformer[Token, Shape]):
    """Builds a ``Shape`` from the tree of ``hlo_shape.lark``."""

    def start(self, children: list[Shape]) -> Shape:
        return children[0]

    def array_shape(self, children: list[Any]) -> Shape:
        dtype = str(children[0])
        dims: list[int] = []
        dynamic: list[bool] = []
        layout = None
        for child in children[1:]:
            if isinstance(child, Layout):
                layout = child
            elif child is not None:
                dims.append(child[0])
                dynamic.append(child[1])
        return Shape(dtype, tuple(dims), tuple(dynamic), layout)

    def static_dim(self, children: list[Any]) -> tuple[int, bool]:
        return int(children[0]), False

    def bounded_dim(self, children: list[Any]) -> tuple[int, bool]:
        return int(children[0]), True

    def unbounded_dim(self, children: list[Any]) -> tuple[int, bool]:
        return UNBOUNDED_DIM, True

    def layout(self, children: list[Any]) -> Layout:
        minor_to_major = tuple(int(c) for c in children if isinstance(c, Token))
        fields: dict[str, Any] = {"tiles": [], "dim_level_types": (), "split_configs": []}
        for child in children:
            if (
                isinstance(child, tuple)
                and child
                and isinstance(child[0], str)
                and child[0][0] == "_"
            ):
                key, value = child
                if key == "_tiles":
                    fields["tiles"].extend(value)
                elif key == "_split_config":
                    fields["split_configs"].append(value)
                else:
                    fields[key[1:]] = value
        fields["tiles"] = tuple(fields["tiles"])
        fields["split_configs"] = tuple(fields["split_configs"])
        return Layout(minor_to_major=minor_to_major, **fields)

    def dim_levels(self, children: list[Any]) -> tuple[str, tuple[str, ...]]:
        return "_dim_level_types", tuple(str(c) for c in children if c is not None)

    def tiles(self, children: list[Any]) -> tuple[str, tuple[Any, ...]]:
        return "_tiles", tuple(children)

    def tile(self, children: list[Any]) -> tuple[int | None, ...]:
        return tuple(None if str(c) == "*" else int(c) for c in children if c is not None)

    def tail_padding(self, children: list[Any]) -> tuple[str, int]:
        return "_tail_padding_alignment", int(children[0])

    def index_type(self, children: list[Any]) -> tuple[str, str]:
        return "_index_primitive_type", str(children[0])

    def pointer_type(self, children: list[Any]) -> tuple[str, str]:
        return "_pointer_primitive_type", str(children[0])

    def element_size(self, children: list[Any]) -> tuple[str, int]:
        return "_element_size_bits", int(children[0])

    def memory_space(self, children: list[Any]) -> tuple[str, int]:
        return "_memory_space", int(children[0])

    def split_config(self, children: list[Any]) -> tuple[str, str]:
        values = [str(c) for c in children if c is not None]
        return "_split_config", f"{values[0]}:{','.join(values[1:])}"

    def physical_shape(self, children: list[Any]) -> tuple[str, Shape]:
        return "_physical_shape", children[0]

    def metadata_prefix(self, children: list[Any]) -> tuple[str, int]:
        return "_dynamic_shape_metadata_prefix_bytes", int(children[0])


def _shape_parser() -> Lark:
    global _SHAPE_PARSER
    if _SHAPE_PARSER is None:
        _SHAPE_PARSER = open_grammar(
            "hlo_shape.lark",
            parser="lalr",
            transformer=_ShapeBuilder(),
            maybe_placeholders=True,
        )
    return _SHAPE_PARSER


def decode_shape_by_grammar(text: str) -> Shape:
    """Decode with the full shape grammar (no fast path); raises ``HloSyntaxError``."""
    try:
        # _ShapeBuilder's result (lark types parse() as the Tree it returns untransformed)
        return cast(Shape, _shape_parser().parse(text))
    except LarkError as error:
        column = getattr(error, "column", None)
        raise HloSyntaxError(f"bad shape {text!r}", column=column, text=text) from None


@lru_cache(maxsize=65536)
def decode_shape(text: str) -> Shape:
    """The ``Shape`` of one array shape token (memoised; shapes are immutable)."""
    return _fast_decode(text) or decode_shape_by_grammar(text)


def _dim_text(size: int, dynamic: bool) -> str:
    if not dynamic:
        return str(size)
    # An unbounded dimension is -1 in profan's model and INT64_MIN in XLA's ShapeProto.
    return "?" if size < 0 else f"<={size}"


def layout_to_text(layout: Layout) -> str:
    """``{minor_to_major:items}`` in the order XLA prints the items."""
    items: list[str] = []
    if layout.dim_level_types:
        items.append(f"D({','.join(layout.dim_level_types)})")
    if layout.tiles:
        items.append(
            "T"
            + "".join(
                "(" + ",".join("*" if d is None else str(d) for d in tile) + ")"
                for tile in layout.tiles
            )
        )
    if layout.tail_padding_alignment is not None:
        items.append(f"L({layout.tail_padding_alignment})")
    if layout.index_primitive_type is not None:
        items.append(f"#({layout.index_primitive_type})")
    if layout.pointer_primitive_type is not None:
        items.append(f"*({layout.pointer_primitive_type})")
    if layout.element_size_bits is not None:
        items.append(f"E({layout.element_size_bits})")
    if layout.memory_space:
        items.append(f"S({layout.memory_space})")
    items.extend(f"SC({config})" for config in layout.split_configs)
    if layout.physical_shape is not None:
        items.append(f"P({shape_to_text(layout.physical_shape)})")
    if layout.dynamic_shape_metadata_prefix_bytes is not None:
        items.append(f"M({layout.dynamic_shape_metadata_prefix_bytes})")
    items.extend(layout.other)
    text = ",".join(str(d) for d in layout.minor_to_major)
    if items:
        text += ":" + "".join(items)
    return "{" + text + "}"


def shape_to_text(shape: Shape) -> str:
    """The shape as XLA prints it (tuples as ``(a, b)``)."""
    if shape.is_tuple:
        return "(" + ", ".join(shape_to_text(s) for s in shape.tuple_shapes) + ")"
    dynamic = shape.dynamic or (False,) * len(shape.dims)
    dims = ",".join(_dim_text(s, d) for s, d in zip(shape.dims, dynamic, strict=False))
    text = f"{shape.dtype}[{dims}]"
    if shape.layout is not None:
        text += layout_to_text(shape.layout)
    return text


def is_unknown(shape: Shape | None) -> bool:
    """Whether the shape (or any element of a tuple) is one the text left out and profan could
    not infer: its size is unknown, so any cost that depends on it is unknown too."""
    if shape is None:
        return False
    if shape.dtype == "unknown":
        return True
    return shape.is_tuple and any(is_unknown(element) for element in shape.tuple_shapes)

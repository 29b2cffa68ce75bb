"""Decode an MLIR attribute dictionary (``grammars/mlir_attributes.lark``) into Python values.

Typed-FFI custom calls print their backend config this way instead of as JSON, e.g.
TransformerEngine's fused attention ``{attn_heads = 16 : i64, input_batch = 2 : i64, ...}``.
Integers, floats, booleans, strings, arrays and nested dictionaries become Python values; any
other attribute is kept as its text; a unit attribute (a key alone) is ``True``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError

from profan.paths import open_grammar

# MLIR string escapes: two hex digits (``\22`` is '"'), or a backslash, quote, n or t.
_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2}|[\\\"nt])")
_SIMPLE = {"\\": "\\", '"': '"', "n": "\n", "t": "\t"}


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        return _SIMPLE.get(code) or chr(int(code, 16))

    return _ESCAPE.sub(replace, text)


class _Values(Transformer[Token, Any]):
    def start(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return items[0]

    def dict(self, items: list[Any]) -> dict[str, Any]:
        return dict(item for item in items if item is not None)

    def pair(self, items: list[Any]) -> tuple[str, Any]:
        return items[0], items[1]

    def unit(self, items: list[Any]) -> tuple[str, Any]:
        return items[0], True

    def key(self, items: list[Any]) -> str:
        text = str(items[0])
        return _unescape(text[1:-1]) if text.startswith('"') else text

    def string(self, items: list[Any]) -> str:
        return _unescape(str(items[0])[1:-1])

    def integer(self, items: list[Any]) -> int:
        return int(str(items[0]), 0)

    def float(self, items: list[Any]) -> float:
        return float(str(items[0]))

    def true(self, _items: list[Any]) -> bool:
        return True

    def false(self, _items: list[Any]) -> bool:
        return False

    def other(self, items: list[Any]) -> str:
        return str(items[0])

    def array(self, items: list[Any]) -> list[Any]:
        return [item for item in items if not _is_type(item)]

    def type_suffix(self, items: list[Any]) -> _Type:
        return _Type(str(items[0]))


class _Type(str):
    """A ``: type`` suffix; dropped from values."""


def _is_type(item: Any) -> bool:
    return isinstance(item, _Type)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return open_grammar("mlir_attributes.lark", parser="lalr")


def decode_attribute_dict(text: str) -> dict[str, Any] | None:
    """``{key = value : type, ...}`` -> a dict; ``None`` when the text is not such a dictionary."""
    text = text.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        tree = _parser().parse(text)
    except LarkError:
        return None
    values = _Values().transform(tree)
    return values if isinstance(values, dict) else None

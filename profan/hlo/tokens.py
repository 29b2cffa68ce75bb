"""Token text helpers shared by the HLO parser and its model builder.

Every terminal of ``grammars/hlo.lark`` starts with its lead (the blanks and comments before
it); these helpers strip it, split ``, key=value`` attribute tokens, drop comments outside
quoted strings and turn a token into a positioned ``HloSyntaxError``.
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token

from profan.errors import HloSyntaxError

# What the grammar's _LEAD matches: blanks and comments before a token.
LEAD = re.compile(r"(?:\s++|/\*(?:[^*]|\*(?!/))*+\*/|//[^\n]*+)*+")
LEAD_CHARS = frozenset(" \t\r\n\f\v/")
COMMENT = re.compile(r"/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*")
COMMENT_OR_STRING = re.compile(r'("(?:[^"\\]|\\.)*")|/\*(?:[^*]|\*(?!/))*\*/|//[^\n]*')
INT_FIELD = re.compile(r"(\w+)=(-?\d+)")


def is_token(item: Any) -> bool:
    return hasattr(item, "type") and hasattr(item, "value")


def value_of(token: Any) -> str:
    """A token's text (Lark's tokens are str; lark-cython's carry it in ``value``)."""
    return token if type(token) is str else token.value


def bare(token: Any) -> str:
    """A token's text without the blanks and comments the grammar lets lead it."""
    text = token if type(token) is str else token.value
    if text and text[0] in LEAD_CHARS:
        text = text[LEAD.match(text).end() :]  # type: ignore[union-attr]
    return text


def split_attr(token: Token) -> tuple[str, str]:
    text = bare(token)[1:]  # drop the ','
    if text and text[0] in LEAD_CHARS:
        text = bare(text)
    equals = text.index("=")
    value = text[equals + 1 :]
    if value and value[0] in LEAD_CHARS:
        value = bare(value)  # blanks and comments between '=' and the value
    value = value.rstrip()
    if "/*" in value or "//" in value:
        value = strip_comments(value)
    return text[:equals].rstrip(), value


def strip_comments(text: str) -> str:
    """``text`` without the comments outside its quoted strings (XLA prints ``/*index=5*/``
    inside long braced values; comments are not part of a value)."""
    return COMMENT_OR_STRING.sub(lambda m: m.group(1) or "", text)


def int_fields(token: Token) -> dict[str, int]:
    return {key: int(value) for key, value in INT_FIELD.findall(value_of(token))}


def id_table(children: list[Any], convert: Any) -> dict[int, Any]:
    rows: dict[int, Any] = {}
    for id_token, value in zip(children[1::2], children[2::2], strict=True):
        rows[int(bare(id_token))] = convert(bare(value))
    return rows


def position(token: Any) -> tuple[int | None, int | None]:
    """Line and column of a token's text proper (after its leading blanks and comments)."""
    line = getattr(token, "line", None)
    column = getattr(token, "column", None)
    text = value_of(token)
    if line is None or column is None or not text or text[0] not in LEAD_CHARS:
        return line, column
    lead = text[: LEAD.match(text).end()]  # type: ignore[union-attr]
    newlines = lead.count("\n")
    if newlines:
        return line + newlines, len(lead) - lead.rindex("\n")
    return line, column + len(lead)


def error_at(token: Any, reason: str) -> HloSyntaxError:
    line, column = position(token)
    return HloSyntaxError(reason, line=line, column=column)

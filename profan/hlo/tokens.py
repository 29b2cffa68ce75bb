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
# XLA reads the integers of ids, lines and columns as int64.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# Python converts at most 4,300 digits to an int (sys.int_info.default_max_str_digits); a
# number longer than that is refused before any conversion.
MAX_INT_DIGITS = 4300


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


def too_long(digits: str) -> str | None:
    """Why an integer's text is refused before it is converted, or ``None``."""
    count = len(digits) - (digits[:1] in ("-", "+"))
    return f"number too long ({count} digits)" if count > MAX_INT_DIGITS else None


def int64_at(token: Any, text: str, offset: int = 0) -> int:
    """The int64 written as ``text`` at ``offset`` in ``token``'s text proper; a
    positioned ``HloSyntaxError`` when it is too long or beyond int64 (as XLA's parser)."""
    reason = too_long(text)
    if reason is None:
        value = int(text)
        if INT64_MIN <= value <= INT64_MAX:
            return value
        reason = f"{text} is beyond int64"
    raise error_at(token, reason, offset)


def int_fields(token: Token) -> dict[str, int]:
    text = bare(token)
    return {
        match.group(1): int64_at(token, match.group(2), match.start(2))
        for match in INT_FIELD.finditer(text)
    }


def id_table(children: list[Any], convert: Any) -> dict[int, Any]:
    rows: dict[int, Any] = {}
    for id_token, value in zip(children[1::2], children[2::2], strict=True):
        rows[int64_at(id_token, bare(id_token).rstrip())] = convert(value)
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


def error_at(token: Any, reason: str, offset: int = 0) -> HloSyntaxError:
    """A syntax error at ``token`` (``offset`` characters into its text proper)."""
    line, column = position(token)
    if offset and line is not None and column is not None:
        before = bare(token)[:offset]
        newlines = before.count("\n")
        if newlines:
            line, column = line + newlines, len(before) - before.rindex("\n")
        else:
            column += offset
    return HloSyntaxError(reason, line=line, column=column)

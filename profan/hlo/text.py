"""Quoted strings in HLO text: XLA prints them C-escaped (``\\"``, ``\\\\``, ``\\n``, octal)."""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.DOTALL)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _replace(match: re.Match[str]) -> str:
    octal, hexa, char = match.groups()
    if octal is not None:
        return chr(int(octal, 8))
    if hexa is not None:
        return chr(int(hexa, 16))
    return _SIMPLE.get(char, char)


def unquote(text: str) -> str:
    """The value of a ``"..."`` string token (quotes removed, escapes resolved)."""
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]
    if "\\" not in text:
        return text
    return _ESCAPE.sub(_replace, text)


def quote(value: str) -> str:
    """``value`` as a ``"..."`` string token, escaped as XLA's printer escapes it (``CEscape``:
    backslash, both quotes, ``\\n \\r \\t``, other control characters in octal); ``unquote``
    reads it back unchanged."""
    return '"' + value.translate(_C_ESCAPES) + '"'


_C_ESCAPES = {code: f"\\{code:03o}" for code in (*range(0x20), 0x7F)} | {
    ord("\\"): "\\\\",
    ord('"'): '\\"',
    ord("'"): "\\'",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    ord("\t"): "\\t",
}

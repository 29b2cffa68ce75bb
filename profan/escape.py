"""Names from a trace are data: how each output form shows any text without being steered by it.

Op names, scopes, source paths and program names come from the trace and its HLO, which anyone
can write; a newline in a name would start a line of its own (``PASS  all: ok``), an ESC or OSC
sequence would drive the reader's terminal or CI log, ``<svg onload=…>`` would be markup in a
Markdown page.  Each function here shows one string safely in one form; ordinary names (printable
text without the form's special characters) come back unchanged, so the output of ordinary
traces is byte-for-byte what it was.

* ``terminal`` — every character that is not printable (C0 and C1 controls with ESC, CR, LF,
  DEL, line separators, format characters) as a visible escape: ``\\n``, ``\\x1b``, ``\\u202e``;
* ``markdown_text`` / ``markdown_code`` — plain Markdown text, or a code span (a fence longer
  than any run of backticks inside), inside a GFM table cell;
* ``github_message`` / ``github_property`` — a GitHub Actions workflow command's message or
  property value (``%``, CR, LF; ``:`` and ``,`` in properties, as GitHub documents);
* ``xml_text`` / ``xml_attribute`` — JUnit XML: characters XML 1.0 forbids shown as escapes, the
  rest escaped as XML wants, so the file parses whatever the names;
* ``escaped`` — a report (any tree of dataclasses, lists and dicts) with every string inside it
  passed through one of these, for renderers that print many of its strings.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(char: str) -> str:
    """A character as an escape a reader can see and copy (Python's spelling)."""
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def terminal(text: str) -> str:
    """``text`` with every non-printable character shown as a visible escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _visible(char) for char in text)


_MARKDOWN_SPECIALS = re.compile(r"[\\`|\[\]&<>]")
_MARKDOWN_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def markdown_text(text: str) -> str:
    """``text`` as plain Markdown inside a table cell: no markup, no link, no HTML, no cell
    break (backslash, backtick, pipe and brackets escaped; ``& < >`` as entities)."""
    text = terminal(text)
    return _MARKDOWN_SPECIALS.sub(
        lambda found: _MARKDOWN_ESCAPES.get(found[0], "\\" + found[0]), text
    )


def markdown_code(text: str) -> str:
    """``text`` as a Markdown code span inside a table cell, backticks included: nothing inside
    a code span is markup, so only the fence (longer than any run of backticks in ``text``) and
    the cell's pipes need care."""
    text = terminal(text).replace("|", "\\|")
    if "`" not in text:
        return f"`{text}`"
    fence = "`" * (max(len(run) for run in re.findall(r"`+", text)) + 1)
    return f"{fence} {text} {fence}"  # (the spaces let the text start or end with a backtick)


def github_message(text: str) -> str:
    """``text`` as the message of a GitHub workflow command (``::error …::message``)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return terminal(text)


def github_property(text: str) -> str:
    """``text`` as a property value of a GitHub workflow command (``file=…,title=…``)."""
    return github_message(text).replace(":", "%3A").replace(",", "%2C")


@cache
def _xml_forbidden() -> re.Pattern[str]:
    """What XML 1.0 does not allow: all but tab, LF, CR, and the planes without surrogates and
    U+FFFE/U+FFFF (compiled when first needed: ~6 ms, which a command without XML output
    would pay at start)."""
    return re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_allowed(text: str) -> str:
    return _xml_forbidden().sub(lambda found: _visible(found[0]), terminal(text))


def xml_text(text: str) -> str:
    """``text`` as XML character data."""
    # imported here: xml.sax pulls in urllib and http (~15 ms) on every command's start
    from xml.sax.saxutils import escape

    return escape(_xml_allowed(text))


def xml_attribute(text: str) -> str:
    """``text`` as a quoted XML attribute value (quotes included)."""
    from xml.sax.saxutils import quoteattr

    return quoteattr(_xml_allowed(text))


def escaped(value: T, escape: Callable[[str], str] = terminal) -> T:
    """``value`` with every string inside it (dataclass fields, list, tuple and dict items and
    keys) passed through ``escape``; the same object wherever nothing changed, so an ordinary
    report costs one walk and no copy.  Other objects (numbers, arrays) are kept as they are."""
    return _walk(value, escape)


def _walk(value: Any, escape: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple):
        items = [_walk(item, escape) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(_walk(k, escape), _walk(v, escape)) for k, v in value.items()]
        same = zip(pairs, value.items(), strict=True)
        if all(k is old_k and v is old_v for (k, v), (old_k, old_v) in same):
            return value
        return dict(pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {}
        for field in dataclasses.fields(value):
            old = getattr(value, field.name)
            new = _walk(old, escape)
            if new is not old:
                changed[field.name] = new
        if not changed:
            return value
        clone = copy.copy(value)
        for name, new in changed.items():
            object.__setattr__(clone, name, new)  # (frozen dataclasses too: a fresh copy)
        return clone
    return value

"""The HLO grammar's character-run terminals hold exactly the characters their comments say.

``grammars/hlo.lark`` writes the runs inside strings and balanced groups as sets of ranges (a
regex engine scans those faster than negated sets); each has the negated set it stands for in
the comment line above it.  Each range set, compiled by Lark as the parser compiles it, must
accept exactly the code points its negated form accepts.
"""

from __future__ import annotations

import re

import pytest
from lark import Lark

from profan.paths import grammar_path

# Every code point, lone surrogates included (HLO text read with errors="replace" has none, but
# the sets must not care).
_ALL = "".join(map(chr, range(0x110000)))

_RUN_NAMES = ("_STR_RUN", "_BRACE_RUN", "_BRACKET_RUN", "_PAREN_RUN", "_LITERAL_RUN")


def _runs() -> dict[str, tuple[str, str]]:
    """Each run terminal: (its regex literal, the negated set in the comment above it)."""
    lines = grammar_path("hlo.lark").read_text().splitlines()
    found = {}
    for number, line in enumerate(lines):
        name, _, literal = line.partition(": ")
        if name in _RUN_NAMES:
            comment = lines[number - 1]
            assert comment.startswith("// [^"), (name, comment)
            found[name] = (literal.strip(), comment[3:].strip())
    return found


def _compiled(literal: str) -> str:
    """The regex Lark makes of a terminal's literal (Lark evaluates escapes such as \\x00)."""
    # behind a fixed '@': Lark refuses a terminal that may match nothing on its own
    parser = Lark(f'start: RUN\nRUN: "@" _RUN\n_RUN: {literal}\n', parser="lalr")
    pattern = parser.get_terminal("RUN").pattern.to_regexp()
    assert pattern.startswith("@")
    return pattern[1:]


def _rejected(pattern: str) -> str:
    """The characters of ``_ALL`` that a run pattern does not take (every run it matches
    removed)."""
    return re.sub(pattern, "", _ALL)


def test_every_run_terminal_is_checked() -> None:
    assert set(_runs()) == set(_RUN_NAMES)


@pytest.mark.parametrize("name", _RUN_NAMES)
def test_run_takes_what_its_negated_form_takes(name: str) -> None:
    literal, negated = _runs()[name]
    fast = _compiled(literal)
    # the same repeat, possessive as in the comment
    assert fast[-2:] == negated[-2:] and fast[-2:] in ("*+", "++")
    rejected = _rejected(fast)
    assert len(rejected) < 10
    assert rejected == _rejected(negated)
    # No range reaches past Latin-1: Python's regex compiler walks every code point of a range
    # (up to \uffff) in Python, milliseconds per set, and the grammar repeats these sets
    # thousands of times across its lexer states.
    assert max(map(ord, fast)) <= 0xFF

"""Mutated real HLO never makes the parser raise anything but HloSyntaxError (hypothesis)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profan.errors import HloSyntaxError
from profan.hlo import parse_instruction, parse_module

# Modules with layouts, collectives, metadata, stack frames, while loops and custom-calls.
SOURCES = [
    "xla__backends__cpu__benchmarks__hlo__jax.issue.33666.linx.frag_0100.module_0005.hlo",
    "xla__service__hlo_cost_analysis_test__8.hlo",
    "xla__hlo__analysis__while_loop_analysis_test__3.hlo",
]
_TOKEN = re.compile(r"\s+|[\w.%\-]+|\S")


@pytest.fixture(scope="module")
def texts(corpus_dir: Path) -> list[str]:
    root = corpus_dir / "hlo" / "xla"
    return [(root / name).read_text() for name in SOURCES if (root / name).is_file()]


def _parse_or_syntax_error(text: str) -> None:
    try:
        parse_module(text)
    except HloSyntaxError as error:
        assert error.reason
        assert error.line is None or error.line >= 1


def _mutate(text: str, data: st.DataObject) -> str:
    kind = data.draw(st.sampled_from(["truncate", "delete", "duplicate", "bytes"]))
    if kind == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    tokens = _TOKEN.findall(text)
    index = data.draw(st.integers(0, len(tokens) - 1))
    if kind == "delete":
        del tokens[index]
    elif kind == "duplicate":
        tokens.insert(index, tokens[index])
    else:
        noise = data.draw(st.binary(min_size=1, max_size=8)).decode("latin-1")
        tokens.insert(index, noise)
    return "".join(tokens)


_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(data=st.data())
def test_mutated_modules_raise_only_syntax_errors(texts: list[str], data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(texts))
    _parse_or_syntax_error(_mutate(text, data))


@_SETTINGS
@given(data=st.data())
def test_mutated_lines_raise_only_syntax_errors(texts: list[str], data: st.DataObject) -> None:
    lines = [line for text in texts for line in text.splitlines() if " = " in line]
    line = _mutate(data.draw(st.sampled_from(lines)), data)
    try:
        parse_instruction(line)
    except HloSyntaxError as error:
        assert error.reason


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_syntax_errors(text: str) -> None:
    _parse_or_syntax_error(text)


def test_synthetic_unbalanced_braces_fail_fast() -> None:
    # Deep unclosed nesting must not send the lexer's regexes into exponential backtracking.
    text = "HloModule m\nENTRY e {\n  ROOT x = f32[] constant(0), backend_config=" + "{[(" * 400
    with pytest.raises(HloSyntaxError):
        parse_module(text)

"""Errors carry what the user needs and survive the trip to and from worker processes."""

from __future__ import annotations

import pickle

from profan.errors import EXIT_BAD_INPUT, HloSyntaxError, ProfanError, TraceError


def test_trace_error_pickles_with_its_fields() -> None:
    error = TraceError("logs/run1/host.xplane.pb", "not a readable XSpace protobuf")
    copy = pickle.loads(pickle.dumps(error))
    assert isinstance(copy, TraceError) and isinstance(copy, ProfanError)
    assert (copy.path, copy.reason, str(copy)) == (error.path, error.reason, str(error))
    assert copy.exit_code == EXIT_BAD_INPUT


def test_hlo_syntax_error_pickles_with_position_and_expectations() -> None:
    error = HloSyntaxError(
        "unexpected ')'",
        file="dump.txt",
        line=7,
        column=12,
        text="  %a = f32[] add(",
        expected=("x",),
    )
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.file, copy.line, copy.column, copy.expected) == ("dump.txt", 7, 12, ("x",))
    assert str(copy) == str(error)
    assert str(copy).startswith("dump.txt:7:12: HLO syntax error")

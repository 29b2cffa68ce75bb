"""profan.tomlschema: msgspec's validation messages rewritten as KEY: problem (allowed: ...)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from profan.errors import ConfigError
from profan.tomlschema import convert


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    size: Annotated[int, msgspec.Meta(ge=1)] = 1


class Table(msgspec.Struct, forbid_unknown_fields=True):
    step_time_s: float | None = None
    max_suspicious: int | None = None
    time_gate: Literal["auto"] | bool = "auto"
    kinds: list[Literal["a", "b"]] = []
    inner: Inner | None = None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"step_time_s": "x"}, "budget.step_time_s: must be a number, got a string"),
        ({"max_suspicious": 1.5}, "budget.max_suspicious: must be a whole number, got a number"),
        ({"time_gate": "on"}, "budget.time_gate: 'on' is not allowed (allowed: auto, true, false)"),
        ({"kinds": ["a", "c"]}, "budget.kinds[1]: 'c' is not allowed (allowed: a, b)"),
        ({"inner": {"size": 0}}, "budget.inner.size: must be a whole number >= 1"),
        ({"inner": {"colour": 1}}, "budget.inner: unknown field 'colour' (allowed: size)"),
        ({"colour": 1}, "budget: unknown field 'colour' (allowed: step_time_s, max_suspicious, "
                        "time_gate, kinds, inner)"),
    ],
)  # fmt: skip
def test_messages_name_the_key_and_what_is_allowed(value: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        convert(value, Table, origin="profan.toml", key="budget")
    assert str(raised.value) == f"profan.toml: {message}"


def test_a_good_table_converts() -> None:
    table = convert({"time_gate": True, "kinds": ["b"]}, Table, origin="x", key="budget")
    assert table.time_gate is True and table.kinds == ["b"]

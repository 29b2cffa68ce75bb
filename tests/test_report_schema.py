"""The report's JSON from its types: the codec (``profan.report.model.codec``) writes every
section as today's JSON and reads old reports back; SCHEMA.md is generated from the types and
their ``#:`` comments (``profan.report.model.schema``), and goes stale when a field is added."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from profan.chips.catalogue import Chip, catalogue
from profan.memory import model as memory_model
from profan.report.analysis.build import build_report, chip_section
from profan.report.analysis.pipeline import analyse
from profan.report.model import (
    MemoryBuffer,
    PeakBreakdown,
    Report,
    StepRow,
    StepScore,
    Tool,
    UndonatedInput,
    schema,
)
from profan.report.model.codec import INLINE, OMIT_EMPTY, OMIT_NONE, decode, encode, prefixed
from profan.roofline import StepRecord

from .conftest import FIXTURES_DIR

pytestmark = pytest.mark.usefixtures("private_cache")


@cache
def _report(name: str) -> Report:
    return build_report(analyse(FIXTURES_DIR / name))


# ---------------------------------------------------------------------------------- SCHEMA.md


def test_schema_md_is_generated_from_the_types() -> None:
    assert schema.SCHEMA.read_text(encoding="utf-8") == schema.render(), (
        "SCHEMA.md is out of date: run python -m profan.report.model.schema"
    )
    assert schema.main(["--check"]) == 0


@dataclass(frozen=True, slots=True)
class _ToolWithAField:
    """``Tool`` as it would be with one more field."""

    #: `profan`
    name: str = "profan"
    #: profan's version
    version: str = "0"
    #: the machine the report was written on
    host: str = ""


@dataclass(frozen=True, slots=True)
class _ToolWithAnUndocumentedField:
    #: `profan`
    name: str = "profan"
    version: str = "0"


def test_a_new_field_makes_schema_md_stale(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    known = schema.documented_types()
    monkeypatch.setattr(schema, "documented_types", lambda: {**known, "Tool": _ToolWithAField})
    text = schema.render()
    assert "| `host` | str | the machine the report was written on |" in text
    assert schema.main(["--check"]) == 1
    assert "SCHEMA.md is out of date" in capsys.readouterr().out
    # a field without its meaning is refused, not written without one
    monkeypatch.setattr(
        schema, "documented_types", lambda: {**known, "Tool": _ToolWithAnUndocumentedField}
    )
    with pytest.raises(schema.SchemaError, match="version has no #: comment"):
        schema.render()


def test_every_type_of_the_report_has_its_table() -> None:
    """Each dataclass reachable from Report is in the template (a new section gets a table)."""
    named = {
        line.removeprefix(schema.DIRECTIVE).strip()
        for line in schema.TEMPLATE.read_text(encoding="utf-8").splitlines()
        if line.startswith(schema.DIRECTIVE)
    }
    assert named == set(schema.documented_types()) - {"StepScore"}  # inline in StepRow's


def test_field_types_read_as_json() -> None:
    rows = {key: kind for key, kind, _ in schema.rows(StepRow)}
    assert rows["window_s"] == "float or null"
    assert rows["note"] == "str or null"  # the scorer's columns are the step's own keys
    assert {key: kind for key, kind, _ in schema.rows(Report)}["rules"] == "{str: RuleEntry}"


# ---------------------------------------------------------------------------- the sections


def _chip_dict(chip: Chip) -> dict[str, Any]:
    """The chip section as it was written before it had a type (the catalogue's scalars and
    tables, then the per-device figures): the JSON must not change."""
    out: dict[str, Any] = {}
    for name, value in chip.to_dict().items():
        if isinstance(value, str | int | float | bool) or value is None:
            out[name] = value
        elif isinstance(value, dict):
            out[name] = {str(k): v for k, v in value.items()}
    out.update(
        {
            "peak_flops_per_s": chip.device_peak_flops("bf16") or None,
            "hbm_capacity_bytes": chip.device_hbm_capacity_bytes or None,
            "mxu_size": chip.mxu_size or None,
            "source": chip.figures_source,
            "hbm_bytes_per_s_device": chip.device_hbm_bytes_per_s or None,
            "transcendentals_per_s_device": chip.device_transcendentals_per_s,
        }
    )
    return out


@pytest.mark.parametrize("name", sorted(catalogue()))
def test_chip_section_carries_every_catalogue_field(name: str) -> None:
    """Every scalar and table field of the catalogue's ``Chip``, in its order, then the
    per-device figures: a field added to the catalogue needs its place in ``ChipSection``."""
    chip = catalogue()[name]
    expected = _chip_dict(chip)
    written = encode(chip_section(chip))
    assert list(written) == list(expected)
    assert json.dumps(written) == json.dumps(expected)


def test_step_score_is_the_scorers_step_record() -> None:
    """The scorer's step figures in its order (its step, measured and window are the row's
    own): a figure the scorer adds needs its place in ``StepScore``."""
    own = {"step", "measured_s", "window_s"}
    assert [f.name for f in dataclasses.fields(StepScore)] == [
        f.name for f in dataclasses.fields(StepRecord) if f.name not in own
    ]
    assert set(StepScore().times_s()) == set(StepScore().shares())


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        (MemoryBuffer, memory_model.Buffer),
        (UndonatedInput, memory_model.Undonated),
        (PeakBreakdown, memory_model.Breakdown),
    ],
)
def test_memory_rows_have_the_memory_models_fields(mine: type, theirs: type) -> None:
    """The report's memory rows are ``profan memory``'s, field for field."""
    names = [f.name for f in dataclasses.fields(mine)]
    assert names == [f.name for f in dataclasses.fields(theirs)]


# ------------------------------------------------------------------------------- the codec


@dataclass(slots=True)
class _Inner:
    a: int = 0
    b: str | None = None


@dataclass(slots=True)
class _Outer:
    name: str
    inner: _Inner | None = field(default=None, metadata=INLINE)
    extra: dict[str, float] = field(default_factory=dict, metadata=prefixed("x_"))
    note: str | None = field(default=None, metadata=OMIT_NONE)
    items: list[_Inner] = field(default_factory=list, metadata=OMIT_EMPTY)
    nested: dict[str, _Inner] = field(default_factory=dict)


def test_codec_writes_what_the_metadata_says() -> None:
    plain = _Outer("p")
    assert encode(plain) == {"name": "p", "nested": {}}
    full = _Outer("f", _Inner(1, "b"), {"k": float("nan")}, "n", [_Inner(2)], {"z": _Inner(3, "c")})
    data = encode(full)
    assert data == {
        "name": "f",
        "a": 1,
        "b": "b",
        "x_k": None,  # NaN is null
        "note": "n",
        "items": [{"a": 2, "b": None}],
        "nested": {"z": {"a": 3, "b": "c"}},
    }
    back = decode(_Outer, data)
    assert back == dataclasses.replace(full, extra={"k": None})
    assert decode(_Outer, encode(plain)) == plain  # no inline keys: the inline field is None


def test_codec_reads_what_it_does_not_know_and_what_is_missing() -> None:
    assert decode(_Outer, {"name": "q", "unknown": [1, 2], "a": 5}) == _Outer("q", _Inner(5))
    with pytest.raises(TypeError):
        decode(_Outer, {"a": 1})  # ``name`` has no default
    with pytest.raises(TypeError):
        decode(_Outer, ["not", "an", "object"])


def test_an_old_report_reads_back_with_defaults(fixtures_dir: Path) -> None:
    """A report written before some fields existed, and with fields this profan does not know:
    absent fields take their defaults, unknown keys are ignored."""
    data = _report("transformer").to_dict()
    for name in ("notes",):
        data["trace"].pop(name)
    for name in ("transcendentals_per_s", "transcendentals_per_s_device", "vendor"):
        data["chip"].pop(name)
    data["chip"]["retired_field"] = 1
    for step in data["steps"]:
        for bound in ("compute", "hbm", "ici", "host", "transcendental", "unknown"):
            step.pop(f"time_{bound}_s")
        step.pop("window_s")
    data["summary"]["future_figure"] = 3.0
    for entry in data["memory"]:
        entry.pop("undonated")
        entry.pop("breakdown")
    for finding in data["findings"]:
        for name in ("saving_s", "saving_share", "saving_bytes", "saving_memory_share"):
            finding.pop(name)
    data.pop("rules")
    data.pop("gemms")
    old = Report.from_dict(json.loads(json.dumps(data)))
    assert old.trace.notes == []
    assert old.chip.transcendentals_per_s_device is None and old.chip.name == "cpu"
    assert all(s.window_s is None and s.score is not None for s in old.steps)
    assert all(s.score.time_compute_s is None and s.score.share_compute is not None
               for s in old.steps if s.score)  # fmt: skip
    assert old.memory[0].undonated == [] and old.memory[0].breakdown is None
    assert old.rules == {} and old.gemms == []
    assert all(f.saving_s is None for f in old.findings)
    written = old.to_dict()
    assert "retired_field" not in written["chip"] and "future_figure" not in written["summary"]
    assert written["ops"] == data["ops"]


def test_tool_is_the_writers(fixtures_dir: Path) -> None:
    data = _report("matmul").to_dict()
    data["tool"] = {"name": "profan", "version": "0.0.1"}
    assert Report.from_dict(data).tool == Tool()


def test_every_fixture_report_round_trips(fixtures_dir: Path) -> None:
    for name in ("transformer", "multihost", "state_steps", "gpu_kernels"):
        data = json.loads(json.dumps(_report(name).to_dict()))
        back = Report.from_dict(data)
        assert back.to_dict() == data
        assert json.dumps(back.to_dict()) == json.dumps(data)  # key order too

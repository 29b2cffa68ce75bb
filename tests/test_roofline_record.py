"""``OpRecord`` (what scoring says of an op) and the report's ``OpEntry`` made from it: the
fields of the same name are one figure, of one type, copied as they are.  ``StepRecord``: a
step's figures, in the order of the JSON report's ``steps``."""

from __future__ import annotations

import dataclasses
import json

import pytest

from profan.report.analysis import build
from profan.report.analysis.pipeline import analyse
from profan.report.model import OpEntry
from profan.roofline import BOUNDS, OpRecord, StepRecord
from tests.conftest import FIXTURES_DIR

# Fields of both whose form differs (the JSON's since schema 1): set by build._entry.
ADAPTED = {"opcode", "flops", "scope", "collective", "faster_executions"}


def _types(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


def test_a_field_of_both_has_one_type() -> None:
    record, entry = _types(OpRecord), _types(OpEntry)
    shared = set(record) & set(entry)
    assert set(build._SAME) == shared - ADAPTED
    for name in build._SAME:
        # the same type, or the entry's optional form of it (a report read back may lack it)
        assert entry[name] in (record[name], f"{record[name]} | None"), name


@pytest.fixture(scope="module")
def transformer() -> build.Analysis:
    return analyse(FIXTURES_DIR / "transformer")


def test_records_are_typed_as_their_figures(transformer: build.Analysis) -> None:
    ops = transformer.score.ops
    assert ops and all(isinstance(op, OpRecord) for op in ops)
    for op in ops:
        assert type(op.occurrences) is int and type(op.faster_executions) is int
        for name in ("measured_s", "hbm_bytes", "ici_bytes", "roofline_s", "t_compute_s"):
            assert type(getattr(op, name)) is float, name
        assert op.efficiency is None or type(op.efficiency) is float
        assert all(type(moved) is float for moved in op.bytes_by_space.values())
        assert op.efficiency is None or op.efficiency == op.efficiency  # never NaN
    measured = [op.measured_s for op in ops]
    assert measured == sorted(measured, reverse=True)


def test_an_entry_is_its_record(transformer: build.Analysis) -> None:
    report = build.build_report(transformer)
    records = {(op.module_key or "", op.name): op for op in transformer.score.ops}
    assert len(report.ops) == len(records)
    for entry in report.ops:
        record = records[(entry.program or "", entry.name)]
        for name in build._SAME:
            assert getattr(entry, name) == getattr(record, name), name
        assert entry.opcode == (record.opcode or "unknown")
        assert entry.scope == (record.scope or record.op_path)
        assert entry.faster_executions == (record.faster_executions or None)
    # the JSON of an entry is its fields in OpEntry's order
    data = json.loads(json.dumps(report.to_dict()))
    assert list(data["ops"][0]) == [f.name for f in dataclasses.fields(OpEntry)]


def test_a_steps_figures_are_the_reports_step_columns_in_order(
    transformer: build.Analysis,
) -> None:
    names = [f.name for f in dataclasses.fields(StepRecord)]
    every = (*BOUNDS, "unknown")
    assert names == [
        "step", "measured_s", "ideal_s", "efficiency", "mfu", "model_flops",
        *(f"share_{bound}" for bound in every), *(f"time_{bound}_s" for bound in every),
        "idle_s", "window_s", "devices", "note",
    ]  # fmt: skip
    steps = transformer.score.steps
    assert steps and all(type(s.step) is int and type(s.devices) is int for s in steps)
    assert all(type(s.idle_s) is float and type(s.time_unknown_s) is float for s in steps)
    # the report's steps: the trace's step window, then the scorer's figures in their order
    report = build.build_report(transformer)
    window = ["step", "start_s", "end_s", "measured_s", "window_s"]
    scored = [name for name in names if name not in window]
    assert [list(step) for step in report.to_dict()["steps"]] == [window + scored] * len(steps)

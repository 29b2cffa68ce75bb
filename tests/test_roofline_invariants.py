"""Accounting that cannot lie (issue 10 item 1), as properties of every real trace: the fixtures
(CPU, H100, H200) and the external corpus (TPU v6e, MI300X).

* a step's ideal never exceeds its measured time (share <= 100%), measured per device over the
  ops the step holds;
* each device's busy span splits exactly into per-category (and per-bound) time plus idle;
* an op measured faster than its roofline says why, in words;
* every figure names its source; no op is charged 0 bytes (in every memory space together)
  unless its bytes are unknown; a row with interconnect time carries interconnect bytes;
* an op's ideal is its largest roofline term (transcendentals included) and its bound names it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import profan
from profan.cost.kernels import SOURCES
from profan.report.analysis.pipeline import describe_shardings, resolve_layout
from profan.roofline import BOUNDS, Score, score
from tests.conftest import FIXTURES_DIR, corpus_params

FIXTURE_TRACES = sorted(p.name for p in FIXTURES_DIR.iterdir() if (p / "trace").is_dir())
CORPUS_NAMES = corpus_params("traces", "*.xplane.pb")
_CACHE: dict[str, tuple[profan.Profile, Score]] = {}


def _scored(path: Path) -> tuple[profan.Profile, Score]:
    if str(path) not in _CACHE:
        trace, hlo = resolve_layout(path, None)
        profile = profan.load(trace, hlo=hlo)
        _CACHE[str(path)] = (profile, score(profile, shardings=describe_shardings(profile)))
    return _CACHE[str(path)]


def _spans(ops: pd.DataFrame) -> list[float]:
    """First start to last end of each (host, device)."""
    ends = ops["start_s"] + ops["duration_s"]
    return [
        float(ends.iloc[rows].max() - ops["start_s"].iloc[rows].min())
        for rows in ops.groupby(["host", "device"]).indices.values()
    ]


@pytest.fixture(params=[*FIXTURE_TRACES, *CORPUS_NAMES])
def scored(request: pytest.FixtureRequest) -> tuple[profan.Profile, Score]:
    name = request.param
    if name.endswith(".xplane.pb"):
        corpus = request.getfixturevalue("corpus_dir")  # skips without the corpus
        return _scored(corpus / "traces" / name)
    return _scored(FIXTURES_DIR / name)


def test_no_step_runs_above_its_roofline(scored) -> None:
    profile, result = scored
    steps = result.steps
    assert len(steps) == len(profile.steps) > 0
    assert all(s.ideal_s <= s.measured_s for s in steps), steps
    assert all(s.efficiency is not None and s.efficiency <= 1.0 for s in steps)
    assert all(s.mfu is not None and s.mfu <= 1.0 for s in steps)
    # measured over the step's own ops, never shorter than the trace's step window
    assert all(s.measured_s >= s.window_s for s in steps)
    for row in steps:
        span = max(_spans(profile.ops[profile.ops["step"] == row.step]))
        assert row.measured_s == pytest.approx(max(span, row.window_s), rel=1e-12)
        if span > row.window_s * (1 + 1e-9):
            assert "past its window" in row.note


def test_busy_span_splits_into_categories_bounds_and_idle(scored) -> None:
    profile, result = scored
    summary = result.summary
    # independently: per device, first start to last end, averaged over devices with ops
    ops = profile.ops
    spans = _spans(ops)
    assert summary.busy_span_s == pytest.approx(sum(spans) / len(spans), rel=1e-12)
    for breakdown in (summary.time_by_category_s, summary.time_by_bound_s):
        assert all(value >= 0 for value in breakdown.values())
        assert sum(breakdown.values()) + summary.idle_s == pytest.approx(
            summary.busy_span_s, rel=1e-9
        )
    # busy time is at most the op time (overlapping ops share an instant, never add up)
    devices = len(spans)
    assert sum(summary.time_by_category_s.values()) <= ops["duration_s"].sum() / devices * (
        1 + 1e-9
    )


def test_an_op_execution_faster_than_its_roofline_is_explained(scored) -> None:
    profile, result = scored
    ops = result.ops
    # independently: every event against its op's ideal time per execution
    ideal = pd.DataFrame(
        {
            "module_key": [op.module_key or "" for op in ops],
            "op_name": [op.name for op in ops],
            "_ideal": [op.roofline_s / op.occurrences for op in ops],
        }
    )
    events = profile.ops.assign(module_key=profile.ops["module_key"].astype(object).fillna(""))
    # an async done's event is only its exposed wait: its executions are the transfers' spans
    dones = {op.name for op in ops if op.async_role == "done"}
    events = events[~events["op_name"].isin(dones)]
    if profile.async_ops is not None:
        spans = profile.async_ops
        events = pd.concat(
            [events, spans.assign(module_key=spans["module_key"].astype(object).fillna(""))]
        )
    events = events.merge(ideal, on=["module_key", "op_name"])
    faster = events[events["_ideal"] > events["duration_s"] * (1 + 1e-9)]
    counts = faster.groupby(["module_key", "op_name"]).size()
    for row in ops:
        expected = int(counts.get((row.module_key or "", row.name), 0))
        assert row.faster_executions == expected, row.name
        explained = expected > 0 or (row.efficiency is not None and row.efficiency > 1.0)
        words = "shorter than its transfer" if row.name in dones else "faster than its roofline"
        assert (isinstance(row.note, str) and words in row.note) == explained
        if explained:
            assert row.note.split(": ", 1)[1], row.name  # a reason, in words


def test_every_figure_has_a_source_and_no_op_is_charged_zero_bytes_silently(scored) -> None:
    _, result = scored
    ops = result.ops
    assert {op.flops_source for op in ops} <= set(SOURCES)
    assert {op.bytes_source for op in ops} <= set(SOURCES)
    assert all(op.flops_source == "unknown" for op in ops if op.flops is None)
    for op in ops:
        # bytes in some memory space: a copy's half that only touches host memory or VMEM moves
        # no HBM byte; its bytes are in that space, and every space's add up to the HBM figure
        # and more
        all_spaces = sum(op.bytes_by_space.values())
        assert all_spaces >= op.hbm_bytes * (1 - 1e-12), op.name
        assert op.bytes_by_space["hbm"] == op.hbm_bytes, op.name
        if all_spaces == 0:
            assert op.bytes_source == "unknown", (op.name, op.opcode)
        # interconnect time is carried by the row that has the bytes (an async pair: its done)
        if op.t_ici_s > 0:
            assert op.ici_bytes > 0, (op.name, op.opcode)
        assert not math.isnan(op.roofline_s), op.name


def test_the_ideal_is_the_largest_term_and_the_bound_names_it(scored) -> None:
    """roofline = max(compute, HBM, interconnect, host link, transcendental) and ``bound_by``
    names the term that set it; a chip without a transcendental rate times none."""
    _, result = scored
    ops = result.ops
    terms = {bound: f"t_{bound}_s" for bound in BOUNDS}
    for op in ops:
        times = {bound: getattr(op, name) for bound, name in terms.items()}
        assert min(times.values()) >= 0, op.name
        assert op.roofline_s == pytest.approx(max(times.values()), rel=1e-12), op.name
        if op.bound_by in times:
            assert times[op.bound_by] == op.roofline_s, (op.bound_by, op.name)
    if result.chip.transcendentals_per_s is None:
        assert all(op.t_transcendental_s == 0 for op in ops)


def test_no_execution_beats_its_transcendental_term(scored) -> None:
    """The catalogue's transcendental rates (mostly estimates) are never slower than a real
    execution: every execution of an op takes at least its transcendentals' time."""
    profile, result = scored
    ops = [op for op in result.ops if op.t_transcendental_s > 0]
    per_execution = pd.DataFrame(
        {
            "module_key": [op.module_key or "" for op in ops],
            "op_name": [op.name for op in ops],
            "_t": [op.t_transcendental_s / op.occurrences for op in ops],
        }
    )
    events = profile.ops.assign(module_key=profile.ops["module_key"].astype(object).fillna(""))
    # an async done's event is only its exposed wait: its executions are the transfers' spans
    dones = {op.name for op in ops if op.async_role == "done"}
    events = events[~events["op_name"].isin(dones)]
    if profile.async_ops is not None:
        spans = profile.async_ops
        events = pd.concat(
            [events, spans.assign(module_key=spans["module_key"].astype(object).fillna(""))]
        )
    events = events.merge(per_execution, on=["module_key", "op_name"])
    assert len(events) >= len(ops)
    assert (events["duration_s"] >= events["_t"]).all()

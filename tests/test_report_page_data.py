"""What the HTML page adds to a report (profan.report.analysis.page_data): each op's HLO line, fused
body and stack, and every step's op slices per device.  Checked against independent sources:
the trace's own events (``profan.load``), and the HLO text XLA printed for the same programs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import profan
from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.model import Report
from profan.report.rules.config import RuleConfig
from profan.report.slices import COLUMN_TYPES, decode_column

INDEX_COMMENT = re.compile(r"/\*index=\d+\*/")
NAME = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = ")


def _xla_lines(files: list[Path]) -> dict[str, str]:
    """Each instruction's line as XLA printed it (first definition of a name wins)."""
    lines: dict[str, str] = {}
    for file in files:
        for line in file.read_text().splitlines():
            match = NAME.match(line)
            if match:
                lines.setdefault(match.group(1), INDEX_COMMENT.sub("", line.strip()))
    return lines


def _computation_sizes(files: list[Path]) -> dict[str, int]:
    """Instructions per computation as XLA printed them."""
    sizes: dict[str, int] = {}
    current = None
    for file in files:
        for line in file.read_text().splitlines():
            if line.endswith("{") and not line.startswith(" "):
                current = line.removeprefix("ENTRY ").lstrip("%").split(" ")[0]
                sizes[current] = 0
            elif line.startswith("}"):
                current = None
            elif current is not None and NAME.match(line):
                sizes[current] += 1
    return sizes


def _events(path: Path) -> pd.DataFrame:
    """The trace's op events and its async ops' start-to-done spans (``in_flight``)."""
    trace, hlo = resolve_layout(path, None)
    profile = profan.load(trace, hlo=hlo)
    ops = profile.ops.assign(in_flight=False)
    if profile.async_ops is None or not len(profile.async_ops):
        return ops
    spans = profile.async_ops.assign(in_flight=True)
    return pd.concat([ops.astype({"host": str}), spans.astype({"host": str})], ignore_index=True)


@pytest.fixture(scope="module")
def transformer(fixtures_dir: Path) -> Report:
    return report_for(fixtures_dir / "transformer", page=True)


def _check_slices(report: Report, events: pd.DataFrame) -> int:
    """Every step's slices are exactly the trace's op events of that step: count per lane,
    start and duration (to the nanosecond) and op name."""
    timeline = report.timeline
    assert timeline is not None
    clock_offsets = {row.host: row.clock_offset_s for row in report.hosts}
    assert timeline.outside_steps == int(events["step"].isna().sum())
    checked = 0
    for step in timeline.steps:
        columns = step.columns()
        assert {len(c) for c in columns.values()} == {step.count}
        mine = events[events["step"] == step.step]
        # hosts' clocks aligned as the cross-host view aligns them
        offset = mine["host"].astype(str).map(clock_offsets).fillna(0.0).to_numpy()
        lanes = [timeline.lanes[k] for k in columns["lane"]]
        got = pd.DataFrame(
            {
                "host": [lane["host"] for lane in lanes],
                "device": [lane["device"] for lane in lanes],
                "in_flight": [lane.get("in_flight", False) for lane in lanes],
                "start_ns": columns["start_ns"],
                "duration_ns": columns["duration_ns"],
                "name": [
                    report.ops[k].name if k >= 0 else timeline.names[-k - 1] for k in columns["op"]
                ],
            }
        )
        want = pd.DataFrame(
            {
                "host": mine["host"].astype(str).to_numpy(),
                "device": mine["device"].astype(object).to_numpy(),
                "in_flight": mine["in_flight"].to_numpy(dtype=bool),
                "start_ns": np.rint((mine["start_s"].to_numpy() - offset - step.start_s) * 1e9),
                "duration_ns": np.rint(mine["duration_s"].to_numpy() * 1e9),
                "name": mine["op_name"].astype(str).to_numpy(),
            }
        )
        order = ["host", "device", "in_flight", "start_ns", "duration_ns", "name"]
        got = got.sort_values(order).reset_index(drop=True)
        want = want.sort_values(order).reset_index(drop=True)
        assert len(got) == len(want) == step.count
        assert got["name"].tolist() == want["name"].tolist()
        assert got["in_flight"].tolist() == want["in_flight"].tolist()
        assert step.in_flight == int(want["in_flight"].sum())
        assert np.abs(got["start_ns"] - want["start_ns"]).max() <= 1
        assert np.array_equal(got["duration_ns"], want["duration_ns"])
        checked += len(got)
    return checked


def test_transformer_slices_are_the_trace_events(transformer: Report, fixtures_dir: Path) -> None:
    events = _events(fixtures_dir / "transformer")
    assert _check_slices(transformer, events) == len(events)
    assert [lane["device"] for lane in transformer.timeline.lanes] == list(range(8))


def test_multihost_slices_have_a_lane_per_host_and_device(fixtures_dir: Path) -> None:
    report = report_for(fixtures_dir / "multihost", page=True)
    events = _events(fixtures_dir / "multihost")
    assert _check_slices(report, events) == len(events)
    pairs = {(str(h), int(d)) for h, d in zip(events["host"], events["device"], strict=True)}
    lanes = [(lane["host"], lane["device"]) for lane in report.timeline.lanes]
    assert lanes == sorted(pairs)


@pytest.mark.corpus
def test_v6e_slices_are_the_trace_events(corpus_dir: Path) -> None:
    path = corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"
    report = report_for(path, page=True)
    events = _events(path)
    assert events["step"].isna().sum() > 0  # events outside every step are counted, not drawn
    assert _check_slices(report, events) == int(events["step"].notna().sum())
    # the transfers' start-to-done spans are drawn, in lanes of their own
    in_flight = events[events["in_flight"] & events["step"].notna()]
    assert len(in_flight) and sum(step.in_flight for step in report.timeline.steps) == len(
        in_flight
    )
    assert any(lane.get("in_flight") for lane in report.timeline.lanes)


def test_hlo_lines_are_what_xla_printed(transformer: Report, fixtures_dir: Path) -> None:
    """The detail pane's HLO line is the instruction as XLA's own dump printed it (bar XLA's
    ``/*index=N*/`` comments)."""
    files = sorted((fixtures_dir / "transformer" / "hlo").glob("*after_opt*.txt"))
    dumped, sizes = _xla_lines(files), _computation_sizes(files)
    with_hlo = [op for op in transformer.ops if op.hlo]
    assert len(with_hlo) == len([op for op in transformer.ops if op.program])
    for op in with_hlo:
        assert op.hlo == dumped[op.name], op.name
    fusions = [op for op in with_hlo if op.opcode == "fusion"]
    assert fusions and all(op.fused_body for op in fusions)
    for op in fusions:
        called = re.search(r"calls=%?([\w.\-]+)", op.hlo).group(1)
        assert op.fused_body.splitlines()[0].startswith(f"%{called} (")
        body = [line.strip() for line in op.fused_body.splitlines()[1:-1]]
        cut = re.fullmatch(r"… (\d+) more instructions", body[-1])
        if cut:  # a long body is cut, saying how much was left out
            body = body[:-1]
        assert len(body) + (int(cut.group(1)) if cut else 0) == sizes[called]
        assert all(line == dumped[NAME.match(line).group(1)] for line in body)
    # the stack names the source line the report shows
    assert all(op.stack[0].startswith(op.source) for op in with_hlo if op.stack and op.source)


@pytest.mark.corpus
def test_v6e_hlo_lines_name_what_xla_printed(corpus_dir: Path) -> None:
    """On the TPU trace the HLO comes from the embedded HloProtos; XLA's text of the same
    modules (printed in its short form) agrees on each op's name, shape and opcode."""
    report = report_for(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb", page=True)
    reference = _xla_lines(sorted((corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*")))
    assert report.ops and all(op.hlo for op in report.ops)

    def head(line: str, opcode: str) -> str:  # "name = shape opcode(" without ROOT and %
        text = line.strip().removeprefix("ROOT ").lstrip("%")
        return text[: text.index(f" {opcode}(") + len(opcode) + 2]

    for op in report.ops:
        assert head(op.hlo, op.opcode) == head(reference[op.name], op.opcode)


def test_page_data_round_trips_and_stays_off_other_formats(
    transformer: Report, fixtures_dir: Path
) -> None:
    data = json.loads(json.dumps(transformer.to_dict()))
    back = Report.from_dict(data)
    assert back.to_dict() == data
    assert data["schema_version"] == 3
    for name in COLUMN_TYPES:
        step = data["timeline"]["steps"][0]
        assert len(decode_column(step[name], name)) == step["count"]
    plain = report_for(fixtures_dir / "transformer").to_dict()
    assert "timeline" not in plain
    assert all(op["hlo"] is None and op["stack"] == [] for op in plain["ops"])


def test_rules_carry_their_thresholds(fixtures_dir: Path, tmp_path: Path) -> None:
    config = RuleConfig.from_mapping({"efficiency_below": 0.2, "disabled": ["tile-padding"]})
    report = report_for(fixtures_dir / "transformer", config=config)
    far = report.rules["far-from-roofline"]
    assert far.thresholds == {"efficiency_below": 0.2, "min_time_share": 0.01}
    assert report.rules["tile-padding"].enabled is False
    assert report.rules["small-matmul"].thresholds["mxu_device_kinds"] == ["TPU"]
    fired = {f.rule for f in report.findings} - {"straggler-host"}
    assert fired <= set(report.rules)
    for entry in report.rules.values():
        for name, value in entry.thresholds.items():
            used = getattr(config, name)
            assert value == (list(used) if isinstance(used, tuple) else used)


def test_synthetic_profile_without_steps_draws_as_one(fixtures_dir: Path) -> None:
    """A corner case made from a real trace: its step column emptied, as for a trace with no
    step markers.  The whole profile becomes one timeline entry, step -1."""
    from dataclasses import replace

    from profan.report.analysis.page_data import timeline
    from profan.report.analysis.pipeline import analyse

    analysis = analyse(fixtures_dir / "transformer")
    report = report_for(fixtures_dir / "transformer")
    events = analysis.profile.ops.assign(step=pd.array([None] * len(analysis.profile.ops), "Int64"))
    built = timeline(replace(analysis.profile, ops=events), report.ops)
    (whole,) = built.steps
    assert whole.step == -1 and whole.count == len(events) and built.outside_steps == 0
    assert whole.start_s == events["start_s"].min()
    assert whole.columns()["start_ns"].min() == 0
    assert any("no steps" in note for note in built.notes)

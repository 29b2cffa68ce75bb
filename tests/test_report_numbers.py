"""The report's numbers on real traces, cross-checked against independent sources.

* the profiler's own Chrome-trace export (``vm.trace.json.gz``, written beside the xplane by
  ``jax.profiler``): op event durations and counts;
* ``meta.json`` of each fixture: step count, collectives in the HLO;
* ``profan.cost.estimate``: FLOPs per op;
* the TPU trace's own per-op stats.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.model import Report

FIXTURES = ("matmul", "mlp", "mlp_worse", "collectives", "transformer")
pytestmark = pytest.mark.slow
_CACHE: dict[str, tuple[object, Report]] = {}


def _report(path: Path) -> tuple[object, Report]:
    key = str(path)
    if key not in _CACHE:
        analysis = analyse(path)
        _CACHE[key] = (analysis, build_report(analysis))
    return _CACHE[key]


def _chrome_op_events(fixture: Path) -> list[dict]:
    (trace_json,) = fixture.glob("trace/plugins/profile/*/*.trace.json.gz")
    with gzip.open(trace_json) as handle:
        events = json.loads(handle.read())["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and "hlo_op" in e.get("args", {})]


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_report_numbers(fixtures_dir: Path, name: str) -> None:
    fixture = fixtures_dir / name
    meta = json.loads((fixture / "meta.json").read_text())
    _, report = _report(fixture)

    # every op event's time is in exactly one op row: equals the profiler's JSON export
    chrome = _chrome_op_events(fixture)
    chrome_total_s = sum(e["dur"] for e in chrome) * 1e-6
    assert sum(op.measured_s for op in report.ops) == pytest.approx(chrome_total_s, rel=1e-3)
    assert report.summary.total_op_time_s == pytest.approx(chrome_total_s, rel=1e-3)
    assert sum(op.occurrences for op in report.ops) == len(chrome)
    counts = Counter(e["args"]["hlo_op"] for e in chrome)
    for op in report.ops[:10]:
        assert op.occurrences == counts[op.name], op.name

    # steps as the fixture generator recorded them
    assert report.summary.step_count == meta["trace"]["steps"]
    assert len(report.steps) == meta["trace"]["steps"]
    assert report.device.count == len({e["args"].get("device_ordinal") for e in chrome})
    assert report.device.kind == "CPU"

    # MFU by its definition (SCHEMA.md) from independent figures: the steps' durations the
    # profiler recorded (meta.json), the FLOPs of every op (each runs once per step here), the
    # chip's bf16 peak per device and the devices that ran ops
    step_events = meta["trace"]["observed"].get("step_events", [])
    if step_events:
        flops_per_step = sum(op.flops for op in report.ops) / len(step_events)
        peak = report.chip.peak_flops_per_s
        expected = sum(
            flops_per_step / (peak * s["duration_ps"] * 1e-12 * report.device.count)
            for s in step_events
        ) / len(step_events)
        assert report.summary.mfu == pytest.approx(expected, rel=1e-9)

    # each device's busy span (first op start to last op end) from the profiler's JSON export;
    # time by category and by bound (overlapping ops sharing each instant) plus idle fill it
    spans: dict[object, tuple[float, float]] = {}
    for e in chrome:
        first, last = spans.get(e["args"].get("device_ordinal"), (math.inf, -math.inf))
        spans[e["args"].get("device_ordinal")] = (
            min(first, e["ts"]),
            max(last, e["ts"] + e["dur"]),
        )
    busy_span_s = sum(last - first for first, last in spans.values()) * 1e-6 / len(spans)
    s = report.summary
    assert s.busy_span_s == pytest.approx(busy_span_s, rel=1e-6)
    assert sum(s.time_by_category_s.values()) + s.idle_s == pytest.approx(s.busy_span_s, rel=1e-9)
    assert sum(s.time_by_bound_s.values()) == pytest.approx(s.busy_span_s, rel=1e-9)  # with idle

    # collectives in the report = collectives meta.json lists from the HLO
    expected = {c["name"] for c in meta.get("hlo_collectives", [])}
    found = {op.name for op in report.ops if op.category == "collective"}
    assert found == expected

    # exposed communication, recounted event by event from the profiler's JSON export
    assert report.summary.exposed_comm_s == pytest.approx(
        _exposed_by_brute_force(fixture, report), rel=1e-3, abs=1e-12
    )


@pytest.mark.parametrize("name", ("mlp", "transformer"))
def test_report_flops_equal_cost_model(fixtures_dir: Path, name: str) -> None:
    from profan.cost import estimate

    analysis, report = _report(fixtures_dir / name)
    profile = analysis.profile
    keys = {str(m): str(k) for m, k in profile.ops[["module", "module_key"]].dropna().values}
    checked = 0
    for op in report.ops:
        key = keys.get(op.module)
        instr = profile.instruction(key, op.name) if key else None
        if instr is None:
            continue
        cost = estimate(instr, profile.modules[key])
        if cost.flops is None:
            continue
        assert op.flops == pytest.approx(cost.flops * op.occurrences), op.name
        checked += 1
    assert checked >= 5


def test_matmul_flops_match_meta_truth(fixtures_dir: Path) -> None:
    """The matmul fixture's dot: 2·M·N·K over its (local) shapes, from meta.json's truth."""
    meta = json.loads((fixtures_dir / "matmul/meta.json").read_text())
    _, report = _report(fixtures_dir / "matmul")
    expected = 0.0
    for matmul in meta["truth"]["matmuls"]:
        sizes = matmul["dim_sizes"]
        total = 2.0
        for size in sizes.values():
            total *= size
        expected += total
    steps = meta["trace"]["steps"] * meta["trace"].get("executions_per_step", 1)
    matmul_flops = sum(op.flops for op in report.ops if op.category == "matmul")
    # the global FLOPs are split over the devices; summed over devices they come back whole
    assert matmul_flops == pytest.approx(expected * steps, rel=1e-12)


def test_tpu_trace_report(corpus_dir: Path) -> None:
    path = corpus_dir / "traces/tpu_v6e_inference.xplane.pb"
    analysis, report = _report(path)
    profile = analysis.profile
    assert report.device.kind == "TPU" and report.device.count == 4
    assert "v6" in (report.device.type or "")
    # the trace's own peak figures are the ones the report shows
    assert report.chip.source == "trace"
    assert report.chip.peak_flops_per_s == pytest.approx(profile.device.peak_flops_per_s, rel=1e-6)
    total = float(profile.ops["duration_s"].sum())
    assert sum(op.measured_s for op in report.ops) == pytest.approx(total, rel=1e-9)
    assert sum(op.occurrences for op in report.ops) == len(profile.ops)
    # each op's FLOPs: where the trace states them, profan's model agrees within 5%
    per_op_trace = profile.ops.groupby(["module", "op_name"])["trace_flops"].sum(min_count=1)
    compared = 0
    for op in report.ops:
        stated = per_op_trace.get((op.module, op.name))
        if stated is None or not math.isfinite(stated) or stated <= 0:
            continue
        assert op.flops == pytest.approx(stated, rel=1e-9), op.name
        compared += 1
    assert compared >= 1
    # MFU by its definition (SCHEMA.md): each step's model FLOPs, the trace's own stat here,
    # over the bf16 peak x the step's time x the devices with ops in it; the mean over steps
    ops = profile.ops[profile.ops["step"].notna()]
    peak = report.chip.peak_flops_per_s
    per_step = [
        float(ops.loc[ops["step"] == row.step, "trace_model_flops"].sum())
        / (peak * row.duration_s * ops.loc[ops["step"] == row.step, "device"].nunique())
        for row in profile.steps.itertuples()
        if (ops["step"] == row.step).any()
    ]
    assert len(per_step) == report.summary.step_count
    assert report.summary.mfu == pytest.approx(sum(per_step) / len(per_step), rel=1e-9)
    unmatched = sum(u["count"] for u in report.unmatched)
    assert unmatched == sum(u.count for u in profile.unmatched)
    # the JSON report carries every op with the schema's fields
    data = report.to_dict()
    assert data["schema_version"] == 3
    fields = set(
        [
            "module",
            "name",
            "opcode",
            "category",
            "occurrences",
            "measured_s",
            "flops",
            "hbm_bytes",
            "ici_bytes",
            "t_compute_s",
            "t_hbm_s",
            "t_ici_s",
            "roofline_s",
            "bound_by",
            "efficiency",
            "collective",
            "global_shapes",
            "source",
            "flags",
        ]
    )
    assert all(fields <= set(op) for op in data["ops"])
    assert Report.from_dict(json.loads(json.dumps(data))).to_dict() == data


def _exposed_by_brute_force(fixture: Path, report: Report) -> float:
    """Collective time not covered by compute on the same device, per device: every
    collective event's interval cut by the compute events' intervals, from the profiler's own
    JSON export (no interval arithmetic of profan's)."""
    category = {op.name: op.category for op in report.ops}
    compute = {"matmul", "elementwise", "reduction", "data-movement", "custom", "other"}
    by_device: dict[str, list[tuple[float, float, str]]] = {}
    for e in _chrome_op_events(fixture):
        device = e["args"].get("device_ordinal")
        by_device.setdefault(device, []).append((e["ts"], e["ts"] + e["dur"], e["args"]["hlo_op"]))
    exposed_us = 0.0
    for events in by_device.values():
        busy = [(s, t) for s, t, name in events if category.get(name) in compute]
        for s, t, name in events:
            if category.get(name) != "collective":
                continue
            points = sorted({s, t, *(x for a, b in busy for x in (a, b) if s < x < t)})
            covered = sum(
                b - a
                for a, b in itertools.pairwise(points)
                if any(u <= a and b <= v for u, v in busy)
            )
            exposed_us += (t - s) - covered
    return exposed_us * 1e-6 / len(by_device)


def test_exposed_collective_rule_on_the_worse_sharding(fixtures_dir: Path) -> None:
    """mlp_worse's heaviest collective is mostly exposed, and the rule says so."""
    fixture = fixtures_dir / "mlp_worse"
    _, report = _report(fixture)
    flagged = {f.name for f in report.findings if f.rule == "exposed-collective"}
    worst = max(
        (op for op in report.ops if op.category == "collective"), key=lambda op: op.measured_s
    )
    assert worst.exposed_s / worst.measured_s > 0.5
    assert worst.name in flagged


def test_tpu_trace_host_offload_rules(corpus_dir: Path) -> None:
    """The v6e trace offloads activations to host memory (copy-start/-done to S(5))."""
    _, report = _report(corpus_dir / "traces/tpu_v6e_inference.xplane.pb")
    by_rule: dict[str, set[str]] = {}
    for f in report.findings:
        by_rule.setdefault(f.rule, set()).add(f.name or "")
    host = by_rule.get("host-transfer", set())
    assert host, "the host-offload copies dominate this trace"
    assert all(name.startswith("copy-done") for name in host)  # starts only issue the copy
    # a copy between memory spaces is not a relayout
    assert "relayout-copy" not in by_rule
    # the heaviest host copies are the ones flagged
    heaviest = max((op for op in report.ops if op.category == "host"), key=lambda op: op.measured_s)
    assert heaviest.name in host


@pytest.mark.parametrize("name", ["mi300x_jax_conv", "mi300x_jax_conv_legacy"])
def test_gpu_trace_report(corpus_dir: Path, name: str) -> None:
    analysis, report = _report(corpus_dir / f"traces/{name}.xplane.pb")
    profile = analysis.profile
    assert report.device.kind == "GPU" and report.device.count == 8
    total = float(profile.ops["duration_s"].sum())
    assert sum(op.measured_s for op in report.ops) == pytest.approx(total, rel=1e-9)
    assert report.summary.step_count == len(profile.steps)
    # the JAX 3-D convolution spends most bytes transposing its input into cuDNN's layout
    relayouts = {f.name for f in report.findings if f.rule == "relayout-copy"}
    assert "input_transpose_fusion" in relayouts
    op = next(op for op in report.ops if op.name == "input_transpose_fusion")
    assert op.hbm_bytes / sum(o.hbm_bytes for o in report.ops) > 0.05
    assert op.category == "data-movement"
    # gaps between steps, from the loader's step table
    steps = profile.steps.sort_values("step")
    gaps = (steps["start_s"].to_numpy()[1:] - steps["end_s"].to_numpy()[:-1]).clip(min=0)
    assert report.summary.inter_step_gap_max_s == pytest.approx(float(gaps.max()))
    median = float(steps["duration_s"].median())
    idle_rule = [
        f for f in report.findings if f.rule == "idle-gaps" and "between steps" in f.message
    ]
    assert bool(idle_rule) == (gaps.max() > 0.10 * median)
    # far-from-roofline flags exactly the ops above 1% of the time under 10% efficiency
    total_time = sum(op.measured_s for op in report.ops)
    for op in report.ops:
        expected = (
            op.measured_s >= 0.01 * total_time
            and op.efficiency is not None
            and op.roofline_s > 0
            and op.efficiency < 0.10
        )
        assert ("far-from-roofline" in op.flags) == expected, op.name


def test_terminal_colour_only_when_asked(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from profan.report.render import terminal

    _, report = _report(fixtures_dir / "mlp")
    assert "\x1b[" in terminal.render(report, colour=True)
    assert "\x1b[" not in terminal.render(report, colour=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert terminal.use_colour(io.StringIO())
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not terminal.use_colour(io.StringIO())
    monkeypatch.delenv("NO_COLOR")
    assert not terminal.use_colour(io.StringIO())  # not a TTY


def test_collective_groups_match_the_printed_replica_groups(fixtures_dir: Path) -> None:
    """mlp_worse's three collectives (meta.json lists how XLA printed their groups) on a 4 (data)
    × 2 (model) mesh: ``mesh['axis_0'=4,'axis_1'=2] {'axis_1'}`` is 4 groups of 2 along the model
    axis, ``[4,2]<=[8]`` 4 groups of 2, ``{{0,2,4,6},{1,3,5,7}}`` 2 groups of 4."""
    meta = json.loads((fixtures_dir / "mlp_worse/meta.json").read_text())
    printed = {c["name"]: c["groups"] for c in meta["hlo_collectives"]}
    assert printed["all-reduce.6"] == "replica_groups={{0,2,4,6},{1,3,5,7}}"
    _, report = _report(fixtures_dir / "mlp_worse")
    found = {op.name: op.collective for op in report.ops if op.collective}
    assert set(found) == set(printed)
    assert (found["all-gather"]["group_size"], found["all-gather"]["groups"]) == (2, 4)
    assert (found["all-reduce.5"]["group_size"], found["all-reduce.5"]["groups"]) == (2, 4)
    assert (found["all-reduce.6"]["group_size"], found["all-reduce.6"]["groups"]) == (4, 2)
    # the sharding analysis names the mesh axis of each: the 2-wide groups run over the axis of
    # size 2, the 4-wide group over the axis of size 4
    mesh = next(iter(report.summary.mesh.values()))
    for collective in found.values():
        (axis,) = collective["axes"]
        assert mesh[axis] == collective["group_size"]
    # bytes: the op's own output, e.g. the all-gather's f32[64,256] (h gathered over model)
    gather = next(op for op in report.ops if op.name == "all-gather")
    dims = [int(d) for d in gather.shape.split("[")[1].rstrip("]").split(",")]
    assert found["all-gather"]["bytes"] == 4 * math.prod(dims)


def test_busy_span_and_idle_per_host_and_device(fixtures_dir: Path) -> None:
    """The multi-host fixture (3 hosts × 2 devices, recorded by JAX's distributed runtime):
    each (host, device) timeline's busy span and idle time, merged here interval by interval in
    plain Python, averaged over the timelines, are the summary's figures."""
    analysis, report = _report(fixtures_dir / "multihost")
    ops = analysis.profile.ops
    spans, idles = [], []
    for _, events in ops.groupby(["host", "device"], observed=True):
        intervals = sorted(
            zip(events["start_s"], events["start_s"] + events["duration_s"], strict=True)
        )
        covered, current_start, current_end = 0.0, *intervals[0]
        for start, end in intervals[1:]:
            if start > current_end:
                covered += current_end - current_start
                current_start, current_end = start, end
            else:
                current_end = max(current_end, end)
        covered += current_end - current_start
        span = max(e for _, e in intervals) - intervals[0][0]
        spans.append(span)
        idles.append(span - covered)
    assert len(spans) == 6
    assert report.summary.busy_span_s == pytest.approx(sum(spans) / 6, rel=1e-9)
    assert report.summary.idle_s == pytest.approx(sum(idles) / 6, rel=1e-9, abs=1e-15)

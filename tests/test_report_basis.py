"""Every headline figure says its basis, and the per-step figures are the steps' own.

The per-step time by bound (JSON ``steps[].time_<bound>_s``, ``idle_s``; the HTML chart and the
PNG) is recomputed here from the report's own timeline slices (each step's op executions per
device, as the page draws them) and each op's bound: every instant shared evenly by the ops
running then, idle where none runs, per device.  The shares of op time scaled to the step (what
the chart drew before) put 3.3 ms of compute in the H200's steps against 2.46 ms."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from profan.report.analysis.build import build_report
from profan.report.analysis.page_data import add_page_data
from profan.report.analysis.pipeline import analyse
from profan.report.model import Report
from profan.report.render import html, markdown, plots, terminal
from profan.roofline import BOUNDS

CHARTS_JS = Path(__file__).resolve().parent.parent / "profan/report/render/html/assets/charts.js"
_CACHE: dict[str, Report] = {}


def _report(path: Path) -> Report:
    if str(path) not in _CACHE:
        analysis = analyse(path)
        report = build_report(analysis)
        add_page_data(report, analysis.profile)
        _CACHE[str(path)] = report
    return _CACHE[str(path)]


def _even_split(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Each interval's share of the time it covers, an instant split evenly among the
    intervals covering it (brute force over elementary segments)."""
    edges = np.unique(np.concatenate([starts, ends]))
    shares = np.zeros(len(starts))
    for low, high in itertools.pairwise(edges):
        covering = (starts <= low) & (ends >= high)
        if covering.any():
            shares[covering] += (high - low) / covering.sum()
    return shares


def _recomputed(report: Report) -> dict[int, dict[str, float]]:
    """Per step: each bound's time per device and idle, from the timeline slices."""
    assert report.timeline is not None
    in_flight = [bool(lane.get("in_flight")) for lane in report.timeline.lanes]
    out: dict[int, dict[str, float]] = {}
    measured = {s.step: s.measured_s for s in report.steps}
    for slices in report.timeline.steps:
        if slices.step not in measured:
            continue
        columns = slices.columns()
        times = dict.fromkeys((*BOUNDS, "unknown"), 0.0)
        devices = 0
        for lane in np.unique(columns["lane"]):
            if in_flight[lane]:
                continue  # async spans: the page's own lanes, not executions
            mine = columns["lane"] == lane
            starts = columns["start_ns"][mine] * 1e-9
            ends = starts + columns["duration_ns"][mine] * 1e-9
            shares = _even_split(starts, ends)
            for op, share in zip(columns["op"][mine], shares, strict=True):
                bound = report.ops[op].bound_by if op >= 0 else "unknown"
                times[bound if bound in times else "unknown"] += share
            devices += 1
        per_device = {k: v / max(devices, 1) for k, v in times.items()}
        per_device["idle"] = measured[slices.step] - sum(per_device.values())
        per_device["events"] = float(len(columns["op"]))
        out[slices.step] = per_device
    return out


@pytest.fixture(scope="module", params=["gpu_transformer_h200", "transformer"])
def stepped(request: pytest.FixtureRequest, fixtures_dir: Path) -> Report:
    return _report(fixtures_dir / request.param)


def _tolerance(events: float) -> float:
    return 2e-9 * events + 1e-9  # the slices are whole nanoseconds


def test_steps_split_their_time_by_bound_with_idle(stepped: Report) -> None:
    expected = _recomputed(stepped)
    assert expected
    for step in stepped.steps:
        want = expected[step.step]
        assert step.score is not None
        times = step.score.times_s()
        for bound in (*BOUNDS, "unknown"):
            got = times[bound]
            assert got == pytest.approx(want[bound], abs=_tolerance(want["events"])), bound
        assert step.score.idle_s == pytest.approx(want["idle"], abs=_tolerance(want["events"]))
        parts = sum(times[b] or 0.0 for b in (*BOUNDS, "unknown")) + (step.score.idle_s or 0.0)
        assert parts == pytest.approx(step.measured_s, rel=1e-9)


def test_h200_compute_per_step_is_the_real_one(fixtures_dir: Path) -> None:
    """The whole trace's compute per device over its 3 steps (the summary's), not the share of
    op time scaled to the step (0.48 x 6.8 ms = 3.3 ms)."""
    report = _report(fixtures_dir / "gpu_transformer_h200")
    whole = report.summary.time_by_bound_s["compute"]
    for step in report.steps:
        assert step.score is not None
        compute = step.score.time_compute_s or 0.0
        assert compute == pytest.approx(whole / len(report.steps), rel=0.01)
        assert (step.score.share_compute or 0.0) * step.measured_s > compute * 1.2


def test_png_bars_are_the_steps_figures(stepped: Report) -> None:
    expected = _recomputed(stepped)
    figure = plots.time_per_step(stepped)
    axes = figure.axes[0]
    unit = re.search(r"\((ms|µs|s)\)", axes.get_ylabel())
    assert unit, axes.get_ylabel()
    factor = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}[unit.group(1)]
    drawn: dict[str, list[float]] = {}
    for container, label in zip(axes.containers, axes.get_legend_handles_labels()[1], strict=True):
        drawn[label] = [bar.get_height() * factor for bar in container]
    assert "idle" in drawn
    for k, step in enumerate(stepped.steps):
        want = expected[step.step]
        for label, heights in drawn.items():
            assert heights[k] == pytest.approx(want[label], abs=_tolerance(want["events"]))


def test_page_chart_draws_the_steps_figures(stepped: Report) -> None:
    """charts.js's stepParts, run under node on the page's steps, gives each bound's time and
    idle as recomputed here."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    source = CHARTS_JS.read_text()
    function = re.search(r"function stepParts\(step\) \{.*?\n\}\n", source, re.S)
    assert function, "charts.js has no stepParts"
    script = (
        function.group(0)
        + "const steps = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        + "console.log(JSON.stringify(steps.map((s) => Object.fromEntries(stepParts(s)))));"
    )
    done = subprocess.run(
        [node, "-e", script],
        input=json.dumps(stepped.to_dict()["steps"]),
        capture_output=True,
        text=True,
        check=True,
    )
    expected = _recomputed(stepped)
    for step, parts in zip(stepped.steps, json.loads(done.stdout), strict=True):
        want = expected[step.step]
        assert parts["idle"] == pytest.approx(want["idle"], abs=_tolerance(want["events"]))
        for bound in BOUNDS:
            assert parts[bound] == pytest.approx(want[bound], abs=_tolerance(want["events"]))


TIME = r"(\d+(?:\.\d+)?) (s|ms|µs|ns)"
FACTOR = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def _seconds(match: re.Match, first: int) -> float:
    return float(match.group(first)) * FACTOR[match.group(first + 1)]


def _headline_text(report: Report, fmt: str) -> str:
    if fmt == "term":
        return " ".join(terminal.render(report, width=400).split())
    if fmt == "md":
        return " ".join(markdown.render(report).split())
    return " ".join(html.render(report).split())


@pytest.mark.parametrize("fmt", ["term", "md", "html"])
def test_comm_and_idle_say_per_step_beside_the_step(fixtures_dir: Path, fmt: str) -> None:
    """transformer: 11.4 ms steps, collectives 23.6 ms over the whole trace (was printed beside
    the step as if it were a step's).  The per-step figures are the whole trace's over its 3
    steps and the steps' own idle time, recomputed from the slices."""
    report = _report(fixtures_dir / "transformer")
    text = _headline_text(report, fmt)
    s = report.summary
    steps = len(report.steps)
    comm = re.search(
        r"per step per device: collectives " + TIME + r", of which " + TIME + " exposed", text
    )
    assert comm, text[:2000]
    assert _seconds(comm, 1) == pytest.approx(s.collective_time_s / steps, rel=5e-3)
    assert _seconds(comm, 3) == pytest.approx(s.exposed_comm_s / steps, rel=5e-3)
    assert "whole trace per device: collectives" in text
    idle = re.search(r"per step per device: " + TIME + " with no op running", text)
    assert idle
    recomputed = _recomputed(report)
    mean_idle = sum(v["idle"] for v in recomputed.values()) / len(recomputed)
    assert _seconds(idle, 1) == pytest.approx(mean_idle, rel=5e-3)
    assert f"whole trace per device: {_fmt_whole(s.idle_s)} between its first and last op" in text
    assert "per device, whole trace" in text  # the time-by-category/bound lines say their basis


def _fmt_whole(value: float) -> str:
    from profan.units import seconds

    return seconds(value)


@pytest.mark.parametrize("fmt", ["term", "md", "html", "json"])
def test_a_trace_of_part_of_the_job_says_so(corpus_dir: Path, fmt: str) -> None:
    """The v6e trace holds 4 devices; jit_f's mesh (axis0=8) spans 8."""
    report = _report(corpus_dir / "traces/tpu_v6e_inference.xplane.pb")
    assert report.device.count == 4
    sizes = [int(np.prod(list(axes.values()))) for axes in report.summary.mesh.values() if axes]
    assert max(sizes) == 8
    text = json.dumps(report.to_dict()["trace"]) if fmt == "json" else _headline_text(report, fmt)
    assert "the trace holds 4 of the 8 devices" in text


def test_a_whole_job_has_no_such_note(fixtures_dir: Path) -> None:
    report = _report(fixtures_dir / "transformer")  # 8 devices, mesh data=4 x model=2
    assert report.trace.devices_partial is None
    assert "devices_partial" not in report.to_dict()["trace"]

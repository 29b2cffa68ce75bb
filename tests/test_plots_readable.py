"""Plots a reader can read: time axes in ms/µs (never raw seconds), tick labels that do not
overprint at any step count, log scales where values span decades, axes and legends on every
plot, collectives against the interconnect and not the FLOP/HBM roofline, host and async
transfers shown; the memory SVGs with axes and legends."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from profan.memory.render import buffers_svg, timeline_svg
from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.model import Report
from profan.report.render import plots

_CACHE: dict[str, Report] = {}


def _report(path: Path) -> Report:
    if str(path) not in _CACHE:
        _CACHE[str(path)] = build_report(analyse(path))
    return _CACHE[str(path)]


def _v6e(corpus_dir: Path) -> Report:
    return _report(corpus_dir / "traces/tpu_v6e_inference.xplane.pb")


def _label_boxes(figure, axis):  # type: ignore[no-untyped-def]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    return [
        label.get_window_extent(renderer)
        for label in axis.get_ticklabels()
        if label.get_visible() and label.get_text()
    ]


def test_step_labels_do_not_overprint_at_100_steps(corpus_dir: Path) -> None:
    report = _v6e(corpus_dir)
    assert len(report.steps) == 100
    figure = plots.time_per_step(report)
    boxes = _label_boxes(figure, figure.axes[0].xaxis)
    assert 2 <= len(boxes) <= 20
    boxes.sort(key=lambda box: box.x0)
    for left, right in itertools.pairwise(boxes):
        assert left.x1 < right.x0, "step labels overlap"


@pytest.mark.parametrize("name", ["transformer", "gpu_transformer_h200", "mlp"])
def test_time_axes_read_in_a_time_unit(fixtures_dir: Path, name: str) -> None:
    report = _report(fixtures_dir / name)
    steps = plots.time_per_step(report).axes[0]
    unit = re.search(r"\((ms|µs|ns|s)\)", steps.get_ylabel())
    assert unit and "per device" in steps.get_ylabel()
    tallest = max(bar.get_height() for bar in steps.patches)
    assert 1 <= tallest < 1000  # the unit is the one that reads 1..1000
    assert steps.get_ylabel() != "seconds"
    measured = plots.measured_vs_ideal(report).axes[0]
    assert measured.get_xscale() == "log"  # ideals 1/100 of the measured time stay visible
    measured.figure.canvas.draw()
    ticks = [t.get_text() for t in measured.get_xticklabels() if t.get_text()]
    assert ticks and all(re.fullmatch(r"\d+(\.\d+)? (s|ms|µs|ns|ps)", t) for t in ticks), ticks


@pytest.mark.parametrize("name", ["transformer", "gpu_transformer_h200"])
def test_every_plot_has_axes_and_a_legend(fixtures_dir: Path, name: str) -> None:
    report = _report(fixtures_dir / name)
    for make in plots.PLOTS.values():
        figure = make(report)
        for axes in figure.axes:
            assert axes.get_xlabel() and axes.get_ylabel(), make.__name__
            if axes.get_legend_handles_labels()[0]:
                assert axes.get_legend() is not None, make.__name__


def _points(axes) -> int:  # type: ignore[no-untyped-def]
    return sum(len(collection.get_offsets()) for collection in axes.collections)


def test_collectives_sit_under_the_interconnect_not_the_hbm_roofline(fixtures_dir: Path) -> None:
    """transformer: 11 all-reduces in its top ops (83% of the time) were dots on the FLOP/HBM
    roofline."""
    report = _report(fixtures_dir / "transformer")
    figure = plots.roofline(report)
    compute, transfers = figure.axes
    collectives = [
        op for op in report.ops if op.category == "collective" and op.measured_s > 0 and op.flops
    ]
    assert collectives
    labels = compute.get_legend_handles_labels()[1]
    assert "collective" not in labels
    assert "collective" in transfers.get_legend_handles_labels()[1]
    assert _points(transfers) == len(collectives)
    assert any("interconnect" in label for label in transfers.get_legend_handles_labels()[1])


def test_host_offload_transfers_are_shown(corpus_dir: Path) -> None:
    """v6e: the copy-done host transfers hold most of the time; they were left out."""
    report = _v6e(corpus_dir)
    dones = [op for op in report.ops if op.opcode == "copy-done" and op.async_span_s]
    assert dones
    transfers = plots.roofline(report).axes[1]
    labels = transfers.get_legend_handles_labels()[1]
    assert "host / async transfer" in labels
    assert any("host link" in label for label in labels)
    assert _points(transfers) >= len(dones)


def test_memory_svgs_have_axes_and_legends() -> None:
    heap = [0, 1000, 5000, 3000, 250_000, 1000]
    svg = timeline_svg(heap, 4, 250_000)
    assert "250 kB" in svg and "0 B" in svg  # the size axis
    assert "program order" in svg  # the x axis
    assert "heap in use" in svg and "peak 250 kB" in svg  # the legend
    bars = buffers_svg([("a", 65_500, "parameter", "f32[64]"), ("b", 32_800, "temporary", "")])
    assert ">parameter<" in bars and ">temporary<" in bars  # the legend of kinds
    assert "buffer size" in bars

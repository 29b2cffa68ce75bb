"""Report plots (matplotlib, Agg backend): roofline chart, time per step, measured vs ideal."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a window
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from profan.outputs import write_file
from profan.report.model import OpEntry, Report, StepRow
from profan.units import TIME_UNITS, seconds, si

CATEGORY_COLOURS = {
    "matmul": "#1f77b4",
    "collective": "#d62728",
    "elementwise": "#2ca02c",
    "reduction": "#9467bd",
    "data-movement": "#ff7f0e",
    "host": "#8c564b",
    "control": "#7f7f7f",
    "custom": "#e377c2",
    "other": "#bcbd22",
}
BOUND_COLOURS = {
    "compute": "#1f77b4",
    "hbm": "#ff7f0e",
    "ici": "#d62728",
    "latency": "#9467bd",
    "host": "#8c564b",
    "unknown": "#7f7f7f",
    "idle": "#c7c7c7",
}


def time_unit(largest_s: float) -> tuple[float, str]:
    """The unit a time axis reads in (its largest value from 1 to 1000 of it): ``(1e-3, "ms")``."""
    for factor, unit in TIME_UNITS:
        if largest_s >= factor:
            return factor, unit
    return TIME_UNITS[-1]


def thin_ticks(ax: Axes, positions: Sequence[float], labels: list[str], most: int = 15) -> None:
    """Label at most ``most`` of the positions (every k-th), so the labels never overprint."""
    every = max(1, math.ceil(len(positions) / most))
    ax.set_xticks(positions[::every])
    ax.set_xticklabels(labels[::every], fontsize=8)


def _transfer_time(op: OpEntry) -> tuple[float, int]:
    """The time an op's transfers took and how many: an async done's start-to-done spans (its
    measured time is only its exposed wait), else its measured time over its executions."""
    if op.async_span_s is not None and op.async_span_n:
        return op.async_span_s, op.async_span_n
    return op.measured_s, op.occurrences


def _moves_elsewhere(op: OpEntry) -> bool:
    """A collective, a host transfer or an async copy: bytes over a link, not only HBM."""
    spaces = op.bytes_by_space or {}
    return not _async_start(op) and (
        op.category in ("collective", "host")
        or op.bound_by in ("ici", "host")
        or op.async_span_s is not None
        or op.exposed_wait_s is not None
        or any(space != "hbm" and moved > 0 for space, moved in spaces.items())
    )


def _async_start(op: OpEntry) -> bool:
    """An async start: it only launches the transfer, which its done's span times."""
    return op.opcode.endswith("-start")


def _transfer_bytes(op: OpEntry) -> float:
    """Bytes an op moves over its link: interconnect bytes, else those outside HBM, else HBM."""
    elsewhere = sum(v for k, v in (op.bytes_by_space or {}).items() if k != "hbm")
    return op.ici_bytes or elsewhere or op.hbm_bytes


def _marker_sizes(ops: list[OpEntry], largest: float) -> list[float]:
    return [12 + 80 * math.sqrt(op.measured_s / largest) if largest > 0 else 20 for op in ops]


def _compute_panel(ax: Axes, report: Report, points: list[OpEntry], largest: float) -> None:
    """Compute and HBM ops at (FLOPs per HBM byte, achieved FLOP/s) under the chip's roofline."""
    for category in sorted({op.category for op in points}):
        chosen = [op for op in points if op.category == category]
        ax.scatter(
            [op.flops / op.hbm_bytes for op in chosen],
            [op.flops / op.measured_s for op in chosen],
            s=_marker_sizes(chosen, largest),
            c=CATEGORY_COLOURS.get(category, "#17becf"),
            label=category,
            alpha=0.75,
            edgecolors="black",
            linewidths=0.3,
        )
    peak = report.chip.peak_flops_per_s
    bandwidth = report.chip.hbm_bytes_per_s_device
    intensities = [op.flops / op.hbm_bytes for op in points] or [1.0]
    low = min(min(intensities) / 4, 0.1)
    high = max(max(intensities) * 4, (peak / bandwidth * 4) if peak and bandwidth else 10.0)
    if peak and bandwidth:
        xs = [low * (high / low) ** (i / 200) for i in range(201)]
        ax.plot(
            xs,
            [min(peak, x * bandwidth) for x in xs],
            color="black",
            lw=1.5,
            label=f"roofline ({si(peak, 'FLOP/s')}, HBM {si(bandwidth, 'B/s')})",
        )
        ax.axvline(peak / bandwidth, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / HBM byte)")
    ax.set_ylabel("achieved FLOP/s, per device")
    ax.set_title("compute and HBM ops", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no op with FLOPs and HBM bytes", ha="center", transform=ax.transAxes)


def _transfer_panel(ax: Axes, report: Report, moves: list[OpEntry], largest: float) -> None:
    """Collectives, host and async transfers at (bytes per transfer, achieved bytes/s) under
    the links they use: the interconnect and the host link, not the FLOP/HBM roofline."""
    groups = {
        "collective": [op for op in moves if op.category == "collective"],
        "host / async transfer": [op for op in moves if op.category != "collective"],
    }
    markers = {"collective": "o", "host / async transfer": "s"}
    colours = {"collective": CATEGORY_COLOURS["collective"], "host / async transfer": "#8c564b"}
    for name, chosen in groups.items():
        shown = [op for op in chosen if _transfer_time(op)[0] > 0 and _transfer_bytes(op) > 0]
        if not shown:
            continue
        ax.scatter(
            [_transfer_bytes(op) / _transfer_time(op)[1] for op in shown],
            [_transfer_bytes(op) / _transfer_time(op)[0] for op in shown],
            s=_marker_sizes(shown, largest),
            c=colours[name],
            marker=markers[name],
            label=name,
            alpha=0.75,
            edgecolors="black",
            linewidths=0.3,
        )
    chip = report.chip
    links = chip.ici_links or 1
    link = chip.ici_link_bytes_per_s_uni
    roofs = [
        ("interconnect", link * links if link else None, "#d62728", "-"),
        ("host link (PCIe)", chip.pcie_bytes_per_s, "#8c564b", "--"),
        ("HBM", chip.hbm_bytes_per_s_device, "black", ":"),
    ]
    for name, rate, colour, style in roofs:
        if rate:
            ax.axhline(rate, color=colour, ls=style, lw=1.2, label=f"{name} {si(rate, 'B/s')}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bytes per transfer")
    ax.set_ylabel("achieved bytes/s (async: start to done)")
    ax.set_title("collectives, host and async transfers", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    if not any(groups.values()):
        ax.text(0.5, 0.5, "no collective or transfer", ha="center", transform=ax.transAxes)


def roofline(report: Report) -> Figure:
    """Two panels: compute/HBM ops against the FLOP/HBM roofline, and collectives, host and
    async transfers against the interconnect and host-link bandwidths (a collective scored
    against FLOPs per HBM byte would sit under a roof it never meets)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=100)
    usable = [
        op for op in report.ops if op.measured_s > 0 and op.occurrences > 0 and not _async_start(op)
    ]
    moves = [op for op in usable if _moves_elsewhere(op)]
    points = [op for op in usable if not _moves_elsewhere(op) and op.flops > 0 and op.hbm_bytes > 0]
    largest = max((op.measured_s for op in usable), default=0.0)
    _compute_panel(left, report, points, largest)
    _transfer_panel(right, report, moves, largest)
    name = report.chip.display_name or report.chip.name
    fig.suptitle(f"Roofline: {name} (marker area: the op's measured time, all devices)")
    fig.tight_layout()
    return fig


def step_parts(step: StepRow) -> tuple[dict[str, float], bool]:
    """A step's time per device by bound, then idle (the scorer's ``time_<bound>_s`` and
    ``idle_s``, which sum to its ``measured_s``), and whether it has them; a report written
    before them has only shares of op time, returned scaled to the step (``False``)."""
    if step.score is None:
        return {}, False
    times = step.score.times_s().items()
    timed = {bound: float(value or 0.0) for bound, value in times if value is not None}
    if timed:
        return {**timed, "idle": float(step.score.idle_s or 0.0)}, True
    shares = step.score.shares().items()
    return {k: float(v or 0.0) * step.measured_s for k, v in shares if v is not None}, False


def time_per_step(report: Report) -> Figure:
    """Each step's time per device by bound and idle, one bar per step."""
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=100)
    steps = [s for s in report.steps if s.measured_s]
    parts = [step_parts(s) for s in steps]
    if steps and any(p for p, _ in parts):
        factor, unit = time_unit(max(float(s.measured_s) for s in steps))
        positions = list(range(len(steps)))
        bottom = [0.0] * len(steps)
        names = list(dict.fromkeys(name for p, _ in parts for name in p))
        for bound in names:
            heights = [p.get(bound, 0.0) / factor for p, _ in parts]
            if not any(heights):
                continue
            colour = BOUND_COLOURS.get(bound, "#17becf")
            ax.bar(positions, heights, bottom=bottom, width=0.85, color=colour, label=bound)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        thin_ticks(ax, positions, [str(s.step) for s in steps])
        exact = all(timed for _, timed in parts)
        title = "Step time by bound, idle included" if exact else "Step time by share of op time"
        ax.set_xlabel("step")
        ax.set_ylabel(f"time per step, per device ({unit})")
    else:  # no steps: the whole profile's time by bound, one bar
        bounds = {k: v for k, v in report.summary.time_by_bound_s.items() if v > 0}
        factor, unit = time_unit(sum(bounds.values()))
        bottom_value = 0.0
        for bound, value in bounds.items():
            colour = BOUND_COLOURS.get(bound, "#17becf")
            ax.bar(["profile"], [value / factor], bottom=[bottom_value], color=colour, label=bound)
            bottom_value += value / factor
        title = "Time by bound, whole profile"
        ax.set_ylabel(f"time per device ({unit})")
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    return fig


def measured_vs_ideal(report: Report, top: int = 15) -> Figure:
    """The top ops' measured and ideal times on a log axis (an ideal a hundredth of the measured
    time would be a hairline on a linear one)."""
    ops = report.ops[:top]
    fig, ax = plt.subplots(figsize=(8, 0.3 * max(len(ops), 4) + 1.4), dpi=100)
    names = [op.label if len(op.label) < 40 else op.label[:37] + "…" for op in ops]
    ys = list(range(len(ops)))[::-1]
    measured = [
        _transfer_time(op)[0] if op.async_span_s is not None else op.measured_s for op in ops
    ]
    ideal = [
        op.async_span_ideal_s
        if op.async_span_s is not None and op.async_span_ideal_s
        else op.roofline_s
        for op in ops
    ]
    positive = [v for v in measured + ideal if v and v > 0]
    for offset, values, colour, label in (
        (0.2, measured, "#d62728", "measured"),
        (-0.2, ideal, "#2ca02c", "ideal (roofline)"),
    ):
        shown = [(y + offset, v) for y, v in zip(ys, values, strict=True) if v and v > 0]
        if shown:
            ax.barh(
                [y for y, _ in shown], [v for _, v in shown], height=0.4, color=colour, label=label
            )
    if positive:
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 2, max(positive) * 2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: seconds(value)))
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=7)
    ax.set_ylabel("op (heaviest first)")
    ax.set_xlabel("time, summed over all devices and executions (log scale)")
    ax.set_title("Measured vs ideal, top ops (async dones: their transfers' spans)")
    ax.grid(True, axis="x", which="both", alpha=0.25)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


PLOTS = {
    "roofline": roofline,
    "time_per_step": time_per_step,
    "measured_vs_ideal": measured_vs_ideal,
}


def render_png(report: Report) -> dict[str, bytes]:
    """Each plot as PNG bytes."""
    out: dict[str, bytes] = {}
    for name, make in PLOTS.items():
        fig = make(report)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        plt.close(fig)
        out[name] = buffer.getvalue()
    return out


def write_pngs(pngs: dict[str, bytes], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in pngs.items():
        path = out_dir / f"{name}.png"
        write_file(path, data, "--out")
        paths.append(path)
    return paths

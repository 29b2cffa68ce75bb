"""Report plots (matplotlib, Agg backend): roofline chart, time per step, measured vs ideal."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a window
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from profan.outputs import write_file
from profan.report.model import Report

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


def roofline(report: Report) -> Figure:
    """Every op with FLOPs and bytes, at (intensity, achieved FLOP/s), under the chip's roofs."""
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=100)
    points = [
        op
        for op in report.ops
        if op.flops > 0 and op.hbm_bytes > 0 and op.measured_s > 0 and op.occurrences > 0
    ]
    for category in sorted({op.category for op in points}):
        chosen = [op for op in points if op.category == category]
        ax.scatter(
            [op.flops / op.hbm_bytes for op in chosen],
            [op.flops / op.measured_s for op in chosen],
            s=[
                12 + 80 * math.sqrt(op.measured_s / max(p.measured_s for p in points))
                for op in chosen
            ],
            c=CATEGORY_COLOURS.get(category, "#17becf"),
            label=category,
            alpha=0.75,
            edgecolors="black",
            linewidths=0.3,
        )
    peak = report.chip.get("peak_flops_per_s")
    bandwidth = report.chip.get("hbm_bytes_per_s_device")
    intensities = [op.flops / op.hbm_bytes for op in points] or [1.0]
    low = min(min(intensities) / 4, 0.1)
    high = max(max(intensities) * 4, (peak / bandwidth * 4) if peak and bandwidth else 10.0)
    if peak and bandwidth:
        xs = [low * (high / low) ** (i / 200) for i in range(201)]
        ax.plot(xs, [min(peak, x * bandwidth) for x in xs], color="black", lw=1.5, label="roofline")
        ax.axvline(peak / bandwidth, color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs / HBM byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"Roofline: {report.chip.get('display_name') or report.chip.get('name', '')}")
    ax.grid(True, which="both", alpha=0.25)
    if points or (peak and bandwidth):
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def time_per_step(report: Report) -> Figure:
    """Stacked step time by bound (the scorer's per-step shares), one bar per step."""
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    steps = [s for s in report.steps if s.get("measured_s")]
    shares = sorted({k for s in steps for k in s if k.startswith("share_")})
    if steps and shares:
        labels = [str(s["step"]) for s in steps]
        bottom = [0.0] * len(steps)
        for key in shares:
            bound = key.removeprefix("share_")
            heights = [float(s.get(key) or 0.0) * s["measured_s"] for s in steps]
            if not any(heights):
                continue
            colour = BOUND_COLOURS.get(bound, "#17becf")
            ax.bar(labels, heights, bottom=bottom, color=colour, label=bound)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        title = "Step time by bound"
    else:  # no per-step shares: the whole profile's time by bound, one bar
        bounds = report.summary.time_by_bound_s
        bottom_value = 0.0
        for bound, value in bounds.items():
            if value > 0:
                colour = BOUND_COLOURS.get(bound, "#17becf")
                ax.bar(["profile"], [value], bottom=[bottom_value], color=colour, label=bound)
                bottom_value += value
        title = "Time by bound (per device)"
    ax.set_ylabel("seconds")
    ax.set_xlabel("step")
    ax.set_title(title)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=5)
    fig.tight_layout()
    return fig


def measured_vs_ideal(report: Report, top: int = 15) -> Figure:
    ops = report.ops[:top]
    fig, ax = plt.subplots(figsize=(7, 0.3 * max(len(ops), 4) + 1.2), dpi=100)
    names = [op.label if len(op.label) < 40 else op.label[:37] + "…" for op in ops]
    ys = list(range(len(ops)))[::-1]
    ax.barh(
        [y + 0.2 for y in ys],
        [op.measured_s for op in ops],
        height=0.4,
        color="#d62728",
        label="measured",
    )
    ax.barh(
        [y - 0.2 for y in ys],
        [op.roofline_s for op in ops],
        height=0.4,
        color="#2ca02c",
        label="ideal (roofline)",
    )
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=7)
    ax.set_xlabel("seconds (all occurrences)")
    ax.set_title("Measured vs ideal, top ops")
    ax.legend(fontsize=7)
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

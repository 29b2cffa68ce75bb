"""Human formatting of times, counts and byte sizes (shared by every renderer)."""

from __future__ import annotations

import math

from profan.cost.kernels import SOURCE_MEANINGS
from profan.report.model import Finding, OpEntry, StepRow, Summary
from profan.units import percent, seconds, si  # the shared formatters (renderers import them here)


def wrap_name(name: str, width: int, separators: str = "._-/") -> list[str]:
    """Split a long HLO name at its separators (``.``, ``_``, ``-``, ``/``) to fit ``width``."""
    if len(name) <= width:
        return [name]
    lines: list[str] = []
    current = ""
    token = ""
    for char in name:
        token += char
        if char in separators:
            if len(current) + len(token) > width and current:
                lines.append(current)
                current = ""
            current += token
            token = ""
    if token:
        if len(current) + len(token) > width and current:
            lines.append(current)
            current = ""
        current += token
    lines.append(current)
    out: list[str] = []
    for line in lines:  # pieces with no separator at all: hard split
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return out


def saving_text(finding: Finding) -> str | None:
    """``saves ≈ 73.1 ms (28.4% of the devices' time; its exposed time)``, or None (unknown)."""
    why = f"; {finding.saving_from}" if finding.saving_from else ""
    if finding.saving_s is not None:
        share = finding.saving_share
        basis = f"{percent(share)} of the devices' time" if share is not None else "all devices"
        return f"saves ≈ {seconds(finding.saving_s)} ({basis}{why})"
    if finding.saving_bytes is not None:
        share = finding.saving_memory_share
        basis = f"{percent(share)} of the chip's memory" if share is not None else "per device"
        return f"saves ≈ {si(finding.saving_bytes, 'B')} per device ({basis}{why})"
    return None


# How a FLOPs or bytes figure shows where it came from (``hlo``: no mark).
SOURCE_MARKS = {"backend-config": "(c)", "cost-estimate": "(e)", "trace": "(t)",
                "shape-signature": "(s)", "upper-bound": "≤", "lower-bound": "≥",
                "unknown": "?"}  # fmt: skip
# The trace's own figure is shown beside profan's when they differ by more than this factor.
TRACE_DISAGREES = 2.0


def _marked(value: float | None, source: str | None, unit: str) -> str:
    if source == "unknown":
        return "?"
    text = si(value, unit)
    if source in ("lower-bound", "upper-bound"):
        return SOURCE_MARKS[source] + text
    mark = SOURCE_MARKS.get(source or "")
    return f"{text}{mark}" if mark else text


def _disagrees(model: float, trace: float | None) -> bool:
    if trace is None or trace < 0:
        return False
    low, high = sorted((model, trace))
    return high > 0 and (low == 0 or high / low > TRACE_DISAGREES)


def flops_lines(op: OpEntry) -> list[str]:
    """The FLOPs cell: the figure marked with its source, and the trace's own where it differs
    more than 2x."""
    lines = [_marked(op.flops, op.flops_source, "")]
    if _disagrees(op.flops, op.trace_flops):
        lines.append(f"trace {si(op.trace_flops)}")
    return lines


def bytes_lines(op: OpEntry) -> list[str]:
    """The bytes cell (HBM + interconnect), marked like ``flops_lines``.  An op that moves
    nothing there but moves bytes in other memory spaces (a DMA's half that writes host
    memory, a VMEM-only copy) shows those and says where (``5.37GB`` / ``in host``), so its
    cell never reads 0 bytes for an op that moves some."""
    elsewhere = {
        space: moved
        for space, moved in (op.bytes_by_space or {}).items()
        if space != "hbm" and moved > 0
    }
    if op.hbm_bytes + op.ici_bytes == 0 and elsewhere:
        spaces = sorted(elsewhere, key=elsewhere.__getitem__, reverse=True)
        lines = [_marked(sum(elsewhere.values()), op.bytes_source, "B"), "in " + "+".join(spaces)]
    else:
        lines = [_marked(op.hbm_bytes + op.ici_bytes, op.bytes_source, "B")]
    if _disagrees(op.all_space_bytes, op.trace_bytes):
        lines.append(f"trace {si(op.trace_bytes, 'B')}")
    return lines


def sources_legend(ops: list[OpEntry]) -> str | None:
    """What the marks in these ops' FLOPs and bytes cells mean (only the marks that occur)."""
    used = {source for op in ops for source in (op.flops_source, op.bytes_source) if source}
    marks = [(SOURCE_MARKS[s], SOURCE_MEANINGS.get(s, s)) for s in SOURCE_MARKS if s in used]
    trace = any(
        _disagrees(op.flops, op.trace_flops) or _disagrees(op.all_space_bytes, op.trace_bytes)
        for op in ops
    )
    if not marks and not trace:
        return None
    parts = [f"{mark} {meaning}" for mark, meaning in marks]
    if trace:
        parts.append(f"trace X: the profiler's own figure, more than {TRACE_DISAGREES:g}x off")
    return "FLOPs and bytes come from the HLO unless marked: " + "; ".join(parts)


def mfu_text(mfu: float | None, peak_dtype: object, peak_source: object) -> str:
    """``8.3% of the bf16 peak (catalogue)``; never a share above 100%."""
    peak = f"the {peak_dtype} peak" if peak_dtype else "the peak"
    source = f" ({peak_source})" if peak_source else ""
    if mfu is not None and mfu > 1:
        return (
            f"above 100% of {peak}{source}, which cannot be: the FLOPs counted exceed what the "
            "chip can do in the step (work counted twice, or a peak figure too low)"
        )
    return f"{percent(mfu)} of {peak}{source}"


def step_share_text(ideal_s: float | None, measured_s: float | None) -> str | None:
    """``the step runs at 59.2% of its roofline (ideal … vs measured …, mean)``; where the ideal
    is longer than the measured step (which cannot be) the words say so instead of a share."""
    if not ideal_s or not measured_s:
        return None
    times = f"ideal {seconds(ideal_s)} vs measured {seconds(measured_s)}, mean per step"
    if ideal_s > measured_s:
        return (
            f"the ideal step is longer than the measured one ({times}), which cannot be: work "
            "counted in the ideal overlapped in the measured step (async transfers) or ran "
            "outside its window; no share is shown"
        )
    return f"the step runs at {percent(ideal_s / measured_s)} of its roofline ({times})"


def _mean_idle(steps: list[StepRow]) -> float | None:
    """The mean over steps of their ``idle_s``, None where no step has it."""
    values = [
        float(idle)
        for s in steps
        if s.score is not None and isinstance(idle := s.score.idle_s, int | float)
    ]
    return sum(values) / len(values) if values else None


def comm_text(summary: Summary) -> str:
    """The communication line: per step per device beside the step time, the whole trace's
    figures in brackets (the summary's are whole-trace totals per device)."""
    whole = (
        f"collectives {seconds(summary.collective_time_s)}, "
        f"{seconds(summary.exposed_comm_s)} exposed"
    )
    share = f"{percent(summary.exposed_comm_share)} of the busy span"
    if summary.step_count:
        steps = summary.step_count
        return (
            f"per step per device: collectives {seconds(summary.collective_time_s / steps)}, "
            f"of which {seconds(summary.exposed_comm_s / steps)} exposed (not overlapped with "
            f"compute) = {share} [whole trace ÷ {steps} steps; whole trace per device: {whole}]"
        )
    return f"whole trace per device: {whole} (not overlapped with compute) = {share}"


def idle_text(summary: Summary, steps: list[StepRow]) -> str:
    """The idle line: per step per device (the steps' own ``idle_s``, mean) beside the step
    time, the whole trace's idle and gaps in brackets."""
    whole = (
        f"{seconds(summary.idle_s)} between its first and last op; gaps between steps "
        f"{seconds(summary.inter_step_gap_total_s)} in total "
        f"(longest {seconds(summary.inter_step_gap_max_s)})"
    )
    per_step = _mean_idle(steps)
    if per_step is None:
        return f"whole trace per device: {whole}"
    return (
        f"per step per device: {seconds(per_step)} with no op running (mean over "
        f"{len(steps)} steps) [whole trace per device: {whole}]"
    )


def partial_devices_note(device_count: int, mesh: dict[str, dict[str, int]]) -> str | None:
    """Words where the trace holds fewer devices than its programs' meshes span: it covers part
    of the job (one host of several), and per-device figures are of the devices it holds."""
    sizes = {program: math.prod(axes.values()) for program, axes in mesh.items() if axes}
    if not sizes:
        return None
    program, largest = max(sizes.items(), key=lambda item: item[1])
    if device_count <= 0 or largest <= device_count:
        return None
    return (
        f"the trace holds {device_count} of the {largest} devices the mesh of {program} spans: "
        "it covers part of the job (other hosts' devices were not profiled or not given); "
        f"figures are of these {device_count} devices"
    )

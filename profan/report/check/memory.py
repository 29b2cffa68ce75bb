"""Memory in ``profan check`` and ``profan diff``: the budgets ``[budget] peak_hbm_bytes`` and
``hbm_headroom_min``, and the programs' peaks of two reports compared.  Reads
``Report.memory`` (``profan.report.analysis.memory``)."""

from __future__ import annotations

from profan.memory.render import size
from profan.report.format import percent
from profan.report.model import MemoryBuffer, MemoryEntry, Report
from profan.report.rules.memory import device_entries, largest_buffer


def _identity(buffer: MemoryBuffer) -> tuple[str, str, str]:
    """A buffer across recompiles: instruction names change, kind, shape and line do not."""
    return buffer.kind, buffer.shape, buffer.source or buffer.name


def diff_lines(a: Report, b: Report) -> list[str]:
    """Peak changes of the programs in both reports, and the buffers that appeared at B's peak."""
    if not a.memory and not b.memory:
        return []

    def key(entry: MemoryEntry) -> tuple[str, str]:
        return entry.module.split("(")[0], entry.memory_space

    before = {key(e): e for e in a.memory}
    lines = ["", "Memory peaks per device (programs in both, by name):"]
    for entry in b.memory:
        old = before.get(key(entry))
        if old is None:
            lines.append(f"  new in B: {entry.module} peak {size(entry.peak_bytes)}")
            continue
        change = entry.peak_bytes - old.peak_bytes
        ratio = f" ({change / old.peak_bytes:+.1%})" if old.peak_bytes else ""
        lines.append(
            f"  {entry.module.split('(')[0]} [{entry.memory_space}]: "
            f"{size(old.peak_bytes)} -> {size(entry.peak_bytes)}{ratio}"
        )
        seen = {_identity(x) for x in old.top_buffers}
        for buffer in entry.top_buffers:
            if _identity(buffer) not in seen:
                where = f"  {buffer.source}" if buffer.source else ""
                lines.append(
                    f"    appeared: {buffer.name} {buffer.shape} {size(buffer.size_bytes)}{where}"
                )
    return lines


def memory_checks(
    report: Report, peak_hbm_bytes: float | None, hbm_headroom_min: float | None
) -> list[tuple[str, bool, str, str | None]]:
    """``[budget] peak_hbm_bytes`` / ``hbm_headroom_min`` as (name, passed, message, source)
    results for ``profan check``; a budget the report cannot answer fails and says why."""
    if peak_hbm_bytes is None and hbm_headroom_min is None:
        return []
    device = device_entries(report)
    if not device:
        return [
            (
                name,
                False,
                "the report has no memory figures (the trace embeds no buffer assignment)",
                None,
            )
            for name, value in (("peak_hbm", peak_hbm_bytes), ("hbm_headroom", hbm_headroom_min))
            if value is not None
        ]
    worst = max(device, key=lambda e: e.peak_bytes)
    largest = largest_buffer(worst)
    source = None if largest is None else largest.source
    results = []
    if peak_hbm_bytes is not None:
        results.append(
            (
                "peak_hbm",
                worst.peak_bytes <= peak_hbm_bytes,
                f"memory peak {size(worst.peak_bytes)} per device in {worst.module} "
                f"(budget {size(peak_hbm_bytes)})",
                source,
            )
        )
    if hbm_headroom_min is not None:
        hbm = worst.hbm_bytes
        if not hbm:
            results.append(
                ("hbm_headroom", False, "the chip's memory is unknown (pass --chip NAME)", None)
            )
        else:
            left = (hbm - worst.peak_bytes) / hbm
            results.append(
                (
                    "hbm_headroom",
                    left >= hbm_headroom_min,
                    f"{percent(left)} of the {size(hbm)} per device left free at "
                    f"{worst.module}'s peak (budget at least {percent(hbm_headroom_min)})",
                    source,
                )
            )
    return results

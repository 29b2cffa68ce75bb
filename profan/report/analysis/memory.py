"""The report's memory section: every program that ran, its peak against the chip, what is live
there (``Report.memory``, one ``MemoryEntry`` per program and memory space, the JSON ``memory``
list, see SCHEMA.md).  The figures come from ``profan.memory`` (the compiler's buffer assignment
each trace embeds); the memory rules are ``profan.report.rules.memory``, the budgets and the diff
``profan.report.check.memory``, the rendering ``profan.report.render.memory``.
"""

from __future__ import annotations

from dataclasses import asdict

from profan.chips import Chip
from profan.memory.analyze import analyze_profile
from profan.memory.model import ProgramMemory
from profan.report.model import MemoryBuffer, MemoryEntry, PeakBreakdown, UndonatedInput
from profan.trace.profile import Profile

TOP_BUFFERS = 10
TIMELINE_POINTS = 200


def _timeline(points: list[int], peak_position: int | None) -> list[list[int]]:
    """At most TIMELINE_POINTS [position, heap bytes] pairs, always keeping the peak."""
    if not points:
        return []
    stride = max(1, -(-len(points) // TIMELINE_POINTS))
    keep = set(range(0, len(points), stride)) | {len(points) - 1}
    if peak_position is not None:
        keep.add(peak_position)
    return [[i, points[i]] for i in sorted(keep)]


def memory_entry(program: ProgramMemory) -> MemoryEntry:
    """One program's memory as the report holds it: its ``TOP_BUFFERS`` largest live buffers,
    its heap over at most ``TIMELINE_POINTS`` points."""
    return MemoryEntry(
        module=program.module,
        memory_space=program.memory_space,
        source=program.source,
        argument_bytes=program.argument_bytes,
        output_bytes=program.output_bytes,
        alias_bytes=program.alias_bytes,
        temp_bytes=program.temp_bytes,
        peak_bytes=program.peak_bytes,
        constant_bytes=program.constant_bytes,
        thread_local_bytes=program.thread_local_bytes,
        heap_peak_bytes=program.heap_peak_bytes,
        fragmentation_bytes=program.fragmentation_bytes,
        peak_position=program.peak_position,
        peak_instruction=program.peak_instruction,
        peak_computation=program.peak_computation,
        hbm_bytes=program.hbm_bytes,
        headroom_bytes=program.headroom_bytes,
        chip=program.chip,
        breakdown=None if program.breakdown is None else PeakBreakdown(**asdict(program.breakdown)),
        top_buffers=[MemoryBuffer(**asdict(b)) for b in program.top_buffers(TOP_BUFFERS)],
        live_buffer_count=len(program.live_at_peak),
        undonated=[UndonatedInput(**asdict(u)) for u in program.undonated],
        notes=list(program.notes),
        timeline=_timeline([p.heap_bytes for p in program.timeline], program.peak_position),
    )


def memory_section(profile: Profile, chip: Chip | None) -> list[MemoryEntry]:
    """One entry per program that ran and memory space, largest device peak first."""
    return [memory_entry(program) for program in analyze_profile(profile, chip).programs]

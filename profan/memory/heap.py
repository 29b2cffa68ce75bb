"""Replay of XLA's heap-simulator trace: the heap over program order, its peak, what is live there.

The compiler logs, for the allocation that holds the temporaries, every buffer it places
(``ALLOC``), releases (``FREE``) or places on top of an already placed one (``SHARE_WITH``: an
in-place reuse; the canonical buffer then lives until its last sharer is freed).  Replaying the
log gives the live heap after each event.  The replay follows the rules XProf's memory viewer
applies to the same log, so the two agree on the peak and on the buffers live at it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ALLOC, FREE, SHARE_WITH = 0, 1, 2


@dataclass(frozen=True, slots=True)
class HeapEvent:
    kind: int  # ALLOC | FREE | SHARE_WITH
    buffer_id: int
    computation: str
    instruction: str
    canonical_id: int = 0  # the buffer shared with (SHARE_WITH only)


@dataclass(slots=True)
class HeapReplay:
    """The outcome: heap after each event, the peak, and the canonical buffers live at it."""

    heap_after: list[int] = field(default_factory=list)
    peak_bytes: int = 0
    peak_position: int | None = None  # index of the event that reached the peak first
    live_at_peak: list[int] = field(default_factory=list)  # canonical ids, in placement order
    problems: list[str] = field(default_factory=list)  # inconsistencies in the log, if any


def replay(events: Iterable[HeapEvent], sizes: Mapping[int, int]) -> HeapReplay:
    """Replay ``events``; ``sizes`` maps logical-buffer id to its size in bytes.

    Events naming unknown buffers are skipped and reported in ``problems`` (never silently)."""
    result = HeapReplay()
    references: dict[int, int] = {}
    canonical_of: dict[int, int] = {}
    live: dict[int, None] = {}  # insertion-ordered set of canonical ids
    heap = 0

    def canonical(buffer_id: int) -> int:
        seen = 0
        while buffer_id in canonical_of and seen < 1_000_000:
            buffer_id = canonical_of[buffer_id]
            seen += 1
        return buffer_id

    def grow(buffer_id: int, position: int) -> None:
        nonlocal heap
        heap += sizes[buffer_id]
        live[buffer_id] = None
        if heap > result.peak_bytes:
            result.peak_bytes = heap
            result.peak_position = position
            result.live_at_peak = list(live)

    for position, event in enumerate(events):
        if event.buffer_id not in sizes:
            result.problems.append(f"event {position} names unknown buffer {event.buffer_id}")
        elif event.kind == ALLOC:
            references[event.buffer_id] = references.get(event.buffer_id, 0) + 1
            grow(event.buffer_id, position)
        elif event.kind == FREE:
            root = canonical(event.buffer_id)
            references[root] = references.get(root, 0) - 1
            if references[root] < 0:
                result.problems.append(f"buffer {event.buffer_id} freed more often than placed")
            elif references[root] == 0:
                heap -= sizes[root]
                live.pop(root, None)
        elif event.kind == SHARE_WITH:
            if event.canonical_id not in sizes:
                result.problems.append(
                    f"event {position} shares with unknown buffer {event.canonical_id}"
                )
            else:
                canonical_of[event.buffer_id] = event.canonical_id
                root = canonical(event.buffer_id)
                references[root] = references.get(root, 0) + 1
                if references[root] == 1:  # the canonical buffer had been freed: placed again
                    grow(root, position)
        else:
            result.problems.append(f"event {position} has unknown kind {event.kind}")
        result.heap_after.append(heap)
    return result

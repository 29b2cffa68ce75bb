"""The reader's notes in the report: where the measured side came from.

The trace readers note how they read the trace (``Profile.notes``): op times from the device's
clock, which rule joined a CUDA-graph kernel to its instruction, the HLO taken from the
``.xplane.pb`` beside a trace-viewer JSON, how steps were found.  The JSON report carries them
all (``trace.notes``, each once); the text formats show the first ``SHOWN`` and count the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

from profan.report.model import Report

SHOWN = 10  # notes the text formats list before "… and N more"
HEADING = "Notes (how the trace was read)"


def distinct(notes: Iterable[str]) -> list[str]:
    """Each note once, in the order the readers wrote them (a pod's hosts repeat theirs)."""
    return list(dict.fromkeys(str(note) for note in notes))


def notes_shown(report: Report) -> tuple[list[str], int]:
    """The notes a text format lists, and how many more the JSON has."""
    notes = [str(note) for note in report.trace.notes]
    return notes[:SHOWN], max(len(notes) - SHOWN, 0)


def more_text(rest: int) -> str:
    return f"… and {rest} more (JSON: trace.notes)"

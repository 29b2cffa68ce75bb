"""The report's sections in the one order every renderer shows them (terminal, Markdown, the
HTML page and its navigation): after the summary, the pictures, the op table, the GEMMs,
memory, hosts, the findings, the unmatched events and the notes.  A renderer names the sections
it draws and ``in_order`` lays them out; one it does not draw is skipped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar


@dataclass(frozen=True, slots=True)
class Section:
    name: str  # what renderers call it; the HTML page's anchor
    title: str  # the page's navigation link


SECTIONS: tuple[Section, ...] = (
    Section("timeline", "Timeline"),
    Section("charts", "Roofline & steps"),
    Section("ops", "Ops"),
    Section("gemms", "GEMMs"),
    Section("memory", "Memory"),
    Section("hosts", "Hosts"),
    Section("findings", "Findings"),
    Section("unmatched", "Unmatched"),
    Section("notes", "Notes"),
)
NAMES = frozenset(section.name for section in SECTIONS)

Part = TypeVar("Part")


def in_order(parts: Mapping[str, Part]) -> list[Part]:
    """A renderer's sections (by name) in the report's order."""
    unknown = set(parts) - NAMES
    assert not unknown, f"sections not in the outline: {sorted(unknown)}"
    return [parts[section.name] for section in SECTIONS if section.name in parts]

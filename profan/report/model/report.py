"""The report: every section of what ``profan report`` shows, typed; its JSON form.

Every renderer (terminal, Markdown, HTML, JSON), ``profan check`` and ``profan diff`` read this
one object, so the numbers they print are the same numbers.  ``Report.to_dict()`` is the JSON
report (schema in ``SCHEMA.md``, generated from these types by ``profan.report.model.schema``);
``Report.from_dict()`` reads one back (baselines, diffs, the report cache), written by this
profan or an older one.  ``profan.report.analysis.build`` makes a Report from a scored profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profan.errors import ConfigError
from profan.report.model.codec import NOT_READ, OMIT_EMPTY, OMIT_NONE, decode, encode_object
from profan.report.model.hosts import CrossHost, HostEntry
from profan.report.model.memory import MemoryEntry
from profan.report.model.ops import Finding, OpEntry
from profan.report.model.sections import (
    ChipSection,
    GemmEntry,
    RuleEntry,
    StepRow,
    Tool,
    Trace,
    UnmatchedGroup,
)
from profan.report.model.summary import Device, Summary
from profan.report.slices import Timeline

SCHEMA_VERSION = 3
# Older versions this profan still reads (baselines written before a field changed meaning).
READABLE_SCHEMA_VERSIONS = (1, 2, 3)


@dataclass(slots=True, kw_only=True)
class Report:
    """One profile's report (the JSON report's top level)."""

    #: `3` (see the versions above)
    schema_version: int = SCHEMA_VERSION
    #: what wrote the report
    tool: Tool = field(default_factory=Tool, metadata=NOT_READ)
    #: the trace the report was made from
    trace: Trace = field(default_factory=Trace)
    #: the accelerator as the trace describes it
    device: Device
    #: the chip the profile was scored against
    chip: ChipSection
    #: one per step
    steps: list[StepRow]
    #: whole-profile figures
    summary: Summary
    #: one per (module, HLO op), heaviest first
    ops: list[OpEntry]
    #: what the rules found, largest saving first
    findings: list[Finding] = field(default_factory=list)
    #: op events that could not be joined to HLO, per reason
    unmatched: list[UnmatchedGroup] = field(default_factory=list)
    #: per program and memory space: the compiler's buffer assignment (`[]` when the trace has
    #: none)
    memory: list[MemoryEntry] = field(default_factory=list)
    #: rule name → what it checks and the thresholds it used (schema 3)
    rules: dict[str, RuleEntry] = field(default_factory=dict)
    #: the matmul ops by shape and dtype, heaviest first (added within schema 3)
    gemms: list[GemmEntry] = field(default_factory=list)
    #: multi-host profiles only (absent for one host): one per host
    hosts: list[HostEntry] = field(default_factory=list, metadata=OMIT_EMPTY)
    #: multi-host profiles only: per-step skew and waiting, stragglers, clock alignment
    cross_host: CrossHost | None = field(default=None, metadata=OMIT_NONE)
    #: reports built for the HTML page only (absent otherwise): every step's op executions per
    #: device (schema 3)
    timeline: Timeline | None = field(default=None, metadata=OMIT_NONE)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (SCHEMA.md)."""
        return encode_object(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "report") -> Report:
        """A JSON report read back (any of ``READABLE_SCHEMA_VERSIONS``): fields it lacks take
        their defaults, keys this profan does not know are ignored."""
        if not isinstance(data, dict) or "schema_version" not in data:
            raise ConfigError(f"{where}: not a profan JSON report (no schema_version)")
        if data["schema_version"] not in READABLE_SCHEMA_VERSIONS:
            readable = ", ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
            raise ConfigError(
                f"{where}: schema_version {data['schema_version']} is not supported "
                f"(this profan reads {readable})"
            )
        try:
            return decode(cls, data)
        except (KeyError, TypeError, AttributeError) as error:
            raise ConfigError(f"{where}: malformed profan JSON report ({error})") from None

    def op(self, key: str) -> OpEntry | None:
        for entry in self.ops:
            if entry.key == key:
                return entry
        return None

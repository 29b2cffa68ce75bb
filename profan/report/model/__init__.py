"""The report object: what ``profan report`` shows, as plain typed data (``report``), by
section (``ops``, ``summary``, ``sections``, ``memory``, ``hosts``); its JSON form, read off the
types (``codec``); SCHEMA.md, generated from them (``schema``)."""

from profan.report.model.hosts import CrossHost, HostEntry
from profan.report.model.memory import MemoryBuffer, MemoryEntry, PeakBreakdown, UndonatedInput
from profan.report.model.ops import Finding, OpEntry
from profan.report.model.report import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION, Report
from profan.report.model.sections import (
    CaptureInfo,
    ChipSection,
    GemmEntry,
    GemmKernel,
    RuleEntry,
    RuleValue,
    StepRow,
    StepScore,
    Tool,
    Trace,
    UnmatchedGroup,
)
from profan.report.model.summary import SCORER_PREFIX, Device, IdleGap, Scalar, Summary

__all__ = [
    "READABLE_SCHEMA_VERSIONS",
    "SCHEMA_VERSION",
    "SCORER_PREFIX",
    "CaptureInfo",
    "ChipSection",
    "CrossHost",
    "Device",
    "Finding",
    "GemmEntry",
    "GemmKernel",
    "HostEntry",
    "IdleGap",
    "MemoryBuffer",
    "MemoryEntry",
    "OpEntry",
    "PeakBreakdown",
    "Report",
    "RuleEntry",
    "RuleValue",
    "Scalar",
    "StepRow",
    "StepScore",
    "Summary",
    "Tool",
    "Trace",
    "UndonatedInput",
    "UnmatchedGroup",
]

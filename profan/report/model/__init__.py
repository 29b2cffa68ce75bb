"""The report object: what ``profan report`` shows, as plain data (see ``ops``)."""

from profan.report.model.ops import (
    READABLE_SCHEMA_VERSIONS,
    SCHEMA_VERSION,
    SCORER_PREFIX,
    Device,
    Finding,
    IdleGap,
    OpEntry,
    Report,
    Scalar,
    Summary,
)

__all__ = [
    "READABLE_SCHEMA_VERSIONS",
    "SCHEMA_VERSION",
    "SCORER_PREFIX",
    "Device",
    "Finding",
    "IdleGap",
    "OpEntry",
    "Report",
    "Scalar",
    "Summary",
]

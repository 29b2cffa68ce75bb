"""Built reports as cache entries: what ``report``, ``check``, ``diff`` and ``annotate`` print
from, so that re-opening an unchanged profile reads no trace and imports no pandas.

An entry is ``Report.to_dict()`` (the JSON report, whatever fields it carries) in msgpack, read
back with ``Report.from_dict``; every renderer is a pure function of the report, so what is
printed from a stored report is what the build would have printed.  ``annotate`` prints HLO
text beside the report's figures: its entry is the text itself.

The key (``report_key``) is everything the report depends on: the trace path as resolved, the
run, the content of every host file (``profan.trace.fingerprint``), of ``--hlo`` and of the user's
chip and kernel tables (taken once per command: ``profan.report.analysis.request``), the chip
asked for, the rule thresholds in force, and profan's version and code.  Terminal width, colour,
``--top`` and the output format only change the rendering, so one entry serves all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from profan.cache.keys import versioned
from profan.cache.store import read_entry, write_entry

if TYPE_CHECKING:
    from profan.report.model import Report

Output = TypeVar("Output")


def report_key(
    trace: str,
    run: str | None,
    skipped: Sequence[str],
    inputs: Sequence[Any],
    chip: str | None,
    rules: Any,
    *options: Any,
) -> str:
    """The key of the report of these inputs and options.  ``inputs``: the key parts of the
    host files, of ``--hlo`` and of the user's tables (``profan.report.analysis.request``);
    ``rules``: the ``RuleConfig`` in force, or None for the defaults; ``options``: any other
    choice that changes what the report holds."""
    thresholds = None if rules is None else msgspec.msgpack.encode(rules)
    return versioned("report", [trace, run, list(skipped), *inputs, chip, thresholds, *options])


def read_report(key: str) -> Report | None:
    """The report stored under ``key``, or None (absent, damaged or foreign)."""
    from profan.errors import ProfanError
    from profan.report.model import Report

    found = read_entry("reports", key)
    if found is None:
        return None
    try:
        return Report.from_dict(msgspec.msgpack.decode(found[0]), where="cached report")
    except (msgspec.DecodeError, ProfanError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_report(key: str, report: Report) -> bool:
    return write_entry("reports", key, report.to_dict())


def text_key(report: str, *options: Any) -> str:
    """The key of a text printed from the report keyed ``report`` with these options."""
    return versioned("text", [report, *options])


def read_text(key: str) -> str | None:
    return read_output(key, str)


def write_text(key: str, text: str) -> bool:
    return write_output(key, text)


def read_output(key: str, kind: type[Output]) -> Output | None:
    """What a command printed from reports (a ``kind``: ``str``, or a ``msgspec.Struct`` of
    its text, files and exit code), stored under ``key``; None on a miss."""
    found = read_entry("reports", key)
    if found is None:
        return None
    try:
        return msgspec.msgpack.decode(found[0], type=kind)
    except (msgspec.DecodeError, ValueError, TypeError):
        return None


def write_output(key: str, output: Any) -> bool:
    return write_entry("reports", key, output)

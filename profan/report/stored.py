"""Built reports as cache entries: what ``report``, ``check``, ``diff`` and ``annotate`` print
from, so that re-opening an unchanged profile reads no trace and imports no pandas.

An entry is ``Report.to_dict()`` (the JSON report, whatever fields it carries) in msgpack, read
back with ``Report.from_dict``; every renderer is a pure function of the report, so what is
printed from a stored report is what the build would have printed.  ``annotate`` prints HLO
text beside the report's figures: its entry is the text itself.

The key (``report_key``) is everything the report depends on: the trace path as resolved, the
run, the content of every host file (``profan.trace.fingerprint``), of ``--hlo`` and of the user's
chip and kernel tables, the chip asked for, the rule thresholds in force, and profan's version
and code.  Terminal width, colour, ``--top`` and the output format only change the rendering,
so one entry serves all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from profan.cache.keys import file_input, versioned
from profan.cache.store import read_entry, write_entry
from profan.trace.fingerprint import hlo_inputs, run_inputs

if TYPE_CHECKING:
    from profan.report.model import Report

Output = TypeVar("Output")

# The environment variables that add user tables to the chip catalogue and to the kernel
# registry (profan.chips.USER_CHIPS_ENV, profan.cost.kernels.USER_KERNELS_ENV; a test checks
# they agree).  Named here so that a report found in the cache imports neither package.
USER_CHIPS_ENV = "PROFAN_CHIPS"
USER_KERNELS_ENV = "PROFAN_KERNELS"


def report_key(
    trace: str,
    run: str | None,
    files: Mapping[str, Any],
    formats: Mapping[str, str],
    skipped: Sequence[str],
    hlo: str | None,
    chip: str | None,
    rules: Any,
    *options: Any,
) -> str | None:
    """The key of the report of these inputs and options (None: an input cannot be
    fingerprinted, so the report is not cached).  ``rules``: the ``RuleConfig`` in force, or
    None for the defaults; ``options``: any other choice that changes what the report holds."""
    parts = [run_inputs(files, formats), hlo_inputs(hlo), user_tables()]
    if any(part is None for part in parts):
        return None
    thresholds = None if rules is None else msgspec.msgpack.encode(rules)
    return versioned("report", [trace, run, list(skipped), *parts, chip, thresholds, *options])


def user_tables() -> list[Any] | None:
    """The user's chip and kernel tables in force (``--chips``/``--kernels`` or their
    environment variables), by content."""
    parts: list[Any] = []
    for variable in (USER_CHIPS_ENV, USER_KERNELS_ENV):
        value = os.environ.get(variable)
        if not value:
            parts.append([variable, None])
            continue
        found = file_input(Path(value))
        if found is None:
            return None
        parts.append([variable, found])
    return parts


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

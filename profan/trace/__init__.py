"""Trace loading: a profile directory or file -> ``Profile`` (op executions joined to HLO).

``load(path, **options)`` is the entry point (``profan.load`` delegates here); the options are
the fields of ``LoadOptions``.
"""

from __future__ import annotations

from profan.trace.api import load
from profan.trace.options import LoadOptions
from profan.trace.profile import OP_COLUMNS, OP_DTYPES, DeviceInfo, Profile, Unmatched

__all__ = ["OP_COLUMNS", "OP_DTYPES", "DeviceInfo", "LoadOptions", "Profile", "Unmatched", "load"]

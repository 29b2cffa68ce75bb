"""Trace loading: a profile directory or file -> ``Profile`` (op executions joined to HLO).

``load(path, hlo=None, run=None)`` is the entry point (``profan.load`` delegates here).
"""

from __future__ import annotations

from profan.trace.load import load
from profan.trace.profile import OP_COLUMNS, DeviceInfo, Profile, Unmatched

__all__ = ["OP_COLUMNS", "DeviceInfo", "Profile", "Unmatched", "load"]

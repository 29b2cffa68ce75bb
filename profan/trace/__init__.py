"""Trace loading: a profile directory or file -> ``Profile`` (op executions joined to HLO).

``load(path, **options)`` is the entry point (``profan.load`` delegates here); the options are
the fields of ``LoadOptions``.  The names below are imported on first use, so that the modules
of this package that need neither pandas nor the readers (``discover``, ``storage``: all that
re-opening a report from the cache needs) import without them.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from profan.lazy import lazy_exports

if TYPE_CHECKING:
    from profan.trace.api import load
    from profan.trace.options import LoadOptions
    from profan.trace.profile import OP_COLUMNS, OP_DTYPES, DeviceInfo, Profile, Unmatched

_EXPORTS = {
    "load": "profan.trace.api",
    "LoadOptions": "profan.trace.options",
    "OP_COLUMNS": "profan.trace.profile",
    "OP_DTYPES": "profan.trace.profile",
    "DeviceInfo": "profan.trace.profile",
    "Profile": "profan.trace.profile",
    "Unmatched": "profan.trace.profile",
}

__all__ = ["OP_COLUMNS", "OP_DTYPES", "DeviceInfo", "LoadOptions", "Profile", "Unmatched", "load"]


__getattr__ = lazy_exports(__name__, _EXPORTS)


class _Package(types.ModuleType):
    """``profan.trace.load`` is the function; the submodule of that name (``load.py``) stays
    in ``sys.modules`` only.  Python sets a submodule as an attribute of its package when it
    is first imported, which, now that it is imported lazily, would hide the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "load" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

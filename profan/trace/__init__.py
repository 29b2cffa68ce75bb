"""Trace loading: a profile directory or file -> ``Profile`` (op executions joined to HLO).

``load(path, **options)`` is the entry point (``profan.load`` delegates here); the options are
the fields of ``LoadOptions``.  The names below are imported on first use, so that the modules
of this package that need neither pandas nor the readers (``discover``, ``storage``: all that
re-opening a report from the cache needs) import without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profan.lazy import functions_over_submodules, lazy_exports

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


# ``profan.trace.load`` is the function; the submodule ``load.py`` stays in sys.modules only.
functions_over_submodules(__name__, "load")

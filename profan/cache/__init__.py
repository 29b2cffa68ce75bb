"""profan's caches: data only (no pickle), keyed by content, bounded, under the user's cache
directory (never beside a trace).

``store`` is the on-disk format and its bound, ``keys`` and ``inputs`` what an entry is keyed
by, ``modules`` parsed HLO, ``frames`` tables, ``profiles`` loaded traces and pod hosts,
``reports`` built reports.  The names below are imported on first use: re-opening a report
from the cache needs neither the HLO parser nor pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profan.cache.modules import cache_key, cached_module, cached_parse_file

__all__ = ["cache_key", "cached_module", "cached_parse_file"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'profan.cache' has no attribute {name!r}")
    value = getattr(importlib.import_module("profan.cache.modules"), name)
    globals()[name] = value
    return value

"""What a loaded trace is made from, as cache key parts (``profan.cache.keys``): its run's host
files and ``--hlo``; ``profan.report.stored`` keys a built report on them too.

Each function returns a msgpack-able list naming every input and its content fingerprint, or
None when one of them cannot be fingerprinted (unreadable, or a remote object its store says
nothing about): such inputs are not cached, and the load that follows reports any error.
Nothing here imports pandas or the trace readers: a report found in the cache costs only this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from profan.cache.keys import file_input, known_digest, versioned

# Files of an XLA dump that --hlo reads (profan.trace.hlofiles), searched at any depth.
HLO_PATTERNS = ("*after_optimizations.txt", "*before_optimizations.txt", "*.hlo")


def run_inputs(files: Mapping[str, Any], formats: Mapping[str, str]) -> list[Any] | None:
    """Every host file of a run (``profan.trace.discover.Run``): host, format, name, content."""
    parts: list[Any] = []
    for host, file in sorted(files.items()):
        found = file_input(file)
        if found is None:
            return None
        parts.append([host, formats.get(host, ""), file.name, found])
    return parts


def hlo_inputs(hlo: str | os.PathLike[str] | None) -> list[Any] | None:
    """``--hlo``: none, one file, or every HLO file of a dump directory (relative name, hash)."""
    if hlo is None:
        return ["none"]
    path = Path(hlo)
    if path.is_file():
        found = file_input(path)
        return None if found is None else ["file", found]
    if not path.is_dir():
        return None
    files = sorted({file for pattern in HLO_PATTERNS for file in path.rglob(pattern)})
    parts: list[Any] = ["dir"]
    for file in files:
        if not file.is_file():
            continue
        found = file_input(file)
        if found is None:
            return None
        parts.append([file.relative_to(path).as_posix(), found])
    return parts


def events_key(
    path: Any,
    run: str | None,
    files: Mapping[str, Any],
    formats: Mapping[str, str],
    skipped: Any,
    hlo: str | os.PathLike[str] | None,
) -> str | None:
    """The key of a run's loaded profile in the events form (``profan.trace.pod``): the path
    as given, the run, every host file's content and ``--hlo``'s (None: not cached)."""
    parts, dump = run_inputs(files, formats), hlo_inputs(hlo)
    if parts is None or dump is None:
        return None
    return versioned("profile", [str(path), run, parts, skipped, dump])


def seen_before(files: Mapping[str, Any]) -> bool:
    """Whether the cache knows every one of these host files as it is now (local files whose
    digest the stat index holds): without hashing any.  A file it has not seen has nothing
    stored of it (short of a copy of a file it has)."""
    return all(isinstance(file, Path) and known_digest(file) is not None for file in files.values())

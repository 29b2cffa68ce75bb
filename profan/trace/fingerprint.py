"""What a loaded trace is made from, as cache key parts (``profan.cache.keys``): its run's host
files and ``--hlo``; ``profan.report.stored`` keys a built report on them too.

Each function returns a msgpack-able list naming every input and its content fingerprint, or
None when one of them cannot be fingerprinted (unreadable, or a remote object its store says
nothing about): such inputs are not cached, and the load that follows reports any error.
A ``Fingerprint`` takes them for one run once, whatever asks (the read ahead, the lookups, the
stores).  Nothing here imports pandas or the trace readers: a report found in the cache costs
only this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profan.cache.keys import file_input, known_digest, versioned

if TYPE_CHECKING:
    from profan.trace.discover import Run

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


_NOT_TAKEN: Any = object()  # (a part not taken yet: None means "cannot be fingerprinted")


@dataclass(slots=True, eq=False)
class Fingerprint:
    """The key parts of one run read from ``path`` with ``hlo``, each taken once, when first
    asked: every host file's (``run_inputs``), ``--hlo``'s (``hlo_inputs``) and the key of
    the loaded profile (``events_key``)."""

    path: str
    run: Run
    hlo: str | os.PathLike[str] | None
    _files: Any = _NOT_TAKEN
    _dump: Any = _NOT_TAKEN
    _events: Any = _NOT_TAKEN

    def files(self) -> list[Any] | None:
        if self._files is _NOT_TAKEN:
            self._files = run_inputs(self.run.files, self.run.formats)
        files: list[Any] | None = self._files
        return files

    def dump(self) -> list[Any] | None:
        if self._dump is _NOT_TAKEN:
            self._dump = hlo_inputs(self.hlo)
        dump: list[Any] | None = self._dump
        return dump

    def events_key(self) -> str | None:
        """The key of the run's loaded profile in the events form (``profan.trace.pod``): the
        path as given, the run, every host file's content and ``--hlo``'s (None: not
        cached)."""
        if self._events is _NOT_TAKEN:
            files, dump = self.files(), self.dump()
            self._events = (
                None
                if files is None or dump is None
                else versioned(
                    "profile", [str(self.path), self.run.name, files, self.run.skipped, dump]
                )
            )
        key: str | None = self._events
        return key

    def of_run(self, path: str, run: Run) -> Fingerprint:
        """The fingerprint of another run read with the same ``--hlo`` (its part shared)."""
        return Fingerprint(path, run, self.hlo, _dump=self._dump)

    def seen_before(self) -> bool:
        """Whether the cache knows every host file as it is now (``seen_before``)."""
        return seen_before(self.run.files)


def seen_before(files: Mapping[str, Any]) -> bool:
    """Whether the cache knows every one of these host files as it is now (local files whose
    digest the stat index holds): without hashing any.  A file it has not seen has nothing
    stored of it (short of a copy of a file it has)."""
    return all(isinstance(file, Path) and known_digest(file) is not None for file in files.values())

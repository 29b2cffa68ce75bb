"""HLO modules from ``--hlo``: an XLA dump directory or one HLO text file.

In a dump directory (``--xla_dump_to``) profan reads the modules after optimisations
(``*after_optimizations.txt``), never the buffer-assignment or memory-usage files.  The modules
before optimisations (``*before_optimizations.txt``) are not modules that ran; they are read
apart (``modules_before_optimizations``) for what only they carry: the mesh JAX wrote, with the
program's own axis names.
"""

from __future__ import annotations

from pathlib import Path

from profan.errors import TraceError
from profan.hlo.model import Module

DUMP_PATTERN = "*after_optimizations.txt"
BEFORE_PATTERN = "*before_optimizations.txt"


def modules_from_path(path: Path) -> list[Module]:
    """Parsed modules of a dump dir or a single HLO file (``HloSyntaxError`` on bad text)."""
    from profan.hlo import parse_file

    if path.is_file():
        return [parse_file(path)]
    if not path.is_dir():
        raise TraceError(str(path), "--hlo: no such file or directory")
    files = sorted(
        p
        for p in path.rglob(DUMP_PATTERN)
        if p.is_file() and "buffer-assignment" not in p.name and "memory-usage" not in p.name
    )
    if not files:
        files = sorted(p for p in path.glob("*.hlo") if p.is_file())
    if not files:
        raise TraceError(
            str(path), f"--hlo: no HLO files ({DUMP_PATTERN} or *.hlo) in this directory"
        )
    return [parse_file(file) for file in files]


def modules_before_optimizations(path: Path) -> list[Module]:
    """The modules of a dump directory as JAX handed them to XLA (empty for a single file or a
    directory without them)."""
    from profan.hlo import parse_file

    if not path.is_dir():
        return []
    return [parse_file(file) for file in sorted(path.rglob(BEFORE_PATTERN)) if file.is_file()]

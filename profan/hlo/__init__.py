"""HLO text: the typed model (``profan.hlo.model``) and the parser that builds it.

``parse_module(text)`` reads a whole module, ``parse_file(path)`` reads a file (cached under the
user's cache directory), ``parse_instruction(line)`` reads one instruction line as XProf shows it.
The parser (and Lark) is imported on first use: what only needs the model (the trace readers,
a report read back from the cache) imports without it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from profan.hlo.model import (
    Computation,
    Instruction,
    Layout,
    Metadata,
    Module,
    Operand,
    Shape,
    SourceLocation,
)
from profan.lazy import lazy_exports

if TYPE_CHECKING:
    from profan.hlo.parser import parse_instruction, parse_module

__getattr__ = lazy_exports(
    __name__, {"parse_instruction": "profan.hlo.parser", "parse_module": "profan.hlo.parser"}
)


def parse_file(path: str | os.PathLike[str]) -> Module:
    """Parse an HLO text file; a repeated parse of an unchanged file comes from the cache."""
    from profan.hlo.stored import cached_parse_file

    return cached_parse_file(path)


__all__ = [
    "Computation",
    "Instruction",
    "Layout",
    "Metadata",
    "Module",
    "Operand",
    "Shape",
    "SourceLocation",
    "parse_file",
    "parse_instruction",
    "parse_module",
]

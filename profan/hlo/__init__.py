"""HLO text: the typed model (``profan.hlo.model``) and the parser that builds it.

``parse_module(text)`` reads a whole module, ``parse_file(path)`` reads a file (cached under the
user's cache directory), ``parse_instruction(line)`` reads one instruction line as XProf shows it.
The parser (and Lark) is imported on first use: what only needs the model (the trace readers,
a report read back from the cache) imports without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from profan.hlo.parser import parse_instruction, parse_module

_LAZY = {"parse_instruction": "profan.hlo.parser", "parse_module": "profan.hlo.parser"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'profan.hlo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def parse_file(path: str) -> Module:
    """Parse an HLO text file; a repeated parse of an unchanged file comes from the cache."""
    from profan.cache import cached_parse_file

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

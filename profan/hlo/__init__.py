"""HLO text: the typed model (``profan.hlo.model``) and the parser that builds it.

``parse_module(text)`` reads a whole module, ``parse_file(path)`` reads a file (cached under the
user's cache directory), ``parse_instruction(line)`` reads one instruction line as XProf shows it.
"""

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
from profan.hlo.parser import parse_instruction, parse_module


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

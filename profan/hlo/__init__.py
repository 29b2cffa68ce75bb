"""HLO text: the typed model (``profan.hlo.model``) and the parser that builds it."""

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

__all__ = [
    "Computation",
    "Instruction",
    "Layout",
    "Metadata",
    "Module",
    "Operand",
    "Shape",
    "SourceLocation",
]

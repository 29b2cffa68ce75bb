"""The verifier's entry points: the first problem of a module, in the order of the checks
(sizes first: the later checks compute with them), raised at its line when the text is given."""

from __future__ import annotations

from profan.errors import HloInvalidError
from profan.hlo.model import Module
from profan.hlo.resolve import locate
from profan.hlo.verify.graphs import call_problem, cycle_problem
from profan.hlo.verify.ops import op_problem
from profan.hlo.verify.problem import Problem
from profan.hlo.verify.sizes import group_problem, module_shape_problem
from profan.hlo.verify.structure import structure_problem


def verify_module(module: Module, *, text: str | None = None, file: str | None = None) -> None:
    """Raise ``HloInvalidError`` for the first problem ``first_problem`` finds; ``text`` (the
    module's HLO text) places it at a line and column."""
    problem = first_problem(module)
    if problem is None:
        return
    line = column = None
    if problem.instruction is not None:
        line, column = locate(text, problem.computation, problem.instruction, problem.at)
    raise HloInvalidError(
        str(problem),
        file=file,
        line=line,
        column=column,
        text=_line_text(text, line),
    )


def first_problem(module: Module) -> Problem | None:
    """The first thing XLA's verifier would reject in ``module`` (shapes first: the later
    checks compute with them; then the opcodes, operand counts and called computations that
    the shape checks take for granted), or ``None``."""
    return (
        module_shape_problem(module)
        or structure_problem(module)
        or call_problem(module)
        or cycle_problem(module)
        or op_problem(module)
        or group_problem(module)
    )


def _line_text(text: str | None, line: int | None) -> str:
    if not text or line is None:
        return ""
    lines = text.split("\n", line)
    shown = lines[line - 1].rstrip("\r") if line - 1 < len(lines) else ""
    return shown if len(shown) <= 300 else shown[:300] + "…"

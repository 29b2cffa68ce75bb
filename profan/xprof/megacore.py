"""The body of a TPU megacore fusion, which the op profile does not list as one.

On a megacore chip (TPU v4, v5p) XLA can wrap ops that both TensorCores share in a fusion that
calls ``%megacore_fusion.N``.  XProf's op profile has no node for that fusion: it lists the ops
inside it as ops of their own, renamed ``X.in_megacore_fusion.K``, whose operands are the megacore
fusion's parameters, ``%para.N``, numbered across the program in the order of each megacore
fusion's operands.  So the body of a megacore fusion with k operands is the set of ops whose
``para`` operands fall in one window of k consecutive numbers whose printed shapes are the
fusion's operand shapes, position by position.  When no window fits, or several fit with
different ops, the body stays unknown (its FLOPs unknown, its bytes an upper bound): never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from profan.hlo import parse_instruction
from profan.hlo.model import Instruction, Shape
from profan.xprof.op_profile import FusedLine, ProfiledOp

_PARA = re.compile(r"^para\.(\d+)$")
_PARA_IN_TEXT = re.compile(r"%para\.(\d+)\b")


def _same_data(first: Shape | None, second: Shape | None) -> bool:
    return (
        first is not None
        and second is not None
        and first.dtype == second.dtype
        and first.dims == second.dims
    )


def _members(ops: Sequence[ProfiledOp]) -> list[tuple[ProfiledOp, Instruction, set[int]]]:
    """The ops that take megacore parameters (every operand a ``%para.N``)."""
    found = []
    for op in ops:
        if "%para." not in op.line:
            continue
        instruction = parse_instruction(op.line)
        numbers = [_PARA.match(o.name) for o in instruction.operands]
        if instruction.operands and all(numbers):
            found.append((op, instruction, {int(n.group(1)) for n in numbers if n}))
    return found


def _renumbered(op: ProfiledOp, start: int) -> FusedLine:
    """``op`` as a line of the megacore body: ``%para.N`` becomes parameter ``N - start``."""
    line = _PARA_IN_TEXT.sub(
        lambda m: f"%param_{int(m.group(1)) - start}.para{m.group(1)}", op.line
    )
    return FusedLine(line, op.body)


def megacore_body(ops: Sequence[ProfiledOp], caller: Instruction) -> tuple[FusedLine, ...]:
    """The fused lines of megacore fusion ``caller`` (see the module docstring), or ``()``."""
    members = _members(ops)
    shapes: dict[int, Shape | None] = {}
    for _, instruction, _ in members:
        for operand in instruction.operands:
            found = _PARA.match(operand.name)
            if found:
                shapes.setdefault(int(found.group(1)), operand.shape)
    width = len(caller.operands)
    bodies: dict[tuple[str, ...], tuple[FusedLine, ...]] = {}
    for start in sorted(shapes):
        window = range(start, start + width)
        if not all(_same_data(shapes.get(n), caller.operands[n - start].shape) for n in window):
            continue
        inside = [m for m in members if m[2] & set(window)]
        if not inside or any(not m[2] <= set(window) for m in inside):
            continue
        lines = tuple(_renumbered(op, start) for op, _, _ in inside)
        signature = tuple(sorted(re.sub(r"%[\w.\-]+", "%", line.line) for line in lines))
        bodies.setdefault(signature, lines)
    return next(iter(bodies.values())) if len(bodies) == 1 else ()

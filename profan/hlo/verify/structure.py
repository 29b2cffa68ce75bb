"""Structure checks, before any shape is compared: the opcode is one XLA knows, an op of fixed
arity has that many operands, and an op that calls computations names the ones it must
(``while`` its condition and body, ``conditional`` its branches, ``fusion`` its body, …).

XLA's parser refuses each of these; profan's grammar reads any ``name(...)`` as an instruction,
so without them a mistyped or mangled op would be costed as some other op, or as nothing (a
``fusion`` turned into ``send`` gave a step's MFU of 0 with exit 0).
"""

from __future__ import annotations

from profan.hlo.model import Module
from profan.hlo.opcodes import XLA_OPCODE_ARITY
from profan.hlo.verify.problem import Problem

# opcode -> the attribute sets XLA requires, any one of which will do
_REQUIRED_CALLS: dict[str, tuple[tuple[str, ...], ...]] = {
    "while": (("condition", "body"),),
    "conditional": (("branch_computations",), ("true_computation", "false_computation")),
    "call": (("to_apply",),),
    "fusion": (("calls",),),
    "async-start": (("calls",),),
    "map": (("to_apply",),),
    "reduce": (("to_apply",),),
    "reduce-window": (("to_apply",),),
    "scatter": (("to_apply",),),
    "sort": (("to_apply",),),
    "all-reduce": (("to_apply",),),
    "all-reduce-start": (("to_apply",),),
    "reduce-scatter": (("to_apply",),),
    "select-and-scatter": (("select", "scatter"),),
    "custom-call": (("custom_call_target",),),
}


def _missing_attributes(opcode: str, attributes: dict[str, str]) -> str | None:
    """What a call-like op lacks, worded as XLA's parser wants it, or None."""
    choices = _REQUIRED_CALLS.get(opcode)
    if choices is None or any(all(name in attributes for name in names) for names in choices):
        return None
    wanted = " or ".join(", ".join(f"{name}=" for name in names) for names in choices)
    return f"{opcode} needs {wanted}"


def structure_problem(module: Module) -> Problem | None:
    """The first op whose opcode XLA does not know, whose operand count its opcode does not
    allow, or which lacks a computation its opcode must call."""
    for computation in module.computations:
        for instruction in computation.instructions:
            opcode = instruction.opcode
            if opcode not in XLA_OPCODE_ARITY:
                reason = f"unknown opcode {opcode!r}: XLA has no such op"
                return Problem(computation.name, instruction.name, reason)
            arity = XLA_OPCODE_ARITY[opcode]
            if arity is not None and len(instruction.operands) != arity:
                count = len(instruction.operands)
                reason = f"{opcode} takes {arity} operand{'s' * (arity != 1)}, not {count}"
                return Problem(computation.name, instruction.name, reason)
            missing = _missing_attributes(opcode, instruction.attributes)
            if missing is not None:
                return Problem(computation.name, instruction.name, missing)
    return None

"""Turn op-profile ops back into HLO modules profan's ``CostModel`` can cost.

An op profile (``profan.xprof.op_profile``) gives each op's line and, for a fusion, the lines of
its fused instructions, nested fusions included.  What it leaves out is rebuilt here from XLA's
own rules:

* a fused computation's parameters are the names its lines use but do not define; XLA names them
  ``param_N.M`` for parameter ``N``; a fusion operand no line reads (a pass-through) gets a
  parameter of the operand's printed shape;
* its root is the instruction nothing else in the body uses; a fusion with several outputs gets a
  root ``tuple`` whose elements are matched to the outputs by shape: first the instructions
  nothing uses (a collective to an output the fusion aliases to an operand, where an in-flight
  collective lands, the others to the rest), then, for an output the fusion aliases to an operand
  (``output_to_operand_aliasing``), that operand's parameter, then (an output may also feed the
  body) the latest computed instruction of that shape;
* operands the op's line takes from the rest of the program become parameters of an entry
  computation (their shapes are printed in the line), so the op is costed alone, as the profile
  measured it.

``program_module(program)`` puts every op of a program into one entry computation (operands that
another listed op defines stay references); ``op_module(op)`` rebuilds one op.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from profan.errors import ProfanError
from profan.hlo import parse_instruction
from profan.hlo.model import Computation, Instruction, Module, Operand, Shape
from profan.hlo.opcodes import COLLECTIVE_OPCODES
from profan.hlo.views import called_computations
from profan.xprof.megacore import megacore_body
from profan.xprof.op_profile import FusedLine, ProfiledOp, ProfiledProgram, instruction_name

_PARAMETER_NUMBER = re.compile(r"^param_(\d+)(?:\.|$)")
_ALIAS = re.compile(r"\{(\d*)\}\s*:\s*\(\s*(\d+)")
ROOT_TUPLE = "tuple.rebuilt"


class RebuildError(ProfanError):
    """An op whose fused body cannot be put back together (a line that does not fit)."""


def _same_data(first: Shape, second: Shape) -> bool:
    """Equal element type and dims (layouts may differ: a bitcast-free alias keeps the data)."""
    if first.is_tuple or second.is_tuple:
        return (
            first.is_tuple
            and second.is_tuple
            and len(first.tuple_shapes) == len(second.tuple_shapes)
            and all(map(_same_data, first.tuple_shapes, second.tuple_shapes))
        )
    return first.dtype == second.dtype and first.dims == second.dims


def _is_collective(instruction: Instruction) -> bool:
    return instruction.opcode in COLLECTIVE_OPCODES


def _aliases(fusion: Instruction) -> dict[int, int]:
    """Output index -> operand number, from ``output_to_operand_aliasing={{1}: (0, {}), ...}``."""
    text = fusion.attributes.get("output_to_operand_aliasing", "")
    return {int(output or 0): int(operand) for output, operand in _ALIAS.findall(text)}


def _parameter(name: str, shape: Shape, number: int, computation: str) -> Instruction:
    return Instruction(
        name=name,
        opcode="parameter",
        shape=shape,
        operands=[Operand(str(number))],
        parameter_number=number,
        computation=computation,
    )


def _placed(instruction: Instruction, computation: str, *, root: bool = False) -> Instruction:
    instruction.computation = computation
    instruction.is_root = root
    return instruction


def _in_dataflow_order(instructions: list[Instruction]) -> list[Instruction]:
    """Definitions before uses (the profile lists a body in its own order)."""
    by_name = {i.name: i for i in instructions}
    placed: set[str] = set()
    ordered: list[Instruction] = []

    def place(instruction: Instruction) -> None:
        stack = [(instruction, False)]
        while stack:
            current, expanded = stack.pop()
            if current.name in placed:
                continue
            if expanded:
                placed.add(current.name)
                ordered.append(current)
                continue
            stack.append((current, True))
            for name in reversed(current.operand_names):
                operand = by_name.get(name)
                if operand is not None and operand.name not in placed:
                    stack.append((operand, False))

    for instruction in instructions:
        place(instruction)
    return ordered


def _fused_parameters(
    caller: Instruction,
    body: list[Instruction],
    computation: str,
    numbered: dict[str, int] | None = None,
) -> list[Instruction]:
    """The body's parameters: every name it uses but does not define, numbered by XLA's
    ``param_N`` naming (else by the caller's operand of the same shape), plus one parameter
    per caller operand no line reads."""
    defined = {i.name for i in body}
    used: dict[str, Shape | None] = {}
    for instruction in body:
        for operand in instruction.operands:
            if operand.name not in defined:
                used.setdefault(operand.name, operand.shape)
    operand_shapes = [operand.shape for operand in caller.operands]
    numbers: dict[str, int] = {n: i for n, i in (numbered or {}).items() if n in used}
    for name in used:
        found = _PARAMETER_NUMBER.match(name)
        if name in numbers:
            continue
        if found and int(found.group(1)) < len(operand_shapes):
            numbers[name] = int(found.group(1))
    for name, shape in used.items():
        if name in numbers:
            continue
        taken = set(numbers.values())
        free = [
            index
            for index, operand_shape in enumerate(operand_shapes)
            if index not in taken
            and (shape is None or operand_shape is None or _same_data(shape, operand_shape))
        ]
        if not free:
            raise RebuildError(
                f"{caller.name}: its fused body uses %{name}, which no line defines and which "
                "matches none of the fusion's operands"
            )
        numbers[name] = free[0]
    parameters = []
    for name, number in numbers.items():
        shape = used[name] or operand_shapes[number]
        if shape is None:
            raise RebuildError(f"{caller.name}: the shape of parameter %{name} is not printed")
        parameters.append(_parameter(name, shape, number, computation))
    taken = set(numbers.values())
    for index, shape in enumerate(operand_shapes):
        if index not in taken and shape is not None:
            parameters.append(_parameter(f"param_{index}.passthrough", shape, index, computation))
    return sorted(parameters, key=lambda p: p.parameter_number or 0)


def _root(
    caller: Instruction, body: list[Instruction], parameters: list[Instruction], computation: str
) -> list[Instruction]:
    """The body with its root marked (a rebuilt root tuple appended for several outputs)."""
    used = {name for instruction in body for name in instruction.operand_names}
    unused = [i for i in body if i.name not in used]
    shape = caller.shape
    whole = [i for i in unused if _same_data(i.shape, shape)]
    if whole:
        _placed(whole[-1], computation, root=True)
        return body
    if not shape.is_tuple:
        if len(unused) == 1:
            _placed(unused[0], computation, root=True)
            return body
        raise RebuildError(
            f"{caller.name}: cannot tell which of its fused instructions is the root "
            f"({len(unused)} have no user, none has the fusion's shape)"
        )
    for sink in [i for i in unused if i.shape.is_tuple]:  # a multi-output member's results
        unused.remove(sink)
        for index, leaf in enumerate(sink.shape.tuple_shapes):
            element = Instruction(
                f"{sink.name}.{index}", "get-tuple-element", leaf, [Operand(sink.name, sink.shape)],
                {"index": str(index)}, computation=computation,
            )  # fmt: skip
            body.append(element)
            unused.append(element)
    aliases = _aliases(caller)
    by_number = {p.parameter_number: p for p in parameters}
    # values that leave the fusion: first those nothing in the body uses, then (an output may
    # also feed the body) the latest computed ones
    inner = [i for i in reversed(body) if i.name in used and i.opcode != "constant"]
    free = list(unused)
    elements: list[Operand] = []
    for index, leaf in enumerate(shape.tuple_shapes):
        fits = [i for i in free if _same_data(i.shape, leaf)]
        # an output aliased to an operand is where an in-flight collective lands; the others
        # are the fusion's own results
        fits.sort(key=lambda i: _is_collective(i) != (index in aliases))
        match = fits[0] if fits else None
        if match is None and index in aliases and aliases[index] in by_number:
            match = by_number[aliases[index]]
        if match is None:
            match = next((i for i in inner if _same_data(i.shape, leaf)), None)
            if match is not None:
                inner.remove(match)
        if match is None:
            raise RebuildError(
                f"{caller.name}: no fused instruction produces its output {{{index}}}"
            )
        if match in free:
            free.remove(match)
        elements.append(Operand(match.name, match.shape))
    root = Instruction(ROOT_TUPLE, "tuple", shape, elements)
    return [*body, _placed(root, computation, root=True)]


def _fused_computations(
    caller: Instruction, lines: Sequence[FusedLine], numbered: dict[str, int] | None = None
) -> list[Computation]:
    """The computation ``caller`` calls, rebuilt from its lines, and those of nested fusions."""
    names = called_computations(caller)
    if not names or not lines:
        return []
    name = names[0]
    body = [_placed(parse_instruction(line.line), name) for line in lines]
    nested: list[Computation] = []
    for instruction, line in zip(body, lines, strict=True):
        if line.children:
            nested += _fused_computations(instruction, line.children)
    parameters = _fused_parameters(caller, body, name, numbered)
    body = _root(caller, _in_dataflow_order(body), parameters, name)
    return [*nested, Computation(name, [*parameters, *body])]


def _entry(tops: Iterable[Instruction], name: str) -> Computation:
    """An entry computation holding ``tops``: operands no top defines become parameters."""
    tops = list(tops)
    defined = {top.name for top in tops}
    parameters: dict[str, Instruction] = {}
    for top in tops:
        for operand in top.operands:
            if operand.name in defined or operand.name in parameters:
                continue
            if operand.shape is None:
                raise RebuildError(
                    f"{top.name}: the shape of operand %{operand.name} is not printed"
                )
            parameters[operand.name] = _parameter(
                operand.name, operand.shape, len(parameters), name
            )
    ordered = _in_dataflow_order([_placed(top, name) for top in tops])
    _placed(ordered[-1], name, root=True)
    return Computation(name, [*parameters.values(), *ordered], is_entry=True)


def _module(name: str, ops: Sequence[tuple[str, tuple[FusedLine, ...]]]) -> Module:
    computations: dict[str, Computation] = {}
    tops = []
    for line, body in ops:
        top = parse_instruction(line)
        tops.append(top)
        for computation in _fused_computations(top, body):
            computations.setdefault(computation.name, computation)
    entry = _entry(tops, f"{name}.entry" if name else "entry")
    return Module(name, [*computations.values(), entry])


def op_module(op: ProfiledOp, line: str | None = None) -> Module:
    """A module that holds ``op`` alone (its line, or ``line``: another op of the same group,
    which shares its fused body) with its fused body; the op is the entry's root."""
    return _module(op.name, [(line or op.line, op.body)])


def program_module(program: ProfiledProgram) -> Module:
    """Every op of a program in one module (the op profile lists each op once, in no program
    order: the entry computation is in dataflow order)."""
    return _module(program.name or "op_profile", [(op.line, op.body) for op in program.ops])


def find_op(program: ProfiledProgram, name: str) -> ProfiledOp | None:
    """The op of ``program`` called ``name`` (members of duplicate groups included)."""
    return next((op for op in program.ops if op.name == name), None)


def op_for_line(program: ProfiledProgram, line: str) -> ProfiledOp:
    """The op an HLO line of ``program`` stands for (an HLO stats row, a trace event): the
    profile's op of that name; else the line with the body the profile gives its called
    computation (another op calling it, or a megacore fusion's ops, ``profan.xprof.megacore``);
    else the line alone."""
    name = instruction_name(line)
    found = find_op(program, name)
    if found is not None:
        return found
    instruction = parse_instruction(line)
    called = set(called_computations(instruction))
    body: tuple[FusedLine, ...] = ()
    if called:
        sharing = (op for op in program.ops if op.body and called & set(_calls(op.line)))
        body = next((op.body for op in sharing), ())
        if not body:
            body = megacore_body(program.ops, instruction)
    return ProfiledOp(name, line, "", body)


def _calls(line: str) -> list[str]:
    found = re.search(r"calls=%?([^\s,]+)", line)
    return [found.group(1)] if found else []

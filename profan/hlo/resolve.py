"""Names in a parsed computation, resolved as XLA's parser resolves them.

* An operand ``%name#N`` (newer XLA's printing of an element of a tuple-shaped result; ``#N#M``
  nests) reads through the get-tuple-element XLA's IR has: it is added, named ``name#N`` and
  marked implicit, right after the instruction whose tuple it reads.
* Every operand and control predecessor must name an instruction of its computation, and an
  instruction name is given once per computation; otherwise the text is an ``HloSyntaxError``
  at the offending name's line and column, as XLA reports "instruction does not exist".
* Computations profan makes itself (written inline as an attribute, or the wrapper of an
  ``X-start`` async sugar) get a name no other computation has, as XLA's module uniquifies them.
"""

from __future__ import annotations

import re

from profan.errors import HloSyntaxError
from profan.hlo.model import UNKNOWN_SHAPE, Computation, Instruction, Operand, Shape
from profan.hlo.views import control_predecessors


def with_implicit_elements(
    instructions: list[Instruction], text: str | None, computation: str
) -> list[Instruction]:
    """The instructions with the get-tuple-element behind each ``%name#N`` operand added."""
    shapes = {i.name: i.shape for i in instructions}
    wanted: dict[str, list[Instruction]] = {}
    by_source: list[tuple[str, Instruction]] = []

    def element(name: str, user: Instruction) -> None:
        if name in shapes:
            return
        source, _, index_text = name.rpartition("#")
        if "#" in source:
            element(source, user)
        shape = shapes.get(source)
        if shape is None:
            raise _undefined(
                text, computation, user, name, f"instruction {source!r} is not defined"
            )
        index = int(index_text)
        if shape.dtype == "unknown":
            element_shape: Shape = UNKNOWN_SHAPE
        elif not shape.is_tuple:
            raise _undefined(text, computation, user, name, f"{source!r} is not a tuple")
        elif index >= len(shape.tuple_shapes):
            raise _undefined(
                text,
                computation,
                user,
                name,
                f"{source!r} has {len(shape.tuple_shapes)} elements, no element {index}",
            )
        else:
            element_shape = shape.tuple_shapes[index]
        getter = Instruction(
            name,
            "get-tuple-element",
            element_shape,
            [Operand(source, None)],
            {"index": index_text},
            implicit=True,
        )
        shapes[name] = element_shape
        by_source.append((source, getter))

    for instruction in instructions:
        for operand in instruction.operands:
            if "#" in operand.name:
                element(operand.name, instruction)
    for source, getter in by_source:
        wanted.setdefault(source, []).append(getter)
    out: list[Instruction] = []

    def place(instruction: Instruction) -> None:
        out.append(instruction)
        for getter in wanted.pop(instruction.name, ()):
            place(getter)

    for instruction in instructions:
        place(instruction)
    return out


def check_names(
    instructions: list[Instruction],
    used: set[str],
    text: str | None,
    computation: str,
    predecessors: bool = True,
) -> None:
    """Raise ``HloSyntaxError`` for a name given twice, or an operand (``used`` holds every
    operand name) or control predecessor that names no instruction of the computation
    (``predecessors`` False: the text has none, skip looking)."""
    defined = {instruction.name for instruction in instructions}
    if len(defined) != len(instructions):
        seen: set[str] = set()
        for instruction in instructions:
            if instruction.name in seen:
                reason = f"instruction {instruction.name!r} is defined twice"
                raise _undefined(text, computation, instruction, None, reason)
            seen.add(instruction.name)
    if not used <= defined:
        for instruction in instructions:
            for operand in instruction.operands:
                if operand.name not in defined:
                    reason = f"instruction does not exist: {operand.name}"
                    raise _undefined(text, computation, instruction, operand.name, reason)
    for instruction in instructions if predecessors else ():
        if "control-predecessors" not in instruction.attributes:
            continue
        for name in control_predecessors(instruction):
            if name not in defined:
                reason = f"instruction {name!r} is not defined"
                raise _undefined(text, computation, instruction, name, reason)


def unique_computation_names(
    computations: list[Computation],
    generated: dict[int, list[tuple[dict[str, str], str]]],
    text: str | None = None,
) -> None:
    """Rename each computation profan made (``id`` in ``generated``, with the attribute dicts
    and keys that call it) whose name another computation already has; two computations the
    text itself defines under one name are an ``HloSyntaxError``, as in XLA."""
    taken: set[str] = set()
    for computation in computations:
        if id(computation) in generated:
            continue
        if computation.name in taken:
            line, column = _second_definition(text, computation.name)
            raise HloSyntaxError(
                f"computation {computation.name} is defined twice", line=line, column=column
            )
        taken.add(computation.name)
    for computation in computations:
        callers = generated.get(id(computation))
        if callers is None:
            continue
        name = computation.name
        if name in taken:
            suffix = 1
            while f"{name}.{suffix}" in taken:
                suffix += 1
            computation.name = f"{name}.{suffix}"
            for instruction in computation.instructions:
                instruction.computation = computation.name
            for attributes, key in callers:
                attributes[key] = f"%{computation.name}"
        taken.add(computation.name)


def _second_definition(text: str | None, name: str) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    headers = list(re.finditer(rf"(?m)^[ \t]*(?:ENTRY\s+)?%?({re.escape(name)})\s*[({{]", text))
    if len(headers) < 2:
        return None, None
    at = headers[1].start(1)
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def _undefined(
    text: str | None,
    computation: str,
    instruction: Instruction,
    name: str | None,
    reason: str,
) -> HloSyntaxError:
    line, column = locate(text, computation, instruction.name, name)
    return HloSyntaxError(reason, line=line, column=column)


def locate(
    text: str | None, computation: str, instruction: str, name: str | None
) -> tuple[int | None, int | None]:
    """Line and column of ``name`` among the operands and attributes of ``instruction`` (or
    of the instruction itself when ``name`` is None), found in ``text``: the computation's
    header first, then the instruction's line, then the name.  Found only on the error path,
    so a parse that succeeds pays nothing for it."""
    if not text:
        return None, None
    start = 0
    header = re.search(rf"(?m)^\s*(?:ENTRY\s+)?%?{re.escape(computation)}(?![\w.\-])", text)
    if header is not None:
        start = header.end()
    defined = re.compile(rf"(?m)^\s*(?:ROOT\s+)?%?({re.escape(instruction)})\s*=")
    found = defined.search(text, start) or defined.search(text)
    if found is None:
        return None, None
    at = found.start(1)
    if name is not None:
        use = re.compile(rf"(?<![\w.\-])%?{re.escape(name)}(?![\w.\-#])")
        opened = text.find("(", found.end())
        hit = use.search(text, opened if opened >= 0 else found.end())
        if hit is not None:
            at = hit.start()
    line = text.count("\n", 0, at) + 1
    return line, at - text.rfind("\n", 0, at)

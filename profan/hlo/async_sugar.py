"""XLA's async sugar, unsugared as XLA's parser does.

``X-start``/``X-update``/``X-done`` of an op with no async form of its own (e.g. a ``fusion``)
become async-start/-update/-done, the start calling a new computation that holds X, so counts,
called computations and costs match the module XLA builds from the same text.
"""

from __future__ import annotations

from profan.hlo.model import UNKNOWN_SHAPE, Computation, Instruction, Operand, Shape
from profan.hlo.opcodes import NATIVE_ASYNC_OPCODES
from profan.hlo.text import unquote

# Attributes that stay on the async-start rather than moving to the wrapped op.
ASYNC_ATTRIBUTES = frozenset(
    {"async_execution_thread", "metadata", "frontend_attributes", "control-predecessors"}
)


def unsugar_async(
    instruction: Instruction,
    calls: dict[str, str],
    shapes: dict[str, Shape],
    wrappers: dict[str, int],
    generated: dict[int, list[tuple[dict[str, str], str]]],
) -> Computation | None:
    """Rewrite ``instruction`` (an ``X-start``/``-update``/``-done``) in place; returns the
    wrapper computation an ``X-start`` now calls, if it made one.

    ``calls`` maps each async-start's name to the computation it calls (filled here, for the
    -update/-done after it), ``shapes`` the computation's instruction shapes by name;
    ``wrappers`` ("%name" of each wrapper made so far -> its id) and ``generated`` (id of each
    computation profan made -> the attribute dicts and keys that call it, for renaming) are the
    module's, shared with the builder."""
    opcode = instruction.opcode
    if opcode in NATIVE_ASYNC_OPCODES:
        return None
    if not opcode.endswith("-start"):
        instruction.opcode = "async-update" if opcode.endswith("-update") else "async-done"
        # Like XLA's printer, name the computation the async pair runs on both halves.
        called = calls.get(instruction.operands[0].name) if instruction.operands else None
        if called is not None and "calls" not in instruction.attributes:
            instruction.attributes["calls"] = called
            calls[instruction.name] = called
        wrapper = wrappers.get(instruction.attributes.get("calls", ""))
        if wrapper is not None:
            generated[wrapper].append((instruction.attributes, "calls"))
        return None
    wrapped_opcode = opcode[: -len("-start")]
    shape = instruction.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        return None  # not the async tuple form XLA expects: keep the op as written
    operand_shapes = shape.tuple_shapes[0]
    if operand_shapes.is_tuple and len(operand_shapes.tuple_shapes) == len(instruction.operands):
        parameter_shapes = list(operand_shapes.tuple_shapes)
    else:
        parameter_shapes = [
            o.shape or shapes.get(o.name, UNKNOWN_SHAPE) for o in instruction.operands
        ]
    computation_name = f"wrapped_{wrapped_opcode}.{instruction.name}"
    parameters = [
        Instruction(
            name=f"{instruction.name}.param_{index}",
            opcode="parameter",
            shape=parameter_shape,
            parameter_number=index,
            computation=computation_name,
        )
        for index, parameter_shape in enumerate(parameter_shapes)
    ]
    kept = {k: v for k, v in instruction.attributes.items() if k in ASYNC_ATTRIBUTES}
    moved = {k: v for k, v in instruction.attributes.items() if k not in ASYNC_ATTRIBUTES}
    if "metadata" in kept:
        moved["metadata"] = kept["metadata"]
    wrapped = Instruction(
        name=f"{instruction.name}.{wrapped_opcode}",
        opcode=wrapped_opcode,
        shape=shape.tuple_shapes[1],
        operands=[Operand(p.name, None) for p in parameters],
        attributes=moved,
        is_root=True,
        computation=computation_name,
    )
    thread = kept.get("async_execution_thread")
    computation = Computation(
        computation_name,
        [*parameters, wrapped],
        False,
        unquote(thread) if thread and thread.startswith('"') else None,
    )
    instruction.opcode = "async-start"
    instruction.attributes = {**kept, "calls": f"%{computation_name}"}
    calls[instruction.name] = f"%{computation_name}"
    generated[id(computation)] = [(instruction.attributes, "calls")]
    wrappers[f"%{computation_name}"] = id(computation)
    return computation

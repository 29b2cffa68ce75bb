"""Undonated inputs: entry parameters the program replaces with a new value without donating them.

Donation (``jax.jit(..., donate_argnums=...)``, ``input_output_alias`` in the module) lets an
output reuse an input's buffer; without it, state that a step replaces exists twice at its end
(MODEL.md §6).  Only an input the caller can drop after the call is worth donating, and a program
does not say what its caller keeps.  What it does say is whether an output is a *new value* of an
input (``profan.memory.updates``: the input reaches it element for element, as ``w`` reaches a
train step's ``w - lr * g``) and whether the program is a step that carries state:

- that new value mixes in work the program did (a matmul, a reduction, a collective, a loop, an
  in-place update), as a train step's update of each weight and optimizer moment does; or
- the program returns new values of two or more of its inputs (an optimizer update jitted on its
  own: parameters and moments in, new parameters and moments out).

An input is reported when an output of its shape and dtype, not aliased, is a new value of it
and the program is such a step.  A program that reads weights and returns activations that only
share their shape (``x @ w`` with a square ``w``, an FFT) returns no new value of its inputs; one
that only maps an input element by element (JAX's eager ``jit_add``, ``jit_exp``) is not a step:
nothing shows that its input is dead after it.  Each output takes one input of those it is a new
value of (``p - lr * m`` is a new value of both): the one that reaches the fewest outputs (a
gradient reaches every moment and parameter it updates; a state input only its own new value),
then the first in parameter order.
"""

from __future__ import annotations

from collections import Counter

from profan.hlo import views
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.shapes import shape_to_text
from profan.memory.estimate import alias_entries
from profan.memory.model import PARAMETER, ProgramMemory, Undonated
from profan.memory.updates import Flow, output_flows

# How many new values of inputs make a step that carries state on their own (see the docstring).
STATE_PAIRS = 2


def logical_shape(shape: Shape) -> str:
    """``f32[128,128]`` (dtype and dims only, no layout)."""
    return shape_to_text(Shape(shape.dtype, shape.dims))


def _root_element(module: Module, index: tuple[int, ...]) -> tuple[Instruction, Shape] | None:
    """The instruction that defines the entry's output at ``index``, and the output's shape."""
    entry = module.entry
    instruction = entry.root
    for position in index:
        if instruction.opcode != "tuple" or position >= len(instruction.operands):
            return None
        found = entry.get(instruction.operands[position].name)
        if found is None:
            return None
        instruction = found
    shape = module.entry.root.shape
    for position in index:
        if not shape.is_tuple or position >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[position]
    return instruction, shape


def _pairs(module: Module, flows: dict[tuple[int, ...], Flow]) -> list[tuple[int, tuple, Flow]]:
    """(parameter number, output index, flow) of each output that is a new value of an array
    parameter with its shape and dtype, neither side donated; one parameter per output."""
    aliases = alias_entries(module)
    aliased_outputs = {output for output, _, _ in aliases}
    donated = {number for _, number, _ in aliases}
    shapes = {p.parameter_number or 0: p.shape for p in module.entry.params if not p.shape.is_tuple}
    # How many outputs each input reaches: a state input reaches its own new value, an update
    # (a gradient) reaches every value it updates, so fewer outputs breaks a tie.
    reach = Counter(number for flow in flows.values() for number, _ in flow.carried)
    taken: set[int] = set()
    pairs = []
    for index, flow in flows.items():
        if index in aliased_outputs:
            continue
        found = _root_element(module, index)
        if found is None:
            continue
        _, shape = found
        candidates = sorted(
            (
                number
                for number, within in flow.carried
                if within == ()
                and number not in donated
                and number not in taken
                and number in shapes
                and logical_shape(shapes[number]) == logical_shape(shape)
            ),
            key=lambda number: (reach[number], number),
        )
        if candidates:
            taken.add(candidates[0])
            pairs.append((candidates[0], index, flow))
    return pairs


def undonated_inputs(memory: ProgramMemory, module: Module | None) -> list[Undonated]:
    """The inputs of ``module`` (the program ``memory`` describes) that a step replaces with a
    new value without donating them, largest first; none without the module."""
    if module is None:
        return []
    pairs = _pairs(module, output_flows(module))
    is_step = len(pairs) >= STATE_PAIRS or any(flow.computed for _, _, flow in pairs)
    if not is_step:
        return []
    parameters = {
        b.parameter_number: b
        for b in memory.live_at_peak
        if b.kind == PARAMETER and b.parameter_number is not None
    }
    found = []
    for number, index, _ in pairs:
        buffer = parameters.get(number)
        element = _root_element(module, index)
        if buffer is None or not buffer.size_bytes or element is None:
            continue
        instruction, shape = element
        location = views.source_location(module, instruction)
        found.append(
            Undonated(
                parameter=buffer.name,
                parameter_number=number,
                parameter_path=buffer.op_path,
                output=instruction.name,
                output_source=str(location) if location is not None else None,
                shape=logical_shape(shape),
                size_bytes=buffer.size_bytes,
            )
        )
    return sorted(found, key=lambda u: (-u.size_bytes, u.parameter_number or 0))

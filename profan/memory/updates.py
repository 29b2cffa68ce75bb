"""Which of a program's inputs each of its outputs is a new value of.

An output is a *new value* of an entry parameter when the parameter reaches it element for
element: through elementwise math (a train step's ``w - lr * g``), converts, copies, bitcasts and
reshapes, as the base of an in-place update (``dynamic-update-slice``, ``scatter``), and through
tuples, fusions, calls and the state a ``while`` loop carries.  Anything that moves or mixes
elements (dot, convolution, reduce, transpose, broadcast, gather, FFT, collectives, custom calls)
ends the chain: ``x @ w`` is not a new value of ``w``, even when it has ``w``'s shape.

Each output also says whether the program *computed* anything on its way: a matmul, a
reduction, a collective, a loop, an in-place update, a custom call.  A train step's
``w - lr * grad(w)`` did; JAX's eager ``jit_add(x, y)`` only maps its inputs element by element.

The walk runs forward over each computation in printed (definition) order, once per call site,
so it is linear in the module's size and never recurses along a chain of instructions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from profan.hlo import views
from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.opcodes import ELEMENTWISE_OPCODES

# Ops that only move or create elements: no new value of an input comes out of them, and they
# compute nothing of their own (whatever their operands computed, they pass on).
_MOVES = frozenset(
    {
        "broadcast", "concatenate", "constant", "dynamic-reshape", "dynamic-slice", "gather",
        "iota", "pad", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state",
        "slice", "transpose", "partition-id", "replica-id", "after-all",
    }
)  # fmt: skip
# Ops that relabel the same elements in the same order: a new value keeps flowing through.
_SAME_ELEMENTS = frozenset({"copy", "bitcast", "reshape"})
# In-place updates of their first operand (the base): a new value of it, and computed work.
_IN_PLACE = frozenset({"dynamic-update-slice", "scatter"})
_LOOP_STATE = -1  # parameter number standing for a while body's carried state


# (entry parameter number, shape index within it)
Input: TypeAlias = tuple[int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class Flow:
    """What one array value is: the inputs it is a new value of, and whether work made it."""

    carried: frozenset[Input] = frozenset()
    computed: bool = False


# The flow of a value: a ``Flow`` for an array, a tuple of trees for a tuple.
Tree: TypeAlias = "Flow | tuple[Tree, ...]"

_NOTHING = Flow()
_WORK = Flow(computed=True)


def _uniform(shape: Shape, flow: Flow) -> Tree:
    """The same flow at every array of ``shape``."""
    if shape.is_tuple:
        return tuple(_uniform(element, flow) for element in shape.tuple_shapes)
    return flow


def _at(tree: Tree, index: tuple[int, ...]) -> Tree:
    for position in index:
        if not isinstance(tree, tuple) or position >= len(tree):
            return _WORK  # an index the tree does not have: unknown, so treated as work
        tree = tree[position]
    return tree


def _computed(tree: Tree) -> bool:
    if isinstance(tree, Flow):
        return tree.computed
    return any(_computed(element) for element in tree)


def _leaf(tree: Tree) -> Flow:
    """An array's flow (a tuple where an array was expected counts as work)."""
    return tree if isinstance(tree, Flow) else Flow(computed=_computed(tree))


def _input_tree(shape: Shape, number: int, index: tuple[int, ...] = ()) -> Tree:
    """A parameter's own tree: every array in it is a new value of itself."""
    if shape.is_tuple:
        return tuple(
            _input_tree(element, number, (*index, position))
            for position, element in enumerate(shape.tuple_shapes)
        )
    return Flow(frozenset({(number, index)}))


def _same_dims(a: Shape, b: Shape) -> bool:
    return not a.is_tuple and not b.is_tuple and a.dims == b.dims


def _called(module: Module, instruction: Instruction, key: str) -> Computation | None:
    names = views.computation_names(instruction.attributes.get(key, ""))
    if not names:
        return None
    try:
        return module.computation(names[0])
    except KeyError:
        return None


class _Walk:
    def __init__(self, module: Module) -> None:
        self.module = module

    def run(self, computation: Computation, parameters: list[Tree]) -> Tree:
        """The root's tree of ``computation`` with its parameters bound to ``parameters``."""
        values: dict[str, Tree] = {}
        for instruction in computation.instructions:
            operands = [
                values.get(operand.name.lstrip("%"), _WORK) for operand in instruction.operands
            ]
            values[instruction.name] = self.step(instruction, operands, parameters, computation)
        return values.get(computation.root.name, _WORK)

    def step(
        self,
        instruction: Instruction,
        operands: list[Tree],
        parameters: list[Tree],
        computation: Computation,
    ) -> Tree:
        opcode, shape = instruction.opcode, instruction.shape
        if opcode == "parameter":
            number = instruction.parameter_number or 0
            return parameters[number] if number < len(parameters) else _uniform(shape, _WORK)
        if opcode == "get-tuple-element" and operands:
            return _at(operands[0], (int(instruction.attributes.get("index", "0")),))
        if opcode == "tuple":
            return tuple(operands)
        if opcode in ("opt-barrier", "optimization-barrier") and operands:
            return operands[0]
        if opcode in ("fusion", "call"):
            called = _called(
                self.module, instruction, "calls" if opcode == "fusion" else "to_apply"
            )
            return self.run(called, operands) if called else _uniform(shape, _WORK)
        if opcode == "while" and operands:
            return self.loop(instruction, operands[0])
        if opcode in ELEMENTWISE_OPCODES or opcode in _SAME_ELEMENTS:
            return self.elementwise(instruction, operands, computation)
        if opcode in _IN_PLACE and operands and not shape.is_tuple:
            return Flow(_leaf(operands[0]).carried, computed=True)
        if opcode in _MOVES:
            return _uniform(shape, Flow(computed=any(_computed(tree) for tree in operands)))
        return _uniform(shape, _WORK)

    def elementwise(
        self, instruction: Instruction, operands: list[Tree], computation: Computation
    ) -> Tree:
        shape = instruction.shape
        if shape.is_tuple:
            return _uniform(shape, _WORK)
        carried: set[Input] = set()
        computed = False
        for operand, tree in zip(instruction.operands, operands, strict=True):
            flow = _leaf(tree)
            computed = computed or flow.computed
            source = computation.get(operand.name)
            operand_shape = operand.shape or (source.shape if source is not None else None)
            if operand_shape is None:
                continue
            relabelled = (
                instruction.opcode in ("bitcast", "reshape")
                and not operand_shape.is_tuple
                and operand_shape.num_elements == shape.num_elements
            )
            if relabelled or _same_dims(operand_shape, shape):
                carried |= flow.carried
        return Flow(frozenset(carried), computed)

    def loop(self, instruction: Instruction, state: Tree) -> Tree:
        """A while loop's result: element i is a new value of the loop's initial element i when
        the body hands its state element i on as a new value of itself."""
        body = _called(self.module, instruction, "body")
        if body is None:
            return _uniform(instruction.shape, _WORK)
        own = _input_tree(instruction.shape, _LOOP_STATE)
        after = self.run(body, [own])

        def combine(initial: Tree, stepped: Tree, index: tuple[int, ...]) -> Tree:
            if isinstance(initial, tuple) and isinstance(stepped, tuple):
                return tuple(
                    combine(a, b, (*index, position))
                    for position, (a, b) in enumerate(zip(initial, stepped, strict=False))
                )
            kept = (_LOOP_STATE, index) in _leaf(stepped).carried
            return Flow(_leaf(initial).carried if kept else frozenset(), computed=True)

        return combine(state, after, ())


def output_flows(module: Module) -> dict[tuple[int, ...], Flow]:
    """Every array the entry computation returns, by output shape index, with the entry
    parameters it is a new value of (``(parameter number, shape index)``) and whether the
    program computed anything on its way."""
    entry = module.entry
    parameters = [_input_tree(p.shape, p.parameter_number or 0) for p in entry.params]
    root = _Walk(module).run(entry, parameters)

    found: dict[tuple[int, ...], Flow] = {}

    def collect(tree: Tree, index: tuple[int, ...]) -> None:
        if isinstance(tree, tuple):
            for position, element in enumerate(tree):
                collect(element, (*index, position))
        else:
            found[index] = tree

    collect(root, ())
    return found

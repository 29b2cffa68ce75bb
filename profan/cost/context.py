"""What a per-opcode cost rule may ask about an instruction: its operands' shapes, its users, the
computations it calls, and the cost of a called computation.

``CostContext`` is the interface the rules in ``profan.cost``'s per-opcode modules receive;
``profan.cost.estimate.CostModel`` implements it for one module (or for a single pasted line,
``module=None``, where only what the text printed is known).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from profan.cost import bytes as sizes
from profan.cost.model import OpCost
from profan.hlo.model import Computation, Instruction, Module, Shape


def first_array(shape: Shape | None) -> Shape | None:
    """The first array leaf of a shape (tuples: their first array)."""
    if shape is None:
        return None
    for leaf in shape.leaves():
        if leaf.is_array:
            return leaf
    return None


def elements(shape: Shape | None) -> int:
    return shape.num_elements if shape is not None else 0


def size(shape: Shape | None) -> int:
    """XLA's ``ShapeSize`` (see ``profan.cost.bytes.xla_shape_size``)."""
    return sizes.xla_shape_size(shape)


class CostContext(ABC):
    """Name lookups within one module (or none), and the recursion the rules need."""

    def __init__(self, module: Module | None) -> None:
        self.module = module
        self._users: dict[str, dict[str, list[Instruction]]] = {}

    # ------------------------------------------------------------------------ lookups

    def computation_of(self, instruction: Instruction) -> Computation | None:
        if self.module is None or instruction.computation is None:
            return None
        try:
            return self.module.computation(instruction.computation)
        except KeyError:
            return None

    def callee(self, name: str | None) -> Computation | None:
        if self.module is None or not name:
            return None
        try:
            return self.module.computation(name)
        except KeyError:
            return None

    def operand(self, instruction: Instruction, index: int) -> Instruction | None:
        computation = self.computation_of(instruction)
        if computation is None or index >= len(instruction.operands):
            return None
        return computation.get(instruction.operands[index].name)

    def operand_shape(self, instruction: Instruction, index: int) -> Shape | None:
        if index >= len(instruction.operands):
            return None
        operand = instruction.operands[index]
        if operand.shape is not None:
            return operand.shape
        found = self.operand(instruction, index)
        return found.shape if found is not None else None

    def operand_shapes(self, instruction: Instruction) -> list[Shape | None]:
        return [self.operand_shape(instruction, i) for i in range(len(instruction.operands))]

    def users(self, instruction: Instruction) -> list[Instruction]:
        computation = self.computation_of(instruction)
        if computation is None:
            return []
        table = self._users.get(computation.name)
        if table is None:
            table = {}
            for candidate in computation.instructions:
                for name in dict.fromkeys(candidate.operand_names):
                    table.setdefault(name.lstrip("%"), []).append(candidate)
            self._users[computation.name] = table
        return table.get(instruction.name, [])

    # ---------------------------------------------------------------------- recursion

    @abstractmethod
    def estimate(self, instruction: Instruction) -> OpCost:
        """The cost of one execution of ``instruction``."""

    @abstractmethod
    def computation_cost(self, computation: Computation) -> OpCost:
        """The summed cost of one pass over ``computation`` (a fresh object the caller owns)."""

    def scalar_computation_flops(self, name: str | None) -> tuple[float, float, bool]:
        """FLOPs and transcendentals of one application of a reducer / combiner computation,
        and whether its body was found (unknown: 1 FLOP per application, flagged by callers)."""
        computation = self.callee(name)
        if computation is None:
            return 1.0, 0.0, False
        cost = self.computation_cost(computation)
        return cost.flops or 0.0, cost.transcendentals or 0.0, True

"""What a per-opcode cost rule may ask about an instruction: its operands' shapes, its users, the
computations it calls (``profan.hlo.graph``), and the cost of a called computation.

``CostContext`` is the interface the rules in ``profan.cost``'s per-opcode modules receive;
``profan.cost.estimate.CostModel`` implements it for one module (or for a single pasted line,
``module=None``, where only what the text printed is known).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from profan.cost import bytes as sizes
from profan.cost.model import OpCost
from profan.hlo.graph import ModuleGraph
from profan.hlo.model import Computation, Instruction, Shape


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


class CostContext(ModuleGraph, ABC):
    """The module's name lookups (``profan.hlo.graph.ModuleGraph``) and the recursion the rules
    need."""

    def callee(self, name: str | None) -> Computation | None:
        """The computation called ``name`` (``None`` for no name or one the module lacks)."""
        return self.computation(name) if name else None

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

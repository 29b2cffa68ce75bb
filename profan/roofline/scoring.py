"""``ModuleScoring``: what scoring keeps per module (its cost model, program order and mesh),
and the costs of its instructions estimated ahead, while the trace is still being read.

Scoring estimates the cost of every op that ran (``profan.roofline.ops``), and that estimate
needs only the module.  When the trace is read by a worker process (``profan.trace.prefetch``),
the pipeline builds the scoring of each ``--hlo`` module meanwhile and estimates every
instruction of its scheduled computations (``estimate_ahead``: those that run as ops); scoring
then takes each op's cost from there.  ``estimate`` hands out a fresh ``OpCost`` either way,
equal to the one ``CostModel.estimate`` gives: the cost model's figures do not depend on which
instructions it estimated before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from profan.cost import CostModel, OpCost
from profan.hlo.graph import scheduled_computations
from profan.hlo.model import Instruction, Module
from profan.roofline.facts import mesh_axes_by_name, program_positions

if TYPE_CHECKING:
    from profan.sharding import ShardingReport


@dataclass(slots=True)
class ModuleScoring:
    """What scoring keeps per module: its cost model, program order and mesh."""

    module: Module
    sharding: ShardingReport | None
    model: CostModel = field(init=False)
    positions: dict[tuple[str | None, str], int] = field(init=False)
    axes_by_name: dict[str, tuple[str, ...]] = field(init=False)
    # id(instruction) -> its cost, estimated ahead (the module keeps every instruction alive)
    _ahead: dict[int, OpCost] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.model = CostModel(self.module)
        self.positions = program_positions(self.module)
        self.axes_by_name = mesh_axes_by_name(self.sharding)

    def estimate(self, instruction: Instruction) -> OpCost:
        """``CostModel.estimate(instruction)``: a fresh ``OpCost`` the caller may change."""
        ahead = self._ahead.get(id(instruction))
        if ahead is None:
            return self.model.estimate(instruction)
        return ahead.copy()

    def estimate_ahead(self) -> None:
        """Estimate every instruction of the module's scheduled computations now (what may run
        as an op).  An instruction the model fails on is left for ``estimate``, which then
        fails as it would have (only if that instruction ran)."""
        for scheduled in scheduled_computations(self.module):
            for instruction in scheduled.computation.instructions:
                if instruction.implicit or id(instruction) in self._ahead:
                    continue
                try:
                    self._ahead[id(instruction)] = self.model.estimate(instruction)
                except Exception:
                    continue

"""Megacore chips (TPU v4, v5p): whether a trace accounts per chip or per TensorCore.

On a megacore chip the two TensorCores act as one JAX device, so profan's model costs an op for
the whole chip.  XProf may account per TensorCore instead: each core's share of the op, half
its FLOPs and bytes.  Scored against the chip's peaks those halves would look twice as fast as
they are.  The trace's own per-op figures tell which: when they are, op for op, a core's share of
profan's figures, the trace is per TensorCore, and profan scores each op's share (its figures /
cores) against one core's peaks (``Chip.per_core()``): the same ideal times, figures comparable
with the trace's.  Without per-op figures in the trace, the chip accounting is assumed, and the
summary says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from profan.chips import Chip
from profan.cost import CostModel, OpCost

if TYPE_CHECKING:
    from profan.trace.profile import Profile

SAMPLE_OPS = 400  # ops compared with the trace's figures (enough for a clear median)
_AGREEMENT = 0.15  # relative: how close the median ratio must be to 1/cores or 1


@dataclass(frozen=True, slots=True)
class Accounting:
    """How the trace accounts an op's work, and the chip figures it is scored against."""

    per_core: bool
    cores: int
    note: str

    @property
    def name(self) -> str:
        return "per-TensorCore" if self.per_core else "per-chip"

    def scoring_chip(self, chip: Chip) -> Chip:
        return chip.per_core() if self.per_core else chip

    def share(self, cost: OpCost) -> OpCost:
        """One core's share of an op's cost (the whole op for chip accounting)."""
        if not self.per_core:
            return cost
        cores = float(self.cores)
        if cost.flops is not None:
            cost.flops /= cores
        if cost.transcendentals is not None:
            cost.transcendentals /= cores
        cost.scale_bytes(1 / cores)
        cost.derivation.append(
            f"per-TensorCore trace: one core's share (1/{self.cores}) of the op's FLOPs and bytes "
            "(in every memory space), against one core's peaks"
        )
        return cost


def _ratios(profile: Profile) -> list[float]:
    """The trace's FLOPs over profan's, for ops where both are known and the op does math."""
    ops = profile.ops
    if "trace_flops" not in ops:
        return []
    known = ops[ops["trace_flops"].notna() & (ops["trace_flops"] > 0)]
    known = known.drop_duplicates(["module_key", "op_name"]).head(SAMPLE_OPS)
    models: dict[str, CostModel] = {}
    ratios = []
    for key, name, trace_flops in zip(
        known["module_key"], known["op_name"], known["trace_flops"], strict=True
    ):
        module = profile.modules.get(key) if isinstance(key, str) else None
        instruction = profile.instruction(key, name) if module is not None else None
        if instruction is None or module is None:
            continue
        model = models.setdefault(key, CostModel(module))
        cost = model.estimate(instruction)
        if cost.flops and cost.flops_source == "hlo":
            ratios.append(float(trace_flops) / cost.flops)
    return ratios


def trace_accounting(profile: Profile, chip: Chip) -> Accounting:
    """Whether ``profile`` accounts per chip or per TensorCore (only megacore chips can)."""
    cores = chip.tensorcores_per_chip
    if not chip.megacore or cores <= 1:
        return Accounting(False, 1, "")
    ratios = _ratios(profile)
    if not ratios:
        return Accounting(
            False,
            cores,
            f"{chip.display_name} is a megacore chip ({cores} TensorCores act as one device); the "
            "trace has no per-op figures to tell its accounting: per chip assumed",
        )
    median = statistics.median(ratios)
    if math.isclose(median, 1 / cores, rel_tol=_AGREEMENT):
        return Accounting(
            True,
            cores,
            f"the trace accounts per TensorCore: its per-op FLOPs are 1/{cores} of profan's "
            f"(median ratio {median:.3g} over {len(ratios)} ops); ops are scored as one core's "
            "share against one core's peaks",
        )
    return Accounting(
        False,
        cores,
        f"the trace accounts per chip (its per-op FLOPs over profan's: median {median:.3g} "
        f"over {len(ratios)} ops); ops are scored against the whole chip's peaks",
    )

"""What ``describe`` reports: per-matmul shardings, strategy labels, and the report itself."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from profan.sharding.mesh import CollectiveAxes, Mesh


@dataclass(slots=True)
class MatmulSharding:
    """One matmul: local and global shapes, which dims are split along which axes, evidence."""

    name: str  # the instruction in its computation (a fusion holding the dot, or the dot)
    dot: str  # the dot/convolution instruction itself
    computation: str | None
    opcode: str
    dtype: str
    local_lhs: list[int]
    local_rhs: list[int]
    local_out: list[int]
    global_lhs: list[int]
    global_rhs: list[int]
    global_out: list[int]
    lhs_split: dict[int, list[str]]
    rhs_split: dict[int, list[str]]
    out_split: dict[int, list[str]]
    contracting: tuple[list[int], list[int]]
    partial_sum_axes: list[str]
    evidence: list[str] = field(default_factory=list)
    batch: tuple[list[int], list[int]] = ([], [])
    op_name: str | None = None
    scope: str | None = None  # JAX named-scope path (profan.attribute.scope_of)
    backward: bool = False
    annotated: bool = False  # operand splits came from sharding= annotations
    feeds: list[dict[str, Any]] = field(default_factory=list)  # collectives fed by the result
    fed_by: list[dict[str, Any]] = field(default_factory=list)  # collectives feeding operands

    @property
    def local_flops(self) -> int:
        """2 · output elements · contracted elements, on one device."""
        return _dot_flops(self.local_lhs, self.local_lhs, self.local_out, self.contracting[0])

    @property
    def global_flops(self) -> int:
        """The same for the whole (unsplit) matmul."""
        return _dot_flops(self.local_lhs, self.global_lhs, self.global_out, self.contracting[0])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["contracting"] = [list(self.contracting[0]), list(self.contracting[1])]
        out["batch"] = [list(self.batch[0]), list(self.batch[1])]
        out["local_flops"] = self.local_flops
        out["global_flops"] = self.global_flops
        return out


def _dot_flops(local_lhs: list[int], lhs: list[int], out: list[int], contracting: list[int]) -> int:
    # ``contracting`` indexes the local lhs; a global lhs may lead with hidden dims.
    offset = len(lhs) - len(local_lhs)
    contracted = math.prod(lhs[offset + c] for c in contracting if offset + c < len(lhs))
    return 2 * math.prod(out) * contracted


@dataclass(slots=True)
class StrategyLabel:
    """A parallelism strategy the evidence supports, along which axes, and why."""

    strategy: str
    axes: list[str]
    evidence: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ShardingReport:
    """``describe(module)``: mesh, per-collective axes, per-matmul shapes, strategy labels."""

    module: str
    mesh: Mesh
    collectives: list[CollectiveAxes]
    matmuls: list[MatmulSharding]
    strategies: list[StrategyLabel]
    notes: list[str] = field(default_factory=list)
    # Instruction name -> global shape (``f32[64,128]``) of outputs whose sharding= splits them.
    global_shapes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "mesh": self.mesh.to_dict(),
            "collectives": [c.to_dict() for c in self.collectives],
            "matmuls": [m.to_dict() for m in self.matmuls],
            "strategies": [s.to_dict() for s in self.strategies],
            "notes": self.notes,
            "global_shapes": self.global_shapes,
        }

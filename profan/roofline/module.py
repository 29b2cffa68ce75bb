"""``score_module(module, chip)``: the compile-time roofline of a bare HLO module (no trace, no
measured times) — the same arithmetic as ``score``, over every op the module runs, one
``ModuleOpRecord`` per op."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from profan.chips import Chip
from profan.cost import CostModel
from profan.hlo.graph import scheduled_computations
from profan.hlo.model import Module
from profan.hlo.opcodes import BOOKKEEPING_OPCODES, CONTROL_FLOW_OPCODES
from profan.roofline.facts import axis_sizes, mesh_axes_by_name
from profan.roofline.score import resolve_chip
from profan.roofline.terms import async_start_times, op_times, row_ici_bytes

if TYPE_CHECKING:
    from profan.sharding import ShardingReport


@dataclass(frozen=True, slots=True)
class ModuleOpRecord:
    """One op of a module against the roofline, summed over its ``occurrences`` per execution
    of the module.  Its fields, in order, are the keys of ``profan hlo --json``'s roofline rows.
    Compile time only: no measured time, so no efficiency (``profan.roofline.ops.OpRecord`` is
    a profiled op's)."""

    module: str
    computation: str  # the computation the op sits in (the entry, a loop body, a branch, …)
    name: str
    opcode: str
    category: str  # profan.attribute's category
    occurrences: int  # runs per execution of the module (a lower bound where not exact)
    flops: float | None  # None: profan has no cost model for the op
    hbm_bytes: float  # what the roofline charges to HBM
    ici_bytes: float  # interconnect bytes (an async collective's on its done)
    intensity: float | None  # FLOPs per HBM byte of one run; None where either is 0 or unknown
    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    t_host_s: float
    t_transcendental_s: float
    roofline_s: float  # the ideal time: the largest term
    bound_by: str  # profan.roofline.terms.BOUNDS, "none" or "async-start"
    dtype: str | None  # element type of the math
    occurrences_exact: bool  # False: a loop's trip count is unknown, or the op is in a branch
    derivation: str  # how the figures were derived, "; "-joined
    bytes_by_space: dict[str, float]  # bytes per memory space: ``hbm`` first


def score_module(
    module: Module, chip: Chip | str, *, sharding: ShardingReport | None = None
) -> list[ModuleOpRecord]:
    """Compile-time roofline of every op a module runs (entry + while bodies, calls, branches;
    not fused bodies), sorted by ideal time, longest first (ties in program order).
    ``occurrences`` is how often the op runs per execution of the module
    (``profan.hlo.graph.scheduled_computations``: loops' known trip counts;
    ``occurrences_exact`` is False where a trip count is unknown or the op sits in a
    conditional's branch).  ``sharding``: ``profan.sharding.describe(module)``, whose mesh axes
    time the collectives (without it the axes their device groups span).
    """
    from profan.attribute import classify

    chip = resolve_chip(chip)
    model = CostModel(module)
    axes_by_name = mesh_axes_by_name(sharding)
    devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    records = []
    for scheduled in scheduled_computations(module):
        computation, count = scheduled.computation, scheduled.count
        for instruction in computation.instructions:
            if instruction.opcode in BOOKKEEPING_OPCODES or instruction.opcode in (
                CONTROL_FLOW_OPCODES
            ):
                continue
            cost = model.estimate(instruction)
            mesh_axes = axis_sizes(sharding, axes_by_name.get(instruction.name))
            times = op_times(cost, chip, mesh_axes=mesh_axes or None, slice_devices=devices)
            if cost.async_role == "start":
                times = async_start_times(times)
            flops = cost.flops
            hbm = cost.roofline_bytes
            records.append(
                ModuleOpRecord(
                    module=module.name,
                    computation=computation.name,
                    name=instruction.name,
                    opcode=instruction.opcode,
                    category=classify(instruction, module).category,
                    occurrences=count,
                    flops=None if flops is None else flops * count,
                    hbm_bytes=hbm * count,
                    ici_bytes=row_ici_bytes(cost) * count,
                    intensity=(flops / hbm) if flops and hbm else None,
                    t_compute_s=times.t_compute_s * count,
                    t_hbm_s=times.t_hbm_s * count,
                    t_ici_s=times.t_ici_s * count,
                    t_host_s=times.t_host_s * count,
                    t_transcendental_s=times.t_transcendental_s * count,
                    roofline_s=times.roofline_s * count,
                    bound_by=times.bound_by,
                    dtype=cost.dtype,
                    occurrences_exact=scheduled.count_is_exact,
                    derivation="; ".join(cost.derivation + times.notes),
                    bytes_by_space={
                        space: moved * count for space, moved in cost.bytes_by_space.items()
                    },
                )
            )
    # longest first; a stable sort keeps program order among equal times (a NaN time last)
    return sorted(records, key=lambda op: (math.isnan(op.roofline_s), -op.roofline_s))

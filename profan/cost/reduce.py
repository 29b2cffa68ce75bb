"""Reductions, windowed reductions, maps and sorts: applications of a scalar computation."""

from __future__ import annotations

import math

from profan.cost.context import CostContext, elements
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.views import called_computations, window


def select_and_scatter(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    select = instruction.attributes.get("select", "").lstrip("%") or None
    scatter = instruction.attributes.get("scatter", "").lstrip("%") or None
    source = elements(model.operand_shape(instruction, 1))
    taps = math.prod(d.size for d in window(instruction))
    s_flops, s_trans, _ = model.scalar_computation_flops(select)
    c_flops, c_trans, _ = model.scalar_computation_flops(scatter)
    cost.flops = s_flops * source * (taps - 1) + c_flops * source
    cost.transcendentals = s_trans * source * (taps - 1) + c_trans * source
    cost.derivation.append("select-and-scatter: select per window tap, scatter per source")
    return cost


def _reduce_window_applications(instruction: Instruction, first_out_elements: int) -> int:
    out_shape = instruction.shape
    dims = window(instruction)
    taps = math.prod(d.size for d in dims) if dims else 1
    count = (taps - 1) * first_out_elements
    reduced = [d for d in dims if d.size != 1]
    padded = [d for d in dims if d.pad_low or d.pad_high]
    if len(reduced) == 1 and len(padded) == 1 and out_shape.is_array:
        # XLA's special case: a reduce followed by a broadcast along one dim (cumsum-like)
        for index, dim in enumerate(dims):
            if (
                dim.size != 1
                and dim.pad_low
                and dim.pad_low == dim.pad_high
                and dim.size == 2 * dim.pad_low + 1
                and dim.pad_low == out_shape.dims[index] - 1
            ):
                span = out_shape.dims[index]
                return first_out_elements // span + (span - 1)
    return count


def reduction(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """``reduce``, ``reduce-window`` and ``map``: applications x the reducer's FLOPs."""
    opcode = instruction.opcode
    names = called_computations(instruction)
    per_flops, per_trans, known = model.scalar_computation_flops(names[0] if names else None)
    out_shape = instruction.shape
    first_out = out_shape.tuple_shapes[0] if out_shape.is_tuple else out_shape
    if opcode == "map":
        count = elements(out_shape)
    elif opcode == "reduce":
        count = elements(model.operand_shape(instruction, 0)) - elements(first_out)
    else:  # reduce-window
        count = _reduce_window_applications(instruction, elements(first_out))
    cost.flops = per_flops * count
    cost.transcendentals = per_trans * count
    cost.derivation.append(
        f"{opcode}: {count} applications of the reducer x {per_flops:g} FLOP(s)"
        + ("" if known else " (reducer body unknown: 1 FLOP assumed)")
    )
    return cost


def sort(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    count = elements(model.operand_shape(instruction, 0))
    cost.flops = float(count * math.ceil(math.log2(count))) if count > 1 else 0.0
    cost.derivation.append("sort: n log2 n comparisons")
    return cost

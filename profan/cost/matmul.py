"""Dots and convolutions: ``2 x output elements x contracting size`` and the valid-tap count."""

from __future__ import annotations

from profan.cost.context import CostContext, elements, first_array
from profan.cost.flops import convolution_flops, dot_flops
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.views import convolution_dimensions, int_list_attribute, window


def mark_matrix_math(instruction: Instruction, cost: OpCost) -> None:
    """A dot or convolution: the matrix units run it, at the peak its operand precisions
    (``operand_precision={highest,highest}``) or its ``algorithm=`` select."""
    cost.matrix_math = True
    cost.precision = tuple(
        word.strip().upper()
        for word in instruction.attributes.get("operand_precision", "").strip("{}").split(",")
        if word.strip()
    )
    algorithm = instruction.attributes.get("algorithm")
    cost.algorithm = algorithm.strip() if algorithm else None


def dot(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    lhs = model.operand_shape(instruction, 0)
    if lhs is None:
        cost.flops = None
        cost.derivation.append("dot: operand shapes unknown (pass the module)")
        return cost
    lhs_array = first_array(lhs)
    cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
    mark_matrix_math(instruction, cost)
    contracting = int_list_attribute(instruction, "lhs_contracting_dims")
    cost.flops = float(dot_flops(lhs, instruction.shape, contracting))
    cost.derivation.append(
        f"dot: 2 x {elements(instruction.shape)} output elements x contracting "
        f"{[lhs.dims[d] for d in contracting]}"
    )
    return cost


def convolution(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    lhs = model.operand_shape(instruction, 0)
    rhs = model.operand_shape(instruction, 1)
    dims = convolution_dimensions(instruction)
    if lhs is None or rhs is None or dims is None:
        cost.flops = None
        cost.derivation.append("convolution: operand shapes or dim_labels unknown")
        return cost
    lhs_array = first_array(lhs)
    cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
    mark_matrix_math(instruction, cost)
    cost.flops = float(
        convolution_flops(
            lhs,
            rhs,
            instruction.shape,
            window=window(instruction),
            dims=dims,
            feature_group_count=int(instruction.attributes.get("feature_group_count", "1")),
            batch_group_count=int(instruction.attributes.get("batch_group_count", "1")),
        )
    )
    cost.derivation.append("convolution: 2 x features x batch x valid kernel positions")
    return cost

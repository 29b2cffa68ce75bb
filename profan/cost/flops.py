"""FLOP arithmetic for dots and convolutions (their attributes are decoded by ``profan.hlo.views``).

Conventions follow XLA's ``HloCostAnalysis`` (``xla/service/hlo_cost_analysis.cc``): a fused
multiply-add is 2 FLOPs; a dot costs ``2 x output elements x contracting size``; a convolution
counts only kernel positions that land on real (not padded, not dilation-hole) input elements.
"""

from __future__ import annotations

from collections.abc import Sequence

from profan.hlo.model import Shape
from profan.hlo.views import ConvolutionDimensions, WindowDimension

FMA_FLOPS = 2


def dot_flops(lhs: Shape, output: Shape, lhs_contracting_dims: list[int]) -> int:
    """``2 x (output elements) x (product of the contracting dims)``.

    The output elements are batch x lhs-free x rhs-free, so this is the einsum formula of
    MODEL.md section 2.
    """
    reduction = 1
    for dim in lhs_contracting_dims:
        reduction *= lhs.dims[dim]
    out = output
    if out.is_tuple:  # e.g. a cuBLAS custom call returns (result, workspace)
        out = out.tuple_shapes[0]
    return FMA_FLOPS * out.num_elements * reduction


def _valid_positions(
    input_size: int, kernel_size: int, output_size: int, dim: WindowDimension
) -> int:
    """How many (kernel tap, output position) pairs read a real input element on one axis."""
    # Two shortcuts XLA takes for patterns whose full loop is quadratic (same answer).
    if (
        input_size == output_size == kernel_size == dim.lhs_dilate
        and dim.rhs_dilate == 1
        and max(1, input_size - 1) == dim.stride
        and dim.pad_low == 0
        and dim.pad_high == 0
    ):
        return input_size
    if (
        input_size == 1
        and kernel_size == output_size
        and dim.rhs_dilate == 1
        and dim.lhs_dilate == 1
        and dim.stride == 1
        and dim.pad_high == output_size - 1
        and dim.pad_low == output_size - 1
    ):
        return output_size
    count = 0
    for tap in range(kernel_size):
        if dim.stride == 1 and dim.lhs_dilate == 1:
            base = dim.pad_low - tap * dim.rhs_dilate
            count += max(min(input_size + base, output_size) - max(base, 0), 0)
            continue
        for out_index in range(output_size):
            undilated = out_index * dim.stride - dim.pad_low + tap * dim.rhs_dilate
            if undilated % dim.lhs_dilate:
                continue
            position = undilated // dim.lhs_dilate
            if 0 <= position < input_size:
                count += 1
    return count


def convolution_flops(
    lhs: Shape,
    rhs: Shape,
    output: Shape,
    *,
    window: Sequence[WindowDimension],
    dims: ConvolutionDimensions,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
) -> int:
    """``2 x (input features / groups) x output features x (batch / batch groups) x valid taps``."""
    if output.is_tuple:  # cuDNN custom calls return (result, scratch)
        output = output.tuple_shapes[0]
    input_feature = lhs.dims[dims.input_feature]
    output_feature = output.dims[dims.output_feature]
    batch = lhs.dims[dims.input_batch]
    positions = 1
    if not window:
        window = [WindowDimension()]
        limits = [(1, 1, 1)]
    else:
        limits = [
            (lhs.dims[i], rhs.dims[k], output.dims[o])
            for i, k, o in zip(
                dims.input_spatial, dims.kernel_spatial, dims.output_spatial, strict=True
            )
        ]
    for (input_size, kernel_size, output_size), dim in zip(limits, window, strict=True):
        positions *= _valid_positions(input_size, kernel_size, output_size, dim)
    fma = (
        (input_feature // feature_group_count)
        * output_feature
        * (batch // batch_group_count)
        * positions
    )
    return FMA_FLOPS * fma


def einsum_flops(
    lhs: Shape,
    rhs: Shape,
    lhs_batch: list[int],
    lhs_contracting: list[int],
    rhs_batch: list[int],
    rhs_contracting: list[int],
) -> int:
    """MODEL.md's formula spelled out from the operands (used to cross-check ``dot_flops``)."""

    def product(shape: Shape, dims: list[int]) -> int:
        value = 1
        for dim in dims:
            value *= shape.dims[dim]
        return value

    batch = product(lhs, lhs_batch)
    contracting = product(lhs, lhs_contracting)
    lhs_free = product(lhs, [d for d in range(lhs.rank) if d not in lhs_batch + lhs_contracting])
    rhs_free = product(rhs, [d for d in range(rhs.rank) if d not in rhs_batch + rhs_contracting])
    return 2 * batch * lhs_free * rhs_free * contracting

"""Library gemms and convolutions (cuBLAS, cuBLASLt, hipBLASLt, TransformerEngine, cuDNN)."""

from __future__ import annotations

import math

from profan.cost.flops import FMA_FLOPS, convolution_flops
from profan.cost.kernels.model import (
    KernelCall,
    KernelCost,
    Params,
    config_section,
    ints,
    new_cost,
    result_arrays,
)
from profan.hlo.model import Shape
from profan.hlo.views import decode_dim_labels, decode_window


def matmul_signature(lhs: Shape | None, rhs: Shape | None, out: Shape | None) -> int | None:
    """FLOPs of ``[..., M, K] x [..., K, N] -> [..., M, N]`` when the shapes admit that reading
    and no elementwise one (``K > 1``), else ``None``."""
    if lhs is None or rhs is None or out is None or not (lhs.rank == rhs.rank == out.rank >= 2):
        return None
    *batch, m, k = lhs.dims
    *rhs_batch, k2, n = rhs.dims
    if k != k2 or k <= 1 or list(rhs_batch) != batch or out.dims != (*batch, m, n):
        return None
    return FMA_FLOPS * math.prod(out.dims) * k


def gemm(call: KernelCall, params: Params) -> KernelCost:
    """cuBLAS / cuBLASLt / hipBLASLt: ``2 x output elements x contracting size`` from the
    backend config's dot dimension numbers (else from ``[M,K] x [K,N]`` shapes)."""
    cost = new_cost(call, params, "gemm", "hlo")
    config = config_section(call, params)
    precision = config.get("precision_config") or {}
    cost.precision = tuple(str(p) for p in precision.get("operand_precision", []))
    algorithm = precision.get("algorithm")
    cost.algorithm = algorithm if algorithm and algorithm != "ALG_UNSET" else None
    lhs = call.operands[0] if call.operands else None
    results = result_arrays(call, params)
    out = results[0] if results else None
    dnums = config.get("dot_dimension_numbers")
    if lhs is not None and out is not None and isinstance(dnums, dict):
        contracting = ints(dnums.get("lhs_contracting_dimensions"))
        size = math.prod(lhs.dims[d] for d in contracting)
        cost.flops, cost.transcendentals = float(FMA_FLOPS * out.num_elements * size), 0.0
        cost.flops_source = "backend-config"
        cost.derivation.append(
            f"2 x {out.num_elements} output elements x contracting {size} (dot dimension numbers)"
        )
        return cost
    fixed = params.get("lhs_contracting")
    if lhs is not None and out is not None and isinstance(fixed, int) and lhs.rank:
        size = lhs.dims[fixed]
        cost.flops, cost.transcendentals = float(FMA_FLOPS * out.num_elements * size), 0.0
        cost.flops_source = "hlo"
        cost.derivation.append(f"2 x {out.num_elements} output elements x contracting {size}")
        return cost
    flops = matmul_signature(lhs, call.operands[1] if len(call.operands) > 1 else None, out)
    if flops is not None:
        cost.flops, cost.transcendentals, cost.flops_source = float(flops), 0.0, "shape-signature"
        cost.derivation.append("no dimension numbers: the shapes read as [M,K] x [K,N]")
    return cost


def te_gemm(call: KernelCall, params: Params) -> KernelCost:
    """TransformerEngine's gemm FFI: lhs is operand 0, rhs operand ``rhs_operand``; the
    contracting dims of lhs are those after ``lhs_axis_boundary`` (before it when
    ``lhs_transposed``)."""
    cost = new_cost(call, params, "te-gemm", "hlo")
    lhs = call.operands[0] if call.operands else None
    results = result_arrays(call, params)
    boundary = call.config.get("lhs_axis_boundary")
    if lhs is None or not results or boundary is None:
        return cost
    boundary = int(boundary)
    dims = lhs.dims[:boundary] if call.config.get("lhs_transposed") else lhs.dims[boundary:]
    size = math.prod(dims)
    cost.flops = float(FMA_FLOPS * results[0].num_elements * size)
    cost.transcendentals, cost.flops_source = 0.0, "backend-config"
    cost.derivation.append(f"2 x {results[0].num_elements} output elements x contracting {size}")
    return cost


def grouped_gemm(call: KernelCall, params: Params) -> KernelCost:
    """A grouped (ragged) gemm ``[M, K] x [G, K, N] -> [M, N]``: whatever the group sizes, every
    row of lhs meets one group's ``[K, N]``, so ``2 x M x N x K``."""
    cost = new_cost(call, params, "grouped-gemm", "hlo")
    arrays = [shape for shape in call.operands if shape is not None and shape.rank >= 2]
    results = result_arrays(call, params)
    if len(arrays) < 2 or not results:
        return cost
    lhs, out = arrays[0], results[0]
    k = lhs.dims[-1]
    if out.rank == 2 and lhs.rank == 2 and out.dims[0] == lhs.dims[0] and k in arrays[1].dims:
        cost.flops = float(FMA_FLOPS * out.num_elements * k)
        cost.transcendentals, cost.flops_source = 0.0, "shape-signature"
        cost.derivation.append(f"2 x {out.num_elements} output elements x K={k}")
    return cost


def convolution(call: KernelCall, params: Params) -> KernelCost:
    """cuDNN / MIOpen convolutions: the call's ``window`` and ``dim_labels`` describe it as a
    convolution of operand 0 by operand 1 (backward passes included), counted as XLA does."""
    cost = new_cost(call, params, "convolution", "hlo")
    dims = decode_dim_labels(call.attributes.get("dim_labels"))
    results = result_arrays(call, params)
    if len(call.operands) < 2 or None in call.operands[:2] or dims is None or not results:
        return cost
    lhs, rhs = call.operands[0], call.operands[1]
    assert lhs is not None and rhs is not None
    cost.flops = float(
        convolution_flops(
            lhs, rhs, results[0],
            window=decode_window(call.attributes.get("window")),
            dims=dims,
            feature_group_count=int(call.attributes.get("feature_group_count", "1")),
            batch_group_count=int(call.attributes.get("batch_group_count", "1")),
        )
    )  # fmt: skip
    cost.transcendentals, cost.flops_source = 0.0, "hlo"
    config = config_section(call, params)
    math_type = (config.get("algorithm") or {}).get("math_type")
    if math_type == "DEFAULT_MATH" and cost.dtype == "f32":
        cost.precision = ("HIGHEST",)  # cuDNN without tensor-op math: true f32
    cost.derivation.append("2 x features x batch x valid kernel positions (window, dim_labels)")
    return cost

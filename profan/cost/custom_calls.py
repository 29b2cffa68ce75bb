"""Custom calls: library kernels (cuBLAS/hipBLASLt gemms, cuDNN convolutions and fused
attention), annotations that do no work, and kernels profan cannot cost (flagged, not guessed).
"""

from __future__ import annotations

import math
import re

from profan.cost.context import CostContext, first_array
from profan.cost.flops import FMA_FLOPS, dot_flops
from profan.cost.matmul import convolution
from profan.cost.model import OpCost
from profan.hlo.model import Instruction, Shape
from profan.hlo.views import backend_config

MATMUL_CUSTOM_CALL = re.compile(r"cublas|gemm|matmul|hipblaslt|rocblas", re.IGNORECASE)
# Custom calls that only annotate the program (sharding, placement, markers): no work of their own.
ANNOTATION_CUSTOM_CALL = re.compile(
    r"^(Sharding|SPMDFullToShardShape|SPMDShardToFullShape|annotate_device_placement|"
    r"xla\.sdy\..*|MoveToDevice|MoveToHost|Pin|Unpin|AllocateBuffer|ShardBarrierFrom|"
    r"ShardBarrierTo|LayoutConstraint|__xla_internal_call_marker_.*|InspectSharding)$"
)
CONV_CUSTOM_CALL = re.compile(r"cudnn\$conv|miopen.*conv|\$conv", re.IGNORECASE)


def _plain_matmul_flops(lhs: Shape | None, rhs: Shape | None, out: Shape) -> int | None:
    """FLOPs of ``[M,K] x [K,N] -> [M,N]`` when the shapes admit only that reading."""
    result = first_array(out)
    if lhs is None or rhs is None or result is None:
        return None
    if not (lhs.rank == rhs.rank == result.rank == 2):
        return None
    (m, k), (k2, n) = lhs.dims, rhs.dims
    if k != k2 or result.dims != (m, n):
        return None
    return 2 * m * n * k


def _fmha_forward_flops(config: dict, query: Shape, out: Shape) -> tuple[float, float] | None:
    """FLOPs and transcendentals of a cuDNN fused-attention forward call: ``S = Q K^T`` then
    ``O = softmax(S) V``; the score matrix's shape is in the config (``intermediate_tensor_shape``).
    """
    bmm1 = config.get("bmm1_dot_dimension_numbers")
    scores = config.get("intermediate_tensor_shape")
    result = first_array(out)
    if not isinstance(bmm1, dict) or not isinstance(scores, dict) or result is None:
        return None
    try:
        score_dims = [int(d) for d in scores.get("dimensions", [])]
        contracting = [int(d) for d in bmm1.get("lhs_contracting_dimensions", [])]
    except (TypeError, ValueError):
        return None
    if not score_dims or not contracting:
        return None
    head_dim = math.prod(query.dims[d] for d in contracting)
    score_elements = math.prod(score_dims)
    first = FMA_FLOPS * score_elements * head_dim  # Q K^T
    second = FMA_FLOPS * result.num_elements * score_dims[-1]  # softmax(S) V
    return float(first + second), float(score_elements)  # one exp per score


def custom_call(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    target = instruction.attributes.get("custom_call_target", "").strip('"')
    config = backend_config(instruction) or {}
    lhs = model.operand_shape(instruction, 0)
    if MATMUL_CUSTOM_CALL.search(target):
        gemm = config.get("gemm_backend_config", config)
        dnums = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
        if lhs is not None and isinstance(dnums, dict):
            contracting = [int(d) for d in dnums.get("lhs_contracting_dimensions", [])]
            cost.flops = float(dot_flops(lhs, instruction.shape, contracting))
            cost.transcendentals = 0.0
            lhs_array = first_array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(f"custom-call {target}: a matmul per its dot dimension numbers")
            return cost
        plain = _plain_matmul_flops(lhs, model.operand_shape(instruction, 1), instruction.shape)
        if plain is not None:
            cost.flops, cost.transcendentals = float(plain), 0.0
            lhs_array = first_array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(
                f"custom-call {target}: no dimension numbers; the shapes say [M,K] x [K,N]"
            )
            return cost
    fmha = config.get("cudnn_fmha_backend_config")
    if isinstance(fmha, dict) and "backward" not in target.lower() and lhs is not None:
        flops = _fmha_forward_flops(fmha, lhs, instruction.shape)
        if flops is not None:
            cost.flops, cost.transcendentals = flops
            lhs_array = first_array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(
                f"custom-call {target}: fused attention, softmax(Q K^T) V per its two bmm "
                "dimension numbers (masked positions counted)"
            )
            return cost
    if ANNOTATION_CUSTOM_CALL.match(target):
        cost.flops, cost.transcendentals = 0.0, 0.0
        cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
        cost.derivation.append(f"custom-call {target}: an annotation, no work of its own")
        return cost
    if CONV_CUSTOM_CALL.search(target) and "dim_labels" in instruction.attributes:
        costed = convolution(instruction, model, cost)
        if costed.flops is not None:
            costed.transcendentals = 0.0
            costed.derivation[-1] = f"custom-call {target}: " + costed.derivation[-1]
            return costed
    cost.flops = cost.transcendentals = None
    cost.unknown = True
    cost.derivation.append(
        f"custom-call {target or '?'}: unknown kernel, FLOPs not guessed; "
        "bytes = operands + outputs"
    )
    return cost

"""Kernels without a library behind them: Pallas (TPU Mosaic and GPU Triton), Mosaic GPU, Triton,
unknown kernels, elementwise-like kernels and annotations."""

from __future__ import annotations

from typing import Any

from profan.cost.kernels.attention import ATTENTION_WORDS, attention_shapes
from profan.cost.kernels.gemm import matmul_signature
from profan.cost.kernels.model import (
    KernelCall,
    KernelCost,
    Params,
    arrays,
    new_cost,
    result_arrays,
)


def _cost_estimate(config: dict[str, Any]) -> dict[str, Any] | None:
    inner = config.get("custom_call_config")
    estimate = (inner if isinstance(inner, dict) else config).get("cost_estimate")
    return estimate if isinstance(estimate, dict) else None


def pallas(call: KernelCall, params: Params) -> KernelCost:
    """A Pallas / Mosaic / Triton kernel: its ``cost_estimate`` when the backend config carries
    one (Pallas TPU); else attention by its Q/K/V shapes when its name says attention; else a
    matmul by its ``[M,K] x [K,N]`` shapes; else FLOPs unknown.  Bytes are never below the
    operands plus results (a kernel reads its inputs and writes its outputs at least once)."""
    estimate = _cost_estimate(call.config)
    named_attention = any(word in call.name.lower() for word in ATTENTION_WORDS)
    if named_attention:
        cost = attention_shapes(call, params)
    else:
        cost = new_cost(call, params, "pallas", "lower-bound")
        lhs, rhs = ([*call.operands, None, None])[:2]
        results = result_arrays(call, params)
        flops = matmul_signature(lhs, rhs, results[0] if len(results) == 1 else None)
        if flops is not None and len(call.operands) == 2:
            cost.flops, cost.transcendentals, cost.flops_source = (
                float(flops),
                0.0,
                "shape-signature",
            )
            cost.derivation.append("shapes read as a matmul [M,K] x [K,N] -> [M,N]")
    cost.model, cost.bytes_source = "pallas", "lower-bound"
    lower = cost.bytes_read + cost.bytes_written
    if estimate is None:
        if cost.flops is None:
            cost.derivation.append("no cost estimate in the backend config: FLOPs unknown")
        cost.derivation.append(f"bytes: operands + results ({lower:.0f} B), a lower bound")
        return cost
    shapes_flops = cost.flops
    cost.flops = float(estimate.get("flops", 0))
    cost.transcendentals = float(estimate.get("transcendentals", 0))
    cost.flops_source = "cost-estimate"
    cost.derivation.append(f"the kernel's cost estimate: {cost.flops:.0f} FLOPs")
    if shapes_flops and not 0.5 <= cost.flops / shapes_flops <= 2.0:
        cost.derivation.append(f"its shapes say {shapes_flops:.0f} FLOPs: more than 2x apart")
    stated = float(estimate.get("bytes_accessed", 0))
    if stated >= lower:
        share = cost.bytes_read / lower if lower else 0.0
        cost.bytes_read, cost.bytes_written = stated * share, stated * (1 - share)
        cost.bytes_source = "cost-estimate"
        cost.derivation.append(f"the kernel's cost estimate: {stated:.0f} bytes accessed")
    else:
        cost.derivation.append(
            f"the cost estimate's {stated:.0f} bytes are below operands + results "
            f"({lower:.0f} B): the lower bound is used"
        )
    return cost


def opaque(call: KernelCall, params: Params) -> KernelCost:
    """A kernel profan has no model for: FLOPs unknown (never guessed), bytes a lower bound."""
    cost = new_cost(call, params, "opaque", "lower-bound")
    kind = params.get("collective")
    if kind:
        cost.flops, cost.transcendentals, cost.flops_source = 0.0, 0.0, "hlo"
        cost.derivation.append(f"a {kind} collective: no math; its transfer is not modelled")
    else:
        cost.derivation.append("FLOPs unknown (add a model: --kernels FILE)")
    cost.derivation.append("bytes: operands + results, a lower bound")
    return cost


def per_element(call: KernelCall, params: Params) -> KernelCost:
    """Elementwise-like kernels (norms, softmax, activations, quantisation): ``flops`` and
    ``transcendentals`` per element of the largest operand or result (params)."""
    cost = new_cost(call, params, "per-element", "hlo")
    arrays = [leaf for s in [*call.operands, call.result] for leaf in arrays(s)]
    elements = max((leaf.num_elements for leaf in arrays), default=0)
    cost.flops = float(params.get("flops", 1)) * elements
    cost.transcendentals = float(params.get("transcendentals", 0)) * elements
    cost.flops_source = "shape-signature"
    cost.derivation.append(
        f"{params.get('flops', 1)} FLOPs, {params.get('transcendentals', 0)} transcendentals "
        f"per element of the largest array ({elements})"
    )
    return cost


def no_work(call: KernelCall, params: Params) -> KernelCost:
    """Annotations (sharding, placement, markers): no math, no data moved.  ``async_role``
    (start | done): the marker makes the op that holds it one half of an asynchronous pair."""
    cost = KernelCost(0.0, 0.0, 0.0, 0.0, "hlo", "hlo", model="no-work")
    role = params.get("async_role")
    cost.async_role = str(role) if role in ("start", "done") else None
    cost.derivation.append(
        "an annotation: no work of its own"
        + (f" (marks the {role} of an asynchronous pair)" if cost.async_role else "")
    )
    return cost

"""Fused attention: cuDNN fMHA, TransformerEngine, and kernels known only by their Q/K/V shapes.

FLOPs count the two matmuls of every (query, key) pair the mask lets through:
``2 x batch x heads x pairs x (qk_head_dim + v_head_dim)`` forward; the backward recomputes the
scores and does four more matmuls, ``2 x batch x heads x pairs x (3 x qk_head_dim + 2 x
v_head_dim)`` (2.5x the forward when the head dims are equal); one exponential per pair each way.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from profan.cost.flops import FMA_FLOPS
from profan.cost.kernels.model import KernelCall, KernelCost, Params, config_section, ints, new_cost
from profan.hlo.model import Shape


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """The sizes an attention kernel's FLOPs depend on."""

    batch: int
    heads: int  # query heads (GQA: the key/value heads do not change the FLOPs)
    q_len: int
    kv_len: int
    qk_dim: int
    v_dim: int
    kv_heads: int = 0


def attended_pairs(
    q_len: int,
    kv_len: int,
    causal: str | None = None,
    window_left: int = -1,
    window_right: int = -1,
) -> int:
    """How many (query i, key j) pairs a mask lets through.

    ``causal``: ``None`` (every pair), ``"top-left"`` (``j <= i``) or ``"bottom-right"``
    (``j <= i + kv_len - q_len``); a window keeps ``t - left <= j <= t + right`` around the
    diagonal ``t`` (-1: unbounded on that side).
    """
    offset = kv_len - q_len if causal == "bottom-right" else 0
    right = 0 if causal else window_right
    if causal is None and window_left < 0 and window_right < 0:
        return q_len * kv_len
    total = 0
    for i in range(q_len):
        diagonal = i + offset
        low = 0 if window_left < 0 else max(0, diagonal - window_left)
        high = kv_len - 1 if right < 0 else min(kv_len - 1, diagonal + right)
        total += max(0, high - low + 1)
    return total


def attention_flops(
    shape: AttentionShape, pairs_per_head: int, direction: str = "forward"
) -> tuple[float, float]:
    """FLOPs and exponentials of fused attention over ``pairs_per_head`` (query, key) pairs.

    forward: ``S = Q K^T`` (qk_dim) and ``O = P V`` (v_dim); backward: recompute ``S``, then
    ``dV = P^T dO``, ``dP = dO V^T`` (v_dim each), ``dQ = dS K``, ``dK = dS^T Q`` (qk_dim each);
    ``dq``/``dkv``: the halves split kernels do (Pallas splash).
    """
    per_pair = {
        "forward": shape.qk_dim + shape.v_dim,
        "backward": 3 * shape.qk_dim + 2 * shape.v_dim,
        "dq": 2 * shape.qk_dim + shape.v_dim,
        "dkv": 2 * shape.qk_dim + 2 * shape.v_dim,
    }[direction]
    pairs = shape.batch * shape.heads * pairs_per_head
    return float(FMA_FLOPS * pairs * per_pair), float(pairs)


def _attention_cost(
    cost: KernelCost,
    shape: AttentionShape,
    direction: str,
    causal: str | None,
    window: tuple[int, int] = (-1, -1),
    source: str = "backend-config",
) -> KernelCost:
    pairs = attended_pairs(shape.q_len, shape.kv_len, causal, *window)
    cost.flops, cost.transcendentals = attention_flops(shape, pairs, direction)
    cost.flops_source = source
    mask = f"{causal} causal" if causal else "no causal mask"
    if window != (-1, -1):
        mask += f", window {window}"
    cost.derivation.append(
        f"attention {direction}: batch {shape.batch} x heads {shape.heads} x {pairs} of "
        f"{shape.q_len}x{shape.kv_len} (q, k) pairs ({mask}), head dims qk {shape.qk_dim} "
        f"v {shape.v_dim}" + (f", {shape.kv_heads} kv heads" if shape.kv_heads else "")
    )
    return cost


# cuDNN fMHA mask types (XLA's CudnnfMHABackendConfig.MaskType) -> causal alignment.
_CUDNN_MASKS = {"NO_MASK": None, "PADDING": None, "CAUSAL": "top-left",
                "PADDING_CAUSAL": "top-left", "ALIBI": None}  # fmt: skip
# TransformerEngine's NVTE_Mask_Type -> causal alignment (padding masks count every pair).
_TE_MASKS = {0: None, 1: None, 2: "top-left", 3: "top-left", 4: "bottom-right", 5: "bottom-right"}


def cudnn_fmha(call: KernelCall, params: Params) -> KernelCost:
    """XLA's cuDNN fused attention (``__cudnn$fmha*``): the score shape ``[B, H, Sq, Skv]`` is in
    the config; head dims follow from the element counts of Q, K and V (operands 0-2)."""
    cost = new_cost(call, params, "cudnn-fmha", "hlo")
    config = config_section(call, params)
    scores = ints((config.get("intermediate_tensor_shape") or {}).get("dimensions"))
    q, k, v = ([*call.operands, None, None, None])[:3]
    if len(scores) != 4 or q is None or k is None or v is None:
        return cost
    batch, heads, q_len, kv_len = scores
    qk_dim = q.num_elements // (batch * heads * q_len)
    kv_heads = k.num_elements // (batch * kv_len * qk_dim)
    v_dim = v.num_elements // (batch * kv_heads * kv_len)
    mask = str(config.get("mask_type", "NO_MASK"))
    causal = _CUDNN_MASKS.get(mask)
    if config.get("is_causal_mask") and causal is None:
        causal = "top-left"
    window = int(config.get("sliding_window_length") or 0)
    shape = AttentionShape(batch, heads, q_len, kv_len, qk_dim, v_dim, kv_heads)
    direction = str(params.get("direction", "forward"))
    return _attention_cost(cost, shape, direction, causal, (window - 1 if window else -1, -1))


def te_attention(call: KernelCall, params: Params) -> KernelCost:
    """TransformerEngine fused attention (``te_fused_attn_*_ffi``): sizes and mask from the MLIR
    attribute dictionary (``input_batch``, ``attn_heads``, ``num_gqa_groups``,
    ``q_max_seqlen``, ``kv_max_seqlen``, ``qk_head_dim``, ``v_head_dim``, ``mask_type``,
    ``window_size_left``/``right``)."""
    cost = new_cost(call, params, "te-attention", "hlo")
    config = call.config
    try:
        shape = AttentionShape(
            batch=int(config["input_batch"]),
            heads=int(config["attn_heads"]),
            q_len=int(config["q_max_seqlen"]),
            kv_len=int(config["kv_max_seqlen"]),
            qk_dim=int(config.get("qk_head_dim", config.get("head_dim", 0))),
            v_dim=int(config.get("v_head_dim", config.get("head_dim", 0))),
            kv_heads=int(config.get("num_gqa_groups", 0)),
        )
    except (KeyError, TypeError, ValueError):
        cost.derivation.append("backend config lacks the attention sizes")
        return cost
    causal = _TE_MASKS.get(int(config.get("mask_type", 0)))
    window = (int(config.get("window_size_left", -1)), int(config.get("window_size_right", -1)))
    direction = str(params.get("direction", "forward"))
    cost = _attention_cost(cost, shape, direction, causal, window)
    if int(config.get("mask_type", 0)) in (1, 3, 5):
        cost.derivation.append("padding mask: padded positions counted (their lengths are data)")
    return cost


def _attention_operands(operands: list[Shape | None]) -> tuple[Shape, Shape, Shape] | None:
    """The first (q, k, v) run of operands: equal rank >= 2, k and v alike but for the head dim,
    q and k share the head dim, q's leading dims a multiple of k's (GQA)."""
    floats = [
        s for s in operands if s is not None and s.is_array and s.dtype[0] in "fb" and s.rank >= 2
    ]
    for q, k, v in zip(floats, floats[1:], floats[2:], strict=False):
        if not (q.rank == k.rank == v.rank) or k.dims[:-1] != v.dims[:-1]:
            continue
        if q.dims[-1] != k.dims[-1]:
            continue
        q_lead, k_lead = math.prod(q.dims[:-2]), math.prod(k.dims[:-2])
        if k_lead and q_lead % k_lead == 0:
            return q, k, v
    return None


ATTENTION_WORDS = ("attention", "attn", "flash", "splash", "mha", "mqa", "gqa", "sdpa")


# Pallas splash attention names each kernel ``splash_{mha,mqa}_{fwd,dq,dkv}...`` (and lists
# every phase's block sizes after it: ``..._fwd_..._block_kv_dkv_512``, so its phase word wins).
_SPLASH_PHASE = re.compile(r"splash_m[hq]a_(fwd|dq|dkv)")
_PHASES = {"fwd": "forward", "dq": "dq", "dkv": "dkv"}


def _direction_from_name(name: str) -> str:
    lowered = name.lower()
    splash = _SPLASH_PHASE.search(lowered)
    if splash:
        return _PHASES[splash.group(1)]
    if "dkv" in lowered:
        return "dkv"
    if "_dq" in lowered or lowered.endswith("dq"):
        return "dq"
    if "bwd" in lowered or "backward" in lowered:
        return "backward"
    return "forward"


def attention_shapes(call: KernelCall, params: Params) -> KernelCost:
    """Attention recognised by its Q/K/V operand shapes (``[..., S, D]``; Pallas splash/flash).

    The mask is data the shapes do not show: ``params.causal`` or a kernel name that says
    ``causal`` decides; unknown, the causal count is used as a lower bound (a full mask does
    twice the work)."""
    cost = new_cost(call, params, "attention-shapes", "hlo")
    found = _attention_operands(call.operands)
    if found is None:
        cost.derivation.append("no Q/K/V operands found")
        return cost
    q, k, v = found
    batch_heads = math.prod(q.dims[:-2])
    shape = AttentionShape(1, batch_heads, q.dims[-2], k.dims[-2], q.dims[-1], v.dims[-1],
                           math.prod(k.dims[:-2]))  # fmt: skip
    direction = str(params.get("direction") or _direction_from_name(call.name))
    return attention_cost(cost, shape, direction, params.get("causal"), call.name)


def attention_cost(
    cost: KernelCost,
    shape: AttentionShape,
    direction: str,
    causal: object = None,
    name: str = "",
) -> KernelCost:
    """Attention FLOPs with the mask the call tells: ``causal`` true/false (a kernel parameter),
    a name that says ``causal``; else unknown, and the causal count is a lower bound (a full
    mask does about twice the work)."""
    if isinstance(causal, bool):
        alignment: str | None = "top-left" if causal else None
        return _attention_cost(cost, shape, direction, alignment, source="shape-signature")
    if "causal" in name.lower():
        return _attention_cost(cost, shape, direction, "top-left", source="shape-signature")
    cost = _attention_cost(cost, shape, direction, "top-left", source="lower-bound")
    cost.derivation.append("mask unknown: causal pairs counted, a lower bound (full = about 2x)")
    return cost

"""Attention kernels that stream blocks through on-chip memory (Pallas TPU splash/flash attention):
their HBM traffic is the blocks every grid step fetches, not their operands read once.

JAX's splash attention (``jax/experimental/pallas/ops/tpu/splash_attention``) runs three kernels,
each a grid of blocks whose index maps decide what a step fetches (a block is fetched again when
its index changes from one step to the next):

* ``fwd`` and ``dq``: grid (heads, q blocks, kv blocks).  Q (and dO, logsumexp, di) are fetched
  once; K and V once per q block; the arrays without a head dimension (segment ids, positions)
  once per head, and those streamed along kv (laid out ``[8, kv_len]``) once per head and q block.
* ``dkv``: grid (kv blocks, heads, q blocks).  K and V are fetched once; Q, dO, logsumexp and di
  once per kv block; the head-less arrays streamed along q (``[8, q_len]``) once per kv block and
  head; those indexed by the kv block only (``[kv_len, 128]``) once.

Outputs are written once.  Block sizes come from the kernel's name, which XLA gives the custom
call (``splash_mha_fwd_..._block_q_512_block_kv_512...``; Pallas writes them into the backend
config's ``xprof_metadata`` too); without them a block spans the sequence (operands read once, a
lower bound).  FLOPs are attention's matmuls (``attention.attention_flops``) for the kernel's
phase: the backward kernels recompute the scores, ``dkv`` does four matmuls per (q, k) pair,
``dq`` three.

The block mask is an operand (``data_next``/``block_mask``, one entry per (q block, kv block)):
the kernel neither fetches nor computes a block its mask masks out, but the values are data the
HLO does not show.  Both figures are therefore those of a full mask, an upper bound (on the golden
v5p profile the compiler, which folds the mask, counts 12 of the 16 blocks of the forward kernel:
0.75x); a kernel named ``causal`` or ``params.causal = true`` in a kernel file counts the blocks a
causal mask keeps instead, for the bytes and the FLOPs alike (without block sizes: the causal
pairs, a lower bound).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from profan.cost.bytes import xla_shape_size
from profan.cost.kernels import model as kernel
from profan.cost.kernels.attention import AttentionShape, attended_pairs, attention_flops
from profan.cost.kernels.model import KernelCall, KernelCost, Params
from profan.hlo.model import Shape

_BLOCK = re.compile(r"block_(q|kv)(?:_(dkv|dq))?(_compute)?_(\d+)")
LANES = 128  # TPU vector lanes: head-less per-position arrays are broadcast to [S, 128]
SUBLANES = 8  # ... or to [8, S]


def block_sizes(call: KernelCall) -> dict[str, int]:
    """``block_q``, ``block_kv``, ``block_q_dkv``, ... from the kernel's name and the backend
    config's ``xprof_metadata`` (a JSON object of the block sizes)."""
    found: dict[str, int] = {}
    for side, phase, compute, size in _BLOCK.findall(call.name):
        key = f"block_{side}" + (f"_{phase}" if phase else "") + compute
        found.setdefault(key, int(size))
    metadata = _metadata(call.config)
    for key, value in metadata.items():
        if key.startswith("block_") and isinstance(value, int | str) and str(value).isdigit():
            found.setdefault(key, int(value))
    return found


def _metadata(config: dict[str, Any]) -> dict[str, Any]:
    text = config.get("metadata") or (config.get("custom_call_config") or {}).get("metadata")
    if isinstance(text, dict):
        text = text.get("xprof_metadata", text)
    if isinstance(text, str):
        try:
            decoded = json.loads(text)
        except ValueError:
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return text if isinstance(text, dict) else {}


def _qkv(operands: list[Shape | None]) -> tuple[int, int, int] | None:
    """Positions of Q, K, V: the first three float arrays ``[H, S, D]`` (K, V alike but for the
    head dim, Q sharing K's head dim; MQA: K and V ``[S, D]``)."""
    floats = [
        i
        for i, s in enumerate(operands)
        if s is not None and s.is_array and s.dtype[0] in "fb" and s.rank >= 2
    ]
    for a, b, c in zip(floats, floats[1:], floats[2:], strict=False):
        q, k, v = operands[a], operands[b], operands[c]
        assert q is not None and k is not None and v is not None
        if q.rank == 3 and k.dims[:-1] == v.dims[:-1] and q.dims[-1] == k.dims[-1]:
            return a, b, c
    return None


def _fetches(shape: Shape, role: str, heads: int, q_len: int, kv_len: int,
             q_blocks: float, kv_blocks: float, phase: str) -> float:  # fmt: skip
    """How many times the kernel reads ``shape`` whole (see the module docstring); ``q_blocks``
    (``kv_blocks``) is how many q (kv) blocks one kv (q) block meets on average."""
    with_heads = shape.rank >= 3 and shape.dims[0] == heads and heads > 1
    if role == "kv":
        return q_blocks if phase != "dkv" else 1
    if role == "q" or with_heads:
        return kv_blocks if phase == "dkv" else 1
    dims = shape.dims
    on_lanes = len(dims) >= 2 and dims[-2] <= SUBLANES and dims[-1] in (q_len, kv_len)
    on_sublanes = len(dims) >= 2 and dims[-1] == LANES and dims[-2] in (q_len, kv_len)
    if phase == "dkv":
        if on_lanes:  # q-side, streamed along the inner q axis
            return kv_blocks * heads
        return 1  # indexed by the (outermost) kv block only
    if on_lanes:  # kv-side, streamed along the inner kv axis
        return heads * q_blocks
    if on_sublanes:  # q-side, once per (head, q block)
        return heads
    return 1


def blocked_attention(call: KernelCall, params: Params) -> KernelCost:
    """FLOPs and block-by-block HBM traffic of a Pallas splash/flash attention kernel."""
    phase = str(params.get("phase", "fwd"))
    cost = kernel.new_cost(call, params, "blocked-attention", "lower-bound")
    found = _qkv(call.operands)
    if found is None:
        cost.derivation.append("no Q/K/V operands found: bytes are operands + results")
        return cost
    q, k, v = (call.operands[i] for i in found)
    assert q is not None and k is not None and v is not None
    heads, q_len, kv_len = q.dims[0], q.dims[-2], k.dims[-2]
    sizes = block_sizes(call)
    suffix = "" if phase == "fwd" else f"_{phase}"
    block_q = sizes.get(f"block_q{suffix}", sizes.get("block_q", q_len))
    block_kv = sizes.get(f"block_kv{suffix}", sizes.get("block_kv", kv_len))
    q_blocks, kv_blocks = math.ceil(q_len / block_q), math.ceil(kv_len / block_kv)
    causal = params.get("causal") is True or (
        "causal" in call.name.lower() and params.get("causal") is not False
    )
    kept = _causal_blocks(q_blocks, kv_blocks, block_q, block_kv) if causal else (
        q_blocks * kv_blocks)  # fmt: skip
    read = 0.0
    for index, shape in enumerate(call.operands):
        for leaf in kernel.arrays(shape):
            role = "q" if index == found[0] else "kv" if index in found[1:] else ""
            times = _fetches(leaf, role, heads, q_len, kv_len, kept / kv_blocks,
                             kept / q_blocks, phase)  # fmt: skip
            read += times * xla_shape_size(leaf)
    written = float(sum(xla_shape_size(leaf) for leaf in kernel.result_arrays(call, params)))
    cost.bytes_read, cost.bytes_written = read, written
    cost.dtype = q.dtype
    attention = AttentionShape(1, heads, q_len, kv_len, q.dims[-1], v.dims[-1],
                               k.dims[0] if k.rank == 3 else 1)  # fmt: skip
    direction = phase if phase != "fwd" else "forward"
    if not causal:
        pairs, cost.flops_source, mask = q_len * kv_len, "upper-bound", "a full block mask"
    elif sizes:
        pairs, cost.flops_source = kept * block_q * block_kv, "shape-signature"
        mask = f"the {kept} blocks a causal mask keeps"
    else:  # causal, block size unknown: the causal pairs themselves, a lower bound
        pairs, cost.flops_source = attended_pairs(q_len, kv_len, "top-left"), "lower-bound"
        mask = "a causal mask (pairs; blocks unknown)"
    cost.flops, cost.transcendentals = attention_flops(attention, pairs, direction)
    if not sizes:
        cost.bytes_source = "lower-bound"  # one block spans the sequence: operands read once
    else:
        cost.bytes_source = "shape-signature" if causal else "upper-bound"
    cost.derivation.append(
        f"splash {phase}: {heads} heads x {q_blocks} q blocks of {block_q} x {kv_blocks} kv "
        f"blocks of {block_kv}, {mask} (the mask is an operand: its values are data)"
    )
    cost.derivation.append(
        f"reads {read:.0f} B block by block "
        + ("(K and V once per q block)" if phase != "dkv" else "(Q and dO once per kv block)")
        + f", writes {written:.0f} B; {cost.flops:.4g} FLOPs ({direction})"
    )
    return cost


def _causal_blocks(q_blocks: int, kv_blocks: int, block_q: int, block_kv: int) -> int:
    """Blocks (i, j) a causal mask does not mask out whole: key block j starts at or before the
    last query of block i."""
    return sum(
        1
        for i in range(q_blocks)
        for j in range(kv_blocks)
        if j * block_kv <= (i + 1) * block_q - 1
    )

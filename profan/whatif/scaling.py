"""Step-time arithmetic of whole training runs (MODEL.md section 7), the projection's own
functions for what a profile cannot measure: FLOPs per token, a run's length at an MFU, where
data parallelism or FSDP turns communication-bound, and the best FSDP degree."""

from __future__ import annotations

import math

TRAINING_FLOPS_PER_PARAMETER = 6  # forward 2, backward 4 FLOPs per parameter and token


def training_flops_per_token(parameters: float) -> float:
    return TRAINING_FLOPS_PER_PARAMETER * parameters


def seconds_per_token(flops_per_token: float, peak_flops_per_s: float, mfu: float = 1.0) -> float:
    return flops_per_token / (peak_flops_per_s * mfu)


def run_seconds(
    tokens: float, flops_per_token: float, chips: int, peak_flops_per_s: float, mfu: float
) -> float:
    """A whole run: its FLOPs over the chips' FLOP/s at ``mfu``."""
    return tokens * flops_per_token / (chips * peak_flops_per_s * mfu)


def comm_bound_tokens_per_chip(
    peak_flops_per_s: float, ici_bytes_per_s: float, axes: int = 1
) -> float:
    """Per-chip batch (tokens) below which data parallelism / FSDP is communication-bound: the
    chip's FLOP/s over the bandwidth of the ``axes`` that carry the gradient traffic."""
    return peak_flops_per_s / (ici_bytes_per_s * axes)


def is_comm_bound(
    batch_tokens: float, chips: int, peak_flops_per_s: float, ici_bytes_per_s: float, axes: int = 1
) -> bool:
    return batch_tokens / chips < comm_bound_tokens_per_chip(
        peak_flops_per_s, ici_bytes_per_s, axes
    )


def best_fsdp_degree(batch_tokens: float, chips: int, mlp_width: float) -> float:
    """The FSDP degree minimising communication under FSDP x tensor parallelism:
    ``sqrt(2 B N / F)`` (the rest of the chips go to tensor parallelism)."""
    return math.sqrt(2 * batch_tokens * chips / mlp_width)

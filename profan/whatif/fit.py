"""How the carry-over model's parameters (profan/data/whatif.toml) are fitted: from recordings
of one program on two chips, ops paired by key with equal FLOPs and bytes, least squares of
log(projected / measured) per execution weighted by measured time, on a grid."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from profan.whatif.arithmetic import project_execution
from profan.whatif.carry import Sustained
from profan.whatif.project import _terms

if TYPE_CHECKING:
    from profan.report.model import Report

FIXED_GRID = tuple(i * 0.5e-6 for i in range(13))
COMPUTE_GRID = tuple(round(0.98 + 0.005 * i, 3) for i in range(12))
HBM_GRID = tuple(round(0.85 + 0.01 * i, 2) for i in range(21))


@dataclass(frozen=True, slots=True)
class Pair:
    """One op on both chips, per execution: measured there and its terms on both."""

    weight_s: float
    measured_s: float
    target_measured_s: float
    source: object  # Terms on the source chip
    target: object  # Terms on the target chip (the source's HLO scored on it)


def pairs(source: Report, on_target: Report, measured_target: Report) -> list[Pair]:
    scored = {e.key: e for e in on_target.ops}
    there = {e.key: e for e in measured_target.ops}
    out = []
    for entry in source.ops:
        other, terms = there.get(entry.key), scored.get(entry.key)
        if other is None or terms is None or entry.occurrences < 1 or other.occurrences < 1:
            continue
        same = all(
            abs((getattr(entry, k) or 0.0) - (getattr(other, k) or 0.0))
            <= 0.01 * max(getattr(entry, k) or 0.0, 1.0)
            for k in ("flops", "hbm_bytes")
        )
        if not same or entry.measured_s <= 0 or other.measured_s <= 0:
            continue
        n = entry.occurrences
        out.append(
            Pair(
                entry.measured_s,
                entry.measured_s / n,
                other.measured_s / other.occurrences,
                _terms(entry, n),
                _terms(terms, n),
            )
        )
    return out


def loss(data: list[Pair], fixed_s: float, source: Sustained, target: Sustained) -> float:
    """Time-weighted mean of log(projected / measured)^2."""
    total = weight = 0.0
    for pair in data:
        projected = project_execution(
            pair.measured_s, pair.source, pair.target, source, target, fixed_s
        )
        if projected > 0:
            total += pair.weight_s * math.log(projected / pair.target_measured_s) ** 2
            weight += pair.weight_s
    return total / weight if weight else 0.0


def fit_carry_over(data: list[Pair]) -> tuple[float, float, float, float]:
    """(fixed_s, compute, hbm, rms): the target's sustained fractions relative to the source."""
    best = min(
        (loss(data, fixed, Sustained(), Sustained(compute, hbm)), fixed, compute, hbm)
        for fixed, compute, hbm in itertools.product(FIXED_GRID, COMPUTE_GRID, HBM_GRID)
    )
    return best[1], best[2], best[3], math.sqrt(best[0])

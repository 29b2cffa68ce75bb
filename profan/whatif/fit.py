"""How the carry-over model's parameters (profan/data/whatif.toml) are fitted: from recordings
of one program on two chips, ops paired by key with equal FLOPs and bytes that ran the same
kernels (the same launch configuration) on both; the time-weighted mean of
|log(projected / measured)| per execution, minimised on a grid."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from profan.whatif.arithmetic import Terms, project_execution
from profan.whatif.carry import Sustained
from profan.whatif.project import _terms, kernels_per_execution

if TYPE_CHECKING:
    from profan.report.model import OpEntry, Report

FIXED_GRID = tuple(round(i * 0.5e-6, 9) for i in range(9))  # 0 - 4 us per kernel launch
KNEE_GRID = tuple(round(0.5 + 0.05 * i, 2) for i in range(11))  # 0.5 - 1.0
COMPUTE_GRID = tuple(round(0.98 + 0.005 * i, 3) for i in range(15))  # 0.98 - 1.05
HBM_GRID = tuple(round(0.88 + 0.01 * i, 2) for i in range(18))  # 0.88 - 1.05


@dataclass(frozen=True, slots=True)
class Pair:
    """One op on both chips, per execution: measured there and its terms on both."""

    weight_s: float
    measured_s: float
    target_measured_s: float
    source: Terms  # on the source chip
    target: Terms  # on the target chip (the source's HLO scored on it)
    kernels: float  # kernel launches per execution


@dataclass(frozen=True, slots=True)
class Fit:
    fixed_s: float
    knee: float
    compute: float
    hbm: float
    mean_abs_log: float  # the minimised loss
    rms_log: float  # rms of log(projected / measured), time-weighted, at the fit


def launches(entry: OpEntry) -> list[tuple[Any, ...]]:
    """The op's kernels as launched: grid, block and shared memory (a name where the trace has
    no launch figures: memsets, copies).  Two chips ran the same kernel where these agree."""
    out: list[tuple[Any, ...]] = []
    for kernel in entry.kernels or []:
        launch = kernel.get("launch") or {}
        if not launch:
            out.append((str(kernel.get("name")),))
            continue
        out.append(
            (
                tuple(launch.get("grid") or ()),
                tuple(launch.get("block") or ()),
                launch.get("dynamic_shared"),
                launch.get("static_shared"),
            )
        )
    return out


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
        if launches(entry) != launches(other):  # the target's compiler chose another kernel
            continue
        n = entry.occurrences
        out.append(
            Pair(
                entry.measured_s,
                entry.measured_s / n,
                other.measured_s / other.occurrences,
                _terms(entry, n),
                _terms(terms, n),
                kernels_per_execution(entry),
            )
        )
    return out


def errors(
    data: list[Pair], fixed_s: float, knee: float, source: Sustained, target: Sustained
) -> list[tuple[float, float]]:
    """(weight, log(projected / measured)) of every pair."""
    out = []
    for pair in data:
        projected = project_execution(
            pair.measured_s, pair.source, pair.target, source, target, fixed_s, pair.kernels, knee
        )
        if projected > 0:
            out.append((pair.weight_s, math.log(projected / pair.target_measured_s)))
    return out


def loss(
    data: list[Pair], fixed_s: float, knee: float, source: Sustained, target: Sustained
) -> tuple[float, float]:
    """(time-weighted mean |log(projected / measured)|, its rms)."""
    found = errors(data, fixed_s, knee, source, target)
    weight = sum(w for w, _ in found)
    if not weight:
        return 0.0, 0.0
    mean_abs = sum(w * abs(e) for w, e in found) / weight
    return mean_abs, math.sqrt(sum(w * e * e for w, e in found) / weight)


def _columns(data: list[Pair]) -> dict[str, np.ndarray]:
    def column(get) -> np.ndarray:
        return np.array([get(p) for p in data], dtype=float)

    return {
        "w": column(lambda p: p.weight_s),
        "t": column(lambda p: p.measured_s),
        "m": column(lambda p: p.target_measured_s),
        "k": column(lambda p: max(p.kernels, 1.0)),
        "r": column(lambda p: p.source.roofline_s(Sustained())),
        "tc": column(lambda p: max(p.target.compute_s, p.target.transcendental_s)),
        "th": column(lambda p: p.target.hbm_s),
        "ti": column(lambda p: p.target.ici_s),
    }


def fit_carry_over(data: list[Pair]) -> Fit:
    """The grid point (fixed, knee, target's compute and hbm fractions relative to the source's)
    of least time-weighted mean |log(projected / measured)|: the same arithmetic as
    ``project_execution``, over the grid at once (numpy)."""
    cols = _columns(data)
    keep = (cols["r"] > 0) & (cols["t"] > 0)
    c = {name: col[keep][:, None, None] for name, col in cols.items()}
    compute = np.array(COMPUTE_GRID)[None, :, None]
    hbm = np.array(HBM_GRID)[None, None, :]
    target = np.maximum(np.maximum(c["tc"] / compute, c["th"] / hbm), c["ti"])
    ratio = target / c["r"]
    weight = c["w"].sum()
    best: tuple[float, float, float, int, int] | None = None
    for fixed, knee in itertools.product(FIXED_GRID, KNEE_GRID):
        fx = np.minimum(fixed * c["k"], 0.5 * c["t"])
        share = np.minimum(c["r"] / c["t"] / knee, 1.0)
        projected = fx + (c["t"] - fx) * (1.0 - share + share * ratio)
        score = (c["w"] * np.abs(np.log(projected / c["m"]))).sum(axis=0) / weight
        at = np.unravel_index(int(np.argmin(score)), score.shape)
        if best is None or score[at] < best[0]:
            best = (float(score[at]), fixed, knee, int(at[0]), int(at[1]))
    assert best is not None
    _, fixed, knee, i, j = best
    fractions = Sustained(COMPUTE_GRID[i], HBM_GRID[j])
    mean_abs, rms = loss(data, fixed, knee, Sustained(), fractions)
    return Fit(fixed, knee, fractions.compute, fractions.hbm, mean_abs, rms)

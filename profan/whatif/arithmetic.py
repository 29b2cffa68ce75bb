"""The projection's arithmetic, as pure functions of numbers (docs/whatif.md).

An op execution takes ``t = fixed + rest``: a fixed cost per kernel launch (ramp-up and tail)
and the rest, of which a share ``s`` runs at the roofline ``R`` (on the chip's sustained figures)
and scales with it, while ``1 - s`` is latency (dependent loads, occupancy, synchronisation) that
another chip of the same generation does not shorten.  ``s`` is the op's own measured efficiency
against its roofline over a fitted knee: an op far below its roofline gains little.  So
``t' = fixed + (t - fixed) * (1 - s + s * R'/R)``.  The step adds the device's idle time under one
of two stated rules (``project_step``).
"""

from __future__ import annotations

from dataclasses import dataclass

from profan.whatif.carry import Sustained

BOUNDS = ("compute", "hbm", "ici", "transcendental")


@dataclass(frozen=True, slots=True)
class Terms:
    """Roofline terms of one execution on one chip (seconds, catalogue peaks)."""

    compute_s: float = 0.0
    hbm_s: float = 0.0
    ici_s: float = 0.0
    transcendental_s: float = 0.0

    def sustained(self, fractions: Sustained) -> dict[str, float]:
        """Each term on the chip's sustained figures (a fraction of 0 keeps the term: unknown)."""

        def over(term: float, fraction: float) -> float:
            return term / fraction if fraction > 0 else term

        return {
            "compute": over(self.compute_s, fractions.compute),
            "hbm": over(self.hbm_s, fractions.hbm),
            "ici": over(self.ici_s, fractions.ici),
            "transcendental": over(self.transcendental_s, fractions.compute),
        }

    def roofline_s(self, fractions: Sustained) -> float:
        return max(self.sustained(fractions).values())

    def bound(self, fractions: Sustained) -> str:
        terms = self.sustained(fractions)
        return max(BOUNDS, key=lambda name: terms[name]) if any(terms.values()) else "unknown"


def fixed_part(measured_s: float, fixed_s: float, kernels: float = 1.0) -> float:
    """The fixed cost taken out of one execution: ``fixed_s`` per kernel it launched, at most
    half of the execution (the rest scales)."""
    return min(fixed_s * max(kernels, 1.0), 0.5 * measured_s)


def scaling_share(efficiency: float, knee: float) -> float:
    """The share of an execution's time that scales with its roofline: its efficiency against
    the roofline (sustained figures) over ``knee``, at most 1; every op scales fully without a
    knee (``knee`` 0)."""
    if knee <= 0:
        return 1.0
    return min(max(efficiency, 0.0) / knee, 1.0)


def project_execution(
    measured_s: float,
    source: Terms,
    target: Terms,
    source_fractions: Sustained,
    target_fractions: Sustained,
    fixed_s: float,
    kernels: float = 1.0,
    knee: float = 0.0,
) -> float:
    """One execution's time on the target: ``fixed + (t - fixed) * (1 - s + s * R'/R)``, with
    ``fixed`` per kernel launch and ``s = scaling_share(R / t, knee)``.  An op with no roofline on
    the source (its cost unknown) keeps its measured time."""
    roofline = source.roofline_s(source_fractions)
    if roofline <= 0 or measured_s <= 0:
        return measured_s
    fixed = fixed_part(measured_s, fixed_s, kernels)
    share = scaling_share(roofline / measured_s, knee)
    ratio = target.roofline_s(target_fractions) / roofline
    return fixed + (measured_s - fixed) * (1.0 - share + share * ratio)


def scaled_execution(
    measured_s: float, ratio: float, fixed_s: float, kernels: float = 1.0
) -> float:
    """``fixed + (t - fixed) * ratio``: an execution whose whole roofline-bound rest changes by
    ``ratio`` (the collectives of another mesh: ``profan.whatif.mesh``)."""
    fixed = fixed_part(measured_s, fixed_s, kernels)
    return fixed + (measured_s - fixed) * ratio


@dataclass(frozen=True, slots=True)
class StepProjection:
    step_s: float
    busy_s: float
    idle_s: float
    rule: str


def project_step(
    step_s: float, busy_s: float, projected_busy_s: float, *, host_paced: bool
) -> StepProjection:
    """The step on the target from the source's step time and per-device busy (op) time.

    * device-paced (the host queues work ahead: CUDA graphs, TPU, CPU): the idle gaps are the
      device's own (dependencies, graph and program boundaries) and scale with its pace:
      ``step' = step * busy'/busy``;
    * host-paced (a GPU whose host launches every kernel; a CPU, whose devices are the host's
      threads): the host's pace, which the
      source step shows, does not change with the chip; the device cannot take less than its
      busy time: ``step' = max(step, busy')``.
    """
    if busy_s <= 0:
        return StepProjection(step_s, busy_s, max(step_s - busy_s, 0.0), "no op time: unchanged")
    if host_paced:
        projected = max(step_s, projected_busy_s)
        rule = (
            "host-paced (the host issues each op: a GPU without CUDA graphs, a CPU): "
            "step' = max(step, busy')"
        )
    else:
        projected = step_s * projected_busy_s / busy_s
        rule = "device-paced: idle scales with the device, step' = step x busy'/busy"
    return StepProjection(projected, projected_busy_s, max(projected - projected_busy_s, 0.0), rule)

"""The projection's arithmetic, as pure functions of numbers (docs/whatif.md).

An op execution takes ``t = fixed + R / e``: a fixed cost (launch ramp and tail) and its
roofline ``R`` on the chip's sustained figures over the op's own efficiency ``e``, which carries
over.  So ``t' = fixed + (t - fixed) * R'/R``.  The step adds the device's idle time under one of
two stated rules (``project_step``).
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


def fixed_part(measured_s: float, fixed_s: float) -> float:
    """The fixed cost taken out of one execution: at most half of it (the rest scales)."""
    return min(fixed_s, 0.5 * measured_s)


def project_execution(
    measured_s: float,
    source: Terms,
    target: Terms,
    source_fractions: Sustained,
    target_fractions: Sustained,
    fixed_s: float,
) -> float:
    """One execution's time on the target: ``fixed + (t - fixed) * R'/R``.  An op with no
    roofline on the source (its cost unknown) keeps its measured time."""
    roofline = source.roofline_s(source_fractions)
    if roofline <= 0 or measured_s <= 0:
        return measured_s
    fixed = fixed_part(measured_s, fixed_s)
    return fixed + (measured_s - fixed) * target.roofline_s(target_fractions) / roofline


def scaled_execution(measured_s: float, ratio: float, fixed_s: float) -> float:
    """``fixed + (t - fixed) * ratio``: an execution whose roofline changes by ``ratio``."""
    fixed = fixed_part(measured_s, fixed_s)
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

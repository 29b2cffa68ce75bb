"""Numbers as people read them: times and SI quantities with units (report tables, notes)."""

from __future__ import annotations

import math


def seconds(value: float | None) -> str:
    """``0.000123`` -> ``123 µs``; ``-`` for none or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    magnitude = abs(value)
    if magnitude == 0:
        return "0 s"
    if magnitude >= 1:
        return f"{value:.3g} s"
    if magnitude >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    if magnitude >= 1e-6:
        return f"{value * 1e6:.3g} µs"
    return f"{value * 1e9:.3g} ns"


def si(value: float | None, unit: str = "") -> str:
    """``5308416000`` -> ``5.31G`` (with ``unit`` appended); ``-`` for none or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if value == 0:
        return f"0{unit}"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}{unit}"
    return f"{value:.3g}{unit}"

"""Numbers as people read them: the one formatter of times, SI quantities and shares that every
output uses (terminal, Markdown, HTML, plots, memory, chips, diff, annotate, check; the HTML
page's ``util.js`` follows the same rules).

The rules: three significant figures; the unit chosen after rounding (``999.96 µs`` is
``1 ms``, never ``1e+03 µs``); never an exponent; a space between a number and its unit
(``141 GB``, ``300 GFLOP/s``, ``12 ms``); a share never reads ``0%`` unless it is zero.
"""

from __future__ import annotations

import math
from decimal import Decimal

# Time units from the second down to the picosecond; below that a time reads "<1 ps".
TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps"))
# SI prefixes for sizes, counts and rates (bytes are decimal: 1 GB = 1e9 B, as chips quote).
SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _unknown(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _digits(value: float) -> str:
    """Three significant figures with no exponent (the value is in [1, 1000) or small)."""
    if abs(value) >= 1000:
        return f"{value:.0f}"  # only the largest unit holds these: "3456 s"
    text = f"{value:.3g}"
    # below 1e-4 %g writes an exponent; the same digits as a plain decimal
    return format(Decimal(text), "f") if "e" in text else text


def seconds(value: float | None) -> str:
    """``0.000123`` -> ``123 µs``; ``-`` for none or not finite; ``<1 ps`` below a picosecond."""
    if _unknown(value):
        return "-"
    assert value is not None
    if value == 0:
        return "0 s"
    rounded = float(f"{value:.3g}")  # the unit follows the figure as printed
    for factor, unit in TIME_UNITS:
        if abs(rounded) >= factor:
            # ≥ 1000 s: every whole second (the figure rounded to 3 digits would claim 4)
            scaled = value if abs(rounded) >= 1000 else rounded / factor
            return f"{_digits(scaled)} {unit}"
    return "<1 ps" if value > 0 else ">-1 ps"


def si(value: float | None, unit: str = "") -> str:
    """``5308416000, "B"`` -> ``5.31 GB``, a bare count ``5.31 G`` (a column or word beside it
    names the unit: ``FLOPs``); ``-`` for none or not finite."""
    if _unknown(value):
        return "-"
    assert value is not None
    rounded = float(f"{value:.3g}")
    for factor, prefix in SI_PREFIXES:
        if abs(rounded) >= factor:
            # ≥ 1000 of the largest prefix: every whole one (3 rounded digits would claim 4)
            scaled = value / factor if abs(rounded) >= 1000 * factor else rounded / factor
            return f"{_digits(scaled)} {prefix}{unit}"
    return f"{_digits(rounded)} {unit}" if unit else _digits(rounded)


def percent(value: float | None, places: int = 1) -> str:
    """A share as a percentage: ``0.724`` -> ``72.4%``; ``-`` for none or not finite.

    ``places=0`` is the compact form for table cells and bar labels: whole percents from 10%,
    one place below (``0.3%``).  Either way a share that is not zero never reads ``0%``: below
    0.1% it is ``<0.1%`` (``>-0.1%`` for a negative one)."""
    if _unknown(value):
        return "-"
    assert value is not None
    if 0 < abs(value) < 0.0005:
        return "<0.1%" if value > 0 else ">-0.1%"
    if places == 0 and abs(value) < 0.0995:
        places = 1
    return f"{value:.{places}%}"

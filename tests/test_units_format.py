"""One formatter for times, SI quantities and shares (profan.units), and the HTML page's copy of
it (assets/util.js): printed text parsed back agrees with the value within the precision it
prints; no exponent, one spacing rule, never ``0%`` for a share that is not zero.  Then the
outputs themselves: no unit spelled without its space, no ``e-06 ns``, no ``0%`` efficiency."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profan.units import percent, seconds, si

UTIL_JS = Path(__file__).resolve().parent.parent / "profan/report/render/html/assets/util.js"
TIME_FACTORS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}
PREFIX_FACTORS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
NUMBER = r"(-?\d+(?:\.\d+)?)"


def _digits_tolerance(number_text: str) -> float:
    """Half a unit in the last place the text prints, allowing for three significant figures
    (a figure printed as ``12`` may stand for 12.0 rounded to three digits)."""
    mantissa = number_text.lstrip("-")
    places = len(mantissa.split(".")[1]) if "." in mantissa else 0
    significant = len(mantissa.replace(".", "").lstrip("0"))
    if significant < 3 and "." not in mantissa:  # "12": its third digit was a zero dropped
        places = max(places, 3 - significant) if abs(float(mantissa)) < 100 else places
    return 0.5 * 10.0 ** (-places) + 1e-12


def _check_time(text: str, value: float) -> None:
    assert "e" not in text.split(" ")[0], text  # never an exponent
    if text == "<1 ps":
        assert 0 < value < 1e-12, (text, value)
        return
    if text == ">-1 ps":
        assert -1e-12 < value < 0, (text, value)
        return
    match = re.fullmatch(NUMBER + r" (s|ms|µs|ns|ps)", text)
    assert match, text
    number, unit = match.groups()
    parsed = float(number) * TIME_FACTORS[unit]
    assert abs(parsed - value) <= _digits_tolerance(number) * TIME_FACTORS[unit], (text, value)
    if value != 0 and unit != "s":  # the unit is the largest that keeps the figure >= 1
        assert 1 <= abs(float(number)) < 1000, text


def _check_si(text: str, value: float, unit: str) -> None:
    match = re.fullmatch(NUMBER + r"(?: ([kMGTPE]?)" + re.escape(unit) + ")?", text)
    assert match, (text, value)
    number, prefix = match.groups()
    prefix = prefix or ""
    assert (prefix or unit) or " " not in text  # a space exactly where a unit follows
    assert "e" not in number
    factor = PREFIX_FACTORS[prefix]
    parsed = float(number) * factor
    assert abs(parsed - value) <= _digits_tolerance(number) * factor, (text, value)
    if prefix and prefix != "E":
        assert 1 <= abs(float(number)) < 1000, text


def _check_percent(text: str, value: float) -> None:
    if value != 0:
        assert text not in ("0%", "0.0%", "-0%", "-0.0%"), (text, value)
    if text == "<0.1%":
        assert 0 < value < 0.001, (text, value)
        return
    if text == ">-0.1%":
        assert -0.001 < value < 0, (text, value)
        return
    match = re.fullmatch(NUMBER + "%", text)
    assert match, text
    (number,) = match.groups()
    places = len(number.split(".")[1]) if "." in number else 0
    assert abs(float(number) / 100 - value) <= 0.5 * 10.0 ** (-places) / 100 + 1e-12, (text, value)
    if abs(value) < 0.0995:  # below 10% a share keeps a decimal place
        assert places >= 1, (text, value)


def _magnitudes(low: int, high: int) -> st.SearchStrategy[float]:
    """Values spread over decades (log-uniform), either sign, and zero."""
    exponent = st.floats(low, high, allow_nan=False)
    mantissa = st.floats(1.0, 10.0, allow_nan=False, exclude_max=True)
    sign = st.sampled_from([1.0, 1.0, -1.0])
    return st.one_of(
        st.just(0.0),
        st.builds(lambda s, m, e: s * m * 10.0**e, sign, mantissa, exponent),
    )


@settings(max_examples=400, deadline=None)
@given(_magnitudes(-17, 5))
def test_seconds_parse_back(value: float) -> None:
    _check_time(seconds(value), value)


@settings(max_examples=400, deadline=None)
@given(_magnitudes(-6, 21), st.sampled_from(["B", "B/s", "FLOP/s", ""]))
def test_si_parse_back(value: float, unit: str) -> None:
    _check_si(si(value, unit), value, unit)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_magnitudes(-9, 0), st.floats(-2, 2, allow_nan=False)), st.sampled_from([0, 1]))
def test_percent_parse_back(value: float, places: int) -> None:
    _check_percent(percent(value, places), value)


def test_the_defects_the_issue_names() -> None:
    assert seconds(8.71e-15) == "<1 ps"  # was "8.71e-06 ns"
    assert seconds(999.96e-6) == "1 ms"  # was "1e+03 µs"
    assert si(141e9, "B") == "141 GB"  # was "141GB" in the report, "141 GB" in chips
    assert si(1.78e6) == "1.78 M"  # FLOPs cells: was "1.78M" in the report, "1.78 M" in chips
    assert percent(0.003, 0) == "0.3%"  # the efficiency column read "0%"
    assert percent(0.0001, 0) == "<0.1%"
    assert seconds(None) == si(float("nan")) == percent(math.inf) == "-"


def _js(values: list[float]) -> list[list[str]]:
    """``fmtSeconds``, ``fmtSI`` (B, bare) and ``fmtPercent`` (1, 0 places) of each value, as the
    page's util.js prints them (under node)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        "const fs = require('fs');"
        f"eval(fs.readFileSync({json.dumps(str(UTIL_JS))}, 'utf8') +"
        "';globalThis.F = {fmtSeconds, fmtSI, fmtPercent};');"
        "const values = JSON.parse(fs.readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(values.map((v) => [F.fmtSeconds(v), F.fmtSI(v, 'B'),"
        " F.fmtSI(v), F.fmtPercent(v), F.fmtPercent(v, 0)])));"
    )
    done = subprocess.run(
        [node, "-e", script], input=json.dumps(values), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_page_formats_numbers_by_the_same_rules() -> None:
    import random

    rng = random.Random(28)
    values = [0.0, 8.71e-15, 999.96e-6, 141e9, 0.003, 0.0001, 0.0996, 3456.7, -2e-3]
    values += [rng.choice([1, -1]) * 10 ** rng.uniform(-16, 13) for _ in range(600)]
    for value, (time, size, count, share, compact) in zip(values, _js(values), strict=True):
        _check_time(time, value)
        _check_si(size, value, "B")
        _check_si(count, value, "")
        if abs(value) < 10:
            _check_percent(share, value)
            _check_percent(compact, value)
    # ordinary figures read the same on the page as in the terminal
    ordinary = [0.0, 0.000123, 0.0114, 5308416000.0, 141e9, 0.724, 0.003, 0.0001]
    for value, row in zip(ordinary, _js(ordinary), strict=True):
        assert row == [seconds(value), si(value, "B"), si(value), percent(value), percent(value, 0)]


# A byte size or rate printed without the space (``141GB``, ``4.8TB/s``), or in binary units.
UNSPACED = re.compile(
    r"\d[kMGTPE]?B(?:/s)?\b|\d[kMGTPE]?FLOP/s|\d[kMGTPE]/s|\b\d+(?:\.\d+)? ?[KMG]iB\b"
)
EXPONENT_TIME = re.compile(r"\d[eE][-+]?\d+ ?(?:s|ms|µs|us|ns|ps)\b")


def _profan(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "profan", *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.parametrize("fmt", ["term", "md"])
def test_report_spells_units_one_way(fixtures_dir: Path, fmt: str) -> None:
    text = _profan("report", str(fixtures_dir / "transformer"), "--format", fmt)
    assert not UNSPACED.findall(text)
    assert not EXPONENT_TIME.findall(text)
    assert "300 GFLOP/s" in text  # the chip line (was "300GFLOP/s")


def test_chips_and_memory_spell_units_as_the_report(fixtures_dir: Path) -> None:
    chips = _profan("chips", "h200")
    memory = _profan("memory", str(fixtures_dir / "transformer"))
    for text in (chips, memory):
        assert not UNSPACED.findall(text)
    assert "141 GB" in chips and "4.18 T/s" in chips  # was "4.18e+12/s"


def test_efficiency_cells_never_read_zero(fixtures_dir: Path) -> None:
    """The terminal table's eff cell of every op with a non-zero efficiency parses back to it
    (transformer's all-reduce.1 is at 0.3%: the cell read "0%")."""
    from profan.report.analysis.build import build_report
    from profan.report.analysis.pipeline import analyse
    from profan.report.render import terminal

    report = build_report(analyse(fixtures_dir / "transformer"))
    efficiency = {op.label: op.efficiency for op in report.ops}
    text = terminal.render(report, top=40, width=400)
    header = next(line for line in text.splitlines() if line.startswith("op "))
    eff_end = header.index(" eff ") + len(" eff")  # the column is right-aligned under its header
    checked = 0
    for line in text.splitlines():
        label = line.split(" ")[0]
        if efficiency.get(label) and len(line) >= eff_end:
            _check_percent(line[:eff_end].split()[-1], efficiency[label])
            checked += 1
    assert checked >= 20
    assert any(0 < (value or 0) < 0.005 for value in efficiency.values())  # read "0%" before

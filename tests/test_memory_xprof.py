"""profan's memory peaks against XProf's memory viewer on the same traces (the ``xprof`` extra).

XProf reads private copies (it writes per-program files beside a trace); the comparison code is
benchmarks/memory_xprof.py, which also writes the table in docs/memory.md.
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT

pytest.importorskip("xprof.convert.raw_to_tool_data", reason="xprof is not installed (.[xprof])")

# XProf's memory viewer on every program: the quick loop skips it (xprof: tests/test_xprof_*).
pytestmark = pytest.mark.slow

ROOT = REPO_ROOT


def _crosscheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "memory_xprof", ROOT / "benchmarks" / "memory_xprof.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_peaks_within_one_percent_of_xprof_on_every_program() -> None:
    crosscheck = _crosscheck()
    traces = crosscheck.traces()
    assert len(traces) >= 10
    rows = [row for label, xplane in traces for row in crosscheck.compare(label, xplane)]
    assert len(rows) >= 180
    assert all(row["xprof_peak"] is not None for row in rows)
    for row in rows:
        assert abs(row["difference"]) <= 0.01, row
        assert row["profan_position"] == row["xprof_position"], row
    # Every difference is one of those docs/memory.md explains: a temporary allocation
    # with no heap-simulator trace, which profan counts and XProf leaves out.
    differing = [row for row in rows if row["profan_peak"] != row["xprof_peak"]]
    assert len(differing) <= 1
    for row in differing:
        assert row["profan_peak"] - row["xprof_peak"] == 64, row


def test_the_documented_table_is_current() -> None:
    """docs/memory.md's summary rows equal a fresh comparison for every trace it lists (a trace
    added later is covered by the test above until the table is regenerated)."""
    crosscheck = _crosscheck()
    rows = [r for label, xplane in crosscheck.traces() for r in crosscheck.compare(label, xplane)]
    doc = (ROOT / "docs" / "memory.md").read_text()
    documented = {line.split(" | ")[0] for line in doc.splitlines() if line.startswith("| ")}
    fresh = crosscheck.summary(rows).splitlines()[2:]
    checked = [line for line in fresh if line.split(" | ")[0] in documented]
    assert len(checked) >= 10
    for line in checked:
        assert line in doc

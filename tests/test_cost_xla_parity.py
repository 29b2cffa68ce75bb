"""Module totals of profan's cost model against XLA's own ``cost_analysis()`` of every fixture.

Each ``fixtures/<name>/meta.json`` holds what ``jax.jit(...).lower(...).compile().cost_analysis()``
returned for the module dumped in ``fixtures/<name>/hlo/*after_optimizations.txt`` (CPU).
profan must agree within 1% on FLOPs and 10% on bytes accessed.

Known, explained differences (both far inside the tolerances):
* XLA sums per-op figures in float32: ``transformer`` reports 25,899,144 FLOPs where the exact
  integer sum is 25,899,145 (above 2**24 float32 can only hold even integers);
* XLA's CPU cost analysis charges a ``tuple`` only its 8-byte-per-element pointer table but
  other tuple-shaped results (an ``all-to-all`` of two arrays, a two-operand ``sort``) all their
  arrays; profan mirrors both, so the fixtures agree to the byte.
"""

from __future__ import annotations

import json

import pytest

from profan.cost import module_totals
from profan.hlo.parser import parse_module
from tests.conftest import FIXTURES_DIR

# The CPU programs' fixtures: one program each, with its truth (the GPU groups hold several
# programs and have tests of their own).
NAMES = sorted(
    p.parent.name
    for p in FIXTURES_DIR.glob("*/meta.json")
    if "programs" not in json.loads(p.read_text())
)


def _module_and_truth(name: str):
    meta = json.loads((FIXTURES_DIR / name / "meta.json").read_text())
    files = [f["file"] for f in meta["hlo_files"] if "after_optimizations" in f["file"]]
    assert files, f"{name}: no after_optimizations dump listed in meta.json"
    path = FIXTURES_DIR / name / files[0]
    return parse_module(path.read_text(), file=str(path)), meta["cost_analysis"]


def test_there_are_fixtures() -> None:
    assert len(NAMES) >= 4


@pytest.mark.parametrize("name", NAMES)
def test_module_totals_match_xla_cost_analysis(name: str) -> None:
    module, xla = _module_and_truth(name)
    ours = module_totals(module)
    assert ours.flops == pytest.approx(xla.get("flops", 0.0), rel=0.01)
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=0.10)
    assert ours.transcendentals == pytest.approx(xla.get("transcendentals", 0.0), rel=0.01)
    # Closer than required: profan mirrors XLA's rules, so a drift here flags a rule change.
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=1e-6)
    assert not ours.unknown_ops, f"ops profan could not cost: {ours.unknown_ops}"

"""Module totals against XLA's ``cost_analysis()`` on small real programs: op kinds not in
the other fixtures.

Each program lives in ``fixtures/xla_programs/<name>/``, made by ``fixtures/make_fixtures.py``
(jax 0.10.2 on CPU): ``hlo/*after_optimizations.txt`` is XLA's dump of
``jax.jit(f).lower(*args).compile()`` and ``meta.json`` holds what ``cost_analysis()``
returned for it (all keys) with ``f`` described in ``description``.  Convolutions (strided,
grouped, dilated), scatter, gather, sort (one and two operands), cumsum (reduce-window),
max-pool, while, conditional, softmax, dynamic-(update-)slice, bf16 and batched matmuls: profan
must agree with XLA within 1% on FLOPs and transcendentals and 10% on bytes; it agrees exactly
on all of them (checked to 1e-6 below).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from profan.cost import module_totals
from profan.hlo.parser import parse_module
from tests.conftest import FIXTURES_DIR

GROUP = FIXTURES_DIR / "xla_programs"
# Listed, not globbed: a program missing from the fixtures fails instead of going unchecked.
PROGRAMS = (
    "argsort",
    "batched_matmul",
    "bf16_matmul",
    "cond",
    "conv",
    "conv_dilated",
    "conv_grouped",
    "cumsum",
    "dynamic_slice",
    "dynamic_update_slice",
    "gather",
    "maxpool",
    "scatter_add",
    "softmax",
    "sort",
    "while_loop",
)


def _program(name: str) -> tuple[str, dict[str, Any]]:
    """The dump text of one program and its meta.json (which holds XLA's cost analysis)."""
    meta = json.loads((GROUP / name / "meta.json").read_text())
    (entry,) = meta["hlo_files"]
    assert entry["file"].endswith("after_optimizations.txt"), entry
    return (GROUP / name / entry["file"]).read_text(), meta


def test_the_group_holds_exactly_these_programs() -> None:
    assert sorted(p.name for p in GROUP.iterdir() if p.is_dir()) == sorted(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_totals_match_xla(name: str) -> None:
    text, meta = _program(name)
    xla = meta["cost_analysis"]
    ours = module_totals(parse_module(text))
    assert ours.flops == pytest.approx(xla.get("flops", 0.0), rel=0.01)
    assert ours.transcendentals == pytest.approx(xla.get("transcendentals", 0.0), rel=0.01)
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=0.10)
    # exact agreement: profan mirrors XLA's rules (a drift here flags a rule change)
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=1e-6)
    assert ours.flops == pytest.approx(xla.get("flops", 0.0), rel=1e-6)
    assert not ours.unknown_ops


@pytest.mark.parametrize("name", PROGRAMS)
def test_parser_counts_match_xla(name: str) -> None:
    """profan's parser sees the computations and instructions XLA's own parser counted."""
    text, meta = _program(name)
    module = parse_module(text)
    counts = meta["hlo_files"][0]["xla_counts"]
    found = (len(module.computations), sum(len(c) for c in module.computations))
    assert found == (counts["computations"], counts["instructions"])
    assert module.name == meta["module_name"]

"""``profan whatif --mesh``: the CPU transformer fixture (data=4 x model=2, 8 devices) recosted for
data=2 x model=4 without a recompile. The collectives' new ideal times are checked against
MODEL.md section 4's formulas computed here (a ring over a switched fabric: all-reduce
2(n-1)/n x V / (links x W_uni), at least 2(n-1) hops of latency), and projecting onto the same
mesh changes nothing."""

from __future__ import annotations

import json
import math
from functools import cache

import pytest

from profan.chips import get_chip
from profan.errors import ConfigError
from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.model import Report
from profan.whatif.mesh import collective_ideal_s, parse_mesh, project_mesh
from tests.conftest import FIXTURES_DIR

OLD = {"data": 4, "model": 2}
NEW = {"data": 2, "model": 4}


@cache
def _report() -> Report:
    trace, hlo = resolve_layout(FIXTURES_DIR / "transformer", None)
    return report_for(trace, hlo=hlo)


def _model_4(kind: str, full_bytes: float, n: int) -> float:
    """MODEL.md 4 on a switched fabric (the CPU chip's topology): a ring over the device's
    egress, bandwidth-bound ``(n-1)/n x V / (links x W_uni)`` (all-reduce twice that), against
    the latency of ``n-1`` hops (all-reduce ``2(n-1)``)."""
    chip = get_chip("cpu")
    assert chip.topology == "switched"
    gather = (n - 1) / n * full_bytes / (chip.ici_links * chip.ici_link_bytes_per_s_uni)
    hops = n - 1
    if kind == "all-reduce":
        gather, hops = 2 * gather, 2 * hops
    return max(gather, hops * chip.ici_hop_latency_s)


def test_same_mesh_changes_nothing() -> None:
    report = _report()
    projection = project_mesh(report, dict(OLD))
    assert len(projection.ops) == len(report.ops)
    for op in projection.ops:
        assert op.projected_s == pytest.approx(op.measured_s, rel=1e-12)
    assert projection.projected_busy_s == pytest.approx(projection.busy_s, rel=1e-12)
    assert projection.projected_step_s == pytest.approx(projection.step_s, rel=1e-12)


def test_collectives_recosted_by_model_section_4() -> None:
    report = _report()
    chip = get_chip("cpu")
    projection = {op.key: op for op in project_mesh(report, dict(NEW)).ops}
    collectives = [e for e in report.ops if e.collective and e.collective.get("axes")]
    assert {tuple(e.collective["axes"]) for e in collectives} == {("data",), ("model",)}
    for entry in collectives:
        info, n = entry.collective, entry.occurrences
        (axis,) = info["axes"]
        other = "model" if axis == "data" else "data"
        old_ideal = _model_4(info["kind"], info["bytes"], OLD[axis])
        # the report's own ideal term is the formula's on the traced mesh
        assert entry.t_ici_s / n == pytest.approx(old_ideal, rel=1e-9)
        # on the new mesh: the group is the axis's new size, V the array split along the other
        # axis (x old/new size of it)
        v_new = info["bytes"] * OLD[other] / NEW[other]
        new_ideal = _model_4(info["kind"], v_new, NEW[axis])
        assert collective_ideal_s(info["kind"], v_new, [axis], NEW, chip) == pytest.approx(
            new_ideal, rel=1e-9
        )
        op = projection[entry.key]
        fixed = min(2.5e-6, 0.5 * entry.measured_s / n)  # one launch's fixed cost (whatif.toml)
        expected = fixed + (entry.measured_s / n - fixed) * new_ideal / old_ideal
        assert op.projected_s / n == pytest.approx(expected, rel=1e-9)
        assert op.rests_on.startswith("estimate") and f"group {OLD[axis]} -> {NEW[axis]}" in (
            op.rests_on
        )
    # the gradients' all-reduce over data (group 4 -> 2, half the array): bandwidth-bound, faster
    big = max(collectives, key=lambda e: e.collective["bytes"])
    assert big.collective["axes"] == ["data"]
    assert projection[big.key].projected_s < 0.5 * big.measured_s


def test_compute_scaled_by_shard_sizes() -> None:
    report = _report()
    projection = {op.key: op for op in project_mesh(report, dict(NEW)).ops}
    matmuls = [e for e in report.ops if e.splits and e.measured_s > 0]
    assert matmuls
    for entry in matmuls:
        axes = {
            a for side in ("lhs", "rhs", "out") for dim in entry.splits[side]["axes"] for a in dim
        }
        factor = math.prod(OLD[a] / NEW[a] for a in axes)
        n = entry.occurrences
        fixed = min(2.5e-6, 0.5 * entry.measured_s / n)
        expected = fixed + (entry.measured_s / n - fixed) * factor
        assert projection[entry.key].projected_s / n == pytest.approx(expected, rel=1e-9)
    # the same 8 devices: an op with no known split keeps its time
    plain = [e for e in report.ops if not e.splits and not e.collective and e.measured_s > 0]
    assert all(projection[e.key].projected_s == pytest.approx(e.measured_s) for e in plain)


def test_every_number_marked_as_an_estimate(capsys) -> None:
    from profan.cli import main

    folder = str(FIXTURES_DIR / "transformer")
    assert main(["whatif", folder, "--mesh", "data=2,model=4", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"] == "mesh data=2,model=4"
    assert all(op["rests_on"].startswith("estimate") for op in data["ops"])
    assert any("estimate" in note for note in data["notes"])


def test_mesh_argument() -> None:
    assert parse_mesh("data=2, model=4") == NEW
    for bad in ("data", "data=0", "data=x", ""):
        with pytest.raises(ConfigError):
            parse_mesh(bad)
    with pytest.raises(ConfigError, match="no axis expert"):
        project_mesh(_report(), {"expert": 2})

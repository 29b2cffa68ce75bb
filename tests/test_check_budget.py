"""``profan check`` logic on real reports: per-op/per-scope budgets, baselines, suspicious ops."""

from __future__ import annotations

from pathlib import Path

import pytest

from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.check.budget import Budget, OpBudget, evaluate
from profan.report.check.regressions import against
from profan.report.model import Report

pytestmark = pytest.mark.slow
_REPORTS: dict[str, Report] = {}


def report(fixtures_dir: Path, name: str) -> Report:
    if name not in _REPORTS:
        _REPORTS[name] = build_report(analyse(fixtures_dir / name))
    return _REPORTS[name]


def test_per_scope_budget(fixtures_dir: Path) -> None:
    mlp = report(fixtures_dir, "mlp")
    dots = [op for op in mlp.ops if op.name.startswith("dot")]
    assert dots
    # a per-op time budget is per step (the mean over the captured steps), per device
    per_step = sum(op.measured_s for op in dots) / mlp.summary.device_count
    per_step /= mlp.summary.step_count
    loose = Budget(ops=(OpBudget("dot*", max_time_s=per_step * 1.01),))
    tight = Budget(ops=(OpBudget("dot*", max_time_s=per_step * 0.99),))
    assert all(r.passed for r in evaluate(mlp, loose))
    failed = [r for r in evaluate(mlp, tight) if not r.passed]
    assert len(failed) == 1 and failed[0].source  # points at a source line
    assert f"mean of {mlp.summary.step_count} steps" in failed[0].message
    # the stable key merges the all-reduces into the dot_general scope; patterns match names
    assert not evaluate(mlp, Budget(ops=(OpBudget("*dot_general*", max_time_s=1.0),)))[0].passed
    everything = Budget(ops=(OpBudget("scope:jit(train_step)", max_time_s=1.0),))
    (result,) = evaluate(mlp, everything)
    scoped = [op for op in mlp.ops if op.scope == "jit(train_step)"]
    assert scoped and f"{len(scoped)} op(s)" in result.message
    # a pattern that matches nothing is a failure, not a silent pass
    assert not evaluate(mlp, Budget(ops=(OpBudget("*no-such-op*", max_time_s=1.0),)))[0].passed


def test_per_op_efficiency_budget(fixtures_dir: Path) -> None:
    mlp = report(fixtures_dir, "mlp")
    worst = min(
        (op for op in mlp.ops if op.category == "matmul" and op.efficiency is not None),
        key=lambda op: op.efficiency,
    )
    results = evaluate(
        mlp, Budget(ops=(OpBudget(worst.name, min_efficiency=worst.efficiency * 1.5),))
    )
    assert [r.passed for r in results] == [False]
    results = evaluate(
        mlp, Budget(ops=(OpBudget(worst.name, min_efficiency=worst.efficiency / 2),))
    )
    assert [r.passed for r in results] == [True]


def test_mfu_and_exposed_comm_budgets(fixtures_dir: Path) -> None:
    mlp = report(fixtures_dir, "mlp")
    mfu = mlp.summary.mfu
    exposed = mlp.summary.exposed_comm_per_step_s
    assert exposed > 0  # the CPU collectives are not overlapped with anything
    ok = Budget(mfu_min=mfu * 0.9, exposed_comm_s=exposed * 1.1)
    bad = Budget(mfu_min=mfu * 1.1, exposed_comm_s=exposed * 0.9)
    assert all(r.passed for r in evaluate(mlp, ok))
    assert [r.name for r in evaluate(mlp, bad) if not r.passed] == ["mfu", "exposed_comm"]


def test_worse_sharding_against_baseline(fixtures_dir: Path) -> None:
    mlp = Report.from_dict(report(fixtures_dir, "mlp").to_dict())
    worse = report(fixtures_dir, "mlp_worse")
    results = against(worse, mlp, Budget())
    new = [r for r in results if r.name.startswith("baseline.new_collective:")]
    # the all-gather the worse sharding forces is new; it is matched by key, not by name
    assert any("all-gather" in r.message for r in new)
    assert all(not r.passed for r in new)
    # against itself everything holds
    assert all(r.passed for r in against(mlp, mlp, Budget()))


def test_keys_match_across_recompiles(fixtures_dir: Path) -> None:
    """Ops that exist in both MLP variants keep their key although XLA renumbered them."""
    mlp, worse = report(fixtures_dir, "mlp"), report(fixtures_dir, "mlp_worse")
    keys_a = {op.key for op in mlp.ops}
    keys_b = {op.key for op in worse.ops}
    shared = keys_a & keys_b
    assert len(shared) >= len(keys_a) // 2
    renamed = [
        (a.name, b.name) for a in mlp.ops for b in worse.ops if a.key == b.key and a.name != b.name
    ]
    assert renamed, "XLA numbered some shared ops differently in the two modules"

"""``profan check`` never passes a gate on a number it could not compute (issue 26, B7).

A step time that is missing, zero or negative, and an MFU that is unknown, fail the gates that ask
for them with one line saying why; the gate never disappears and never prints PASS.  The traces
are real (fixtures/transformer, recorded by JAX); the ones named ``synthetic`` have their step
markers edited: their trace-viewer JSON with every step marker's duration set to zero.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from profan.cli import main
from profan.report.analysis.pipeline import report_for
from profan.report.check import baseline as baselines
from profan.report.check.budget import Budget, OpBudget, evaluate
from profan.report.check.regressions import against
from profan.report.model import Report

STEP_ARGUMENT = "step_num"  # the trace-viewer JSON's step marker argument (jax StepTraceAnnotation)


def _zero_length_steps(fixtures_dir: Path, target: Path) -> Path:
    """A copy of the transformer's trace-viewer JSON whose step markers last 0 µs."""
    (source,) = (fixtures_dir / "transformer" / "trace").rglob("*.trace.json.gz")
    document = json.loads(gzip.decompress(source.read_bytes()))
    edited = 0
    for event in document["traceEvents"]:
        if STEP_ARGUMENT in (event.get("args") or {}):
            event["dur"] = 0
            edited += 1
    assert edited == 3  # the fixture's three train steps (fixtures/transformer/meta.json)
    run = target / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "vm.trace.json.gz").write_bytes(gzip.compress(json.dumps(document).encode()))
    return target


@pytest.fixture(scope="module")
def zero_steps_trace(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _zero_length_steps(fixtures_dir, tmp_path_factory.mktemp("zero-steps"))


@pytest.fixture(scope="module")
def zero_steps(zero_steps_trace: Path, fixtures_dir: Path) -> Report:
    return report_for(zero_steps_trace, hlo=str(fixtures_dir / "transformer" / "hlo"))


@pytest.fixture(scope="module")
def transformer(fixtures_dir: Path) -> Report:
    return report_for(fixtures_dir / "transformer")


def test_synthetic_zero_length_steps_fail_step_time_and_mfu_gates(
    zero_steps_trace: Path, fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget = tmp_path / "profan.toml"
    budget.write_text("[budget]\nstep_time_s = 1.0\nmfu_min = 0.0\n")
    hlo = str(fixtures_dir / "transformer" / "hlo")
    code = main(["check", str(zero_steps_trace), "--budget", str(budget), "--hlo", hlo])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    step = next(line for line in lines if line.startswith("FAIL  step_time:"))
    mfu = next(line for line in lines if line.startswith("FAIL  mfu:"))
    # each says that the number could not be computed, and why: the steps have no duration
    assert "unknown" in step and "3 steps" in step and "duration" in step
    assert "unknown" in mfu and "step time" in mfu


def test_synthetic_negative_step_time_never_passes(transformer: Report) -> None:
    """Reversed step markers give a negative median: not a time under any budget."""
    assert transformer.summary.step_time_median_s and transformer.summary.step_time_median_s > 0
    reversed_steps = dataclasses.replace(
        transformer,
        summary=dataclasses.replace(transformer.summary, step_time_median_s=-900e-6, mfu=-3.0),
    )
    results = {r.name: r for r in evaluate(reversed_steps, Budget(step_time_s=1.0, mfu_min=0.0))}
    assert not results["step_time"].passed and not results["mfu"].passed
    assert "-900" in results["step_time"].message and "not a time" in results["step_time"].message
    assert "%" not in results["mfu"].message.split("budget")[0]  # no "-300.0%" printed as MFU
    # the same report with its real steps passes the same budget: the gate itself works
    real = {r.name: r for r in evaluate(transformer, Budget(step_time_s=1.0, mfu_min=0.0))}
    assert real["step_time"].passed and real["mfu"].passed


def test_synthetic_zero_length_steps_against_a_json_report_baseline(
    zero_steps: Report, transformer: Report
) -> None:
    """Against a JSON report the step-time and MFU comparisons fail, naming the side that has
    no step time; they used to vanish."""
    results = {r.name: r for r in against(zero_steps, transformer, Budget())}
    assert not results["baseline.step_time"].passed
    assert "this profile" in results["baseline.step_time"].message
    assert not results["baseline.mfu"].passed
    swapped = {r.name: r for r in against(transformer, zero_steps, Budget())}
    assert "the baseline" in swapped["baseline.step_time"].message
    assert not swapped["baseline.step_time"].passed
    same = {r.name: r for r in against(transformer, transformer, Budget())}
    assert same["baseline.step_time"].passed and same["baseline.mfu"].passed


def test_synthetic_zero_length_steps_against_a_machine_baseline(
    zero_steps: Report, transformer: Report
) -> None:
    old = baselines.entry_from_report(transformer)
    gated = Budget(time_gate=True)
    (time,) = [r for r in against(zero_steps, old, gated) if r.name.endswith("step_time")]
    assert not time.passed
    assert "could not be compared" in time.message and "zero-length" in time.message
    # where times do not gate (a CPU runner by default) the line says it compared nothing
    (skipped,) = [r for r in against(zero_steps, old, Budget()) if r.name.endswith("step_time")]
    assert skipped.passed and "not compared" in skipped.message
    # an entry records no impossible step time: none instead of zero or a negative one
    assert baselines.entry_from_report(zero_steps).step_min_s is None


def test_synthetic_efficiency_gate_on_ops_without_an_efficiency_fails(transformer: Report) -> None:
    """A per-op efficiency budget whose ops all lack an efficiency (cost unknown: no ideal time)
    fails instead of vanishing into "no budgets to check"."""
    dots = [op for op in transformer.ops if op.opcode == "dot"]
    assert dots and all(op.efficiency is not None for op in dots)
    unknown = [dataclasses.replace(op, efficiency=None) if op.opcode == "dot" else op
               for op in transformer.ops]  # fmt: skip
    edited = dataclasses.replace(transformer, ops=unknown)
    budget = Budget(ops=(OpBudget("dot*", min_efficiency=0.0),))
    assert all(r.passed for r in evaluate(transformer, budget))  # the real ones: judged
    results = evaluate(edited, budget)
    assert results and not results[0].passed
    assert "efficiency unknown" in results[0].message and f"{len(dots)} op(s)" in results[0].message

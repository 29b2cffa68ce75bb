"""Per-machine baselines (profan.report.check.baseline) on the real fixture traces: structure
compares exactly, step times with a tolerance from the steps' noise, gated on GPU/TPU and not on
CPU."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from profan.errors import ConfigError
from profan.report.analysis.pipeline import report_for
from profan.report.check import baseline, regressions, structure
from profan.report.check.budget import Budget
from profan.report.check.results import CheckResult, github_annotations
from profan.report.model import Report
from tests.conftest import FIXTURES_DIR


@pytest.fixture(scope="module")
def mlp() -> Report:
    return report_for(FIXTURES_DIR / "mlp")


@pytest.fixture(scope="module")
def mlp_worse() -> Report:
    return report_for(FIXTURES_DIR / "mlp_worse")


@pytest.fixture(scope="module")
def gpu() -> Report:
    return report_for(FIXTURES_DIR / "gpu_kernels")


def _failed(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if not r.passed]


def test_entry_is_per_step_and_per_execution(mlp: Report) -> None:
    entry = baseline.entry_from_report(mlp)
    assert entry.machine == "CPU/cpu" and entry.device_count == 8 and entry.steps == 3
    assert entry.mesh == {"jit_train_step": {"data": 4, "model": 2}}
    for op in mlp.ops:
        facts = entry.ops[op.key]
        assert facts.per_step * entry.steps == op.occurrences
        assert facts.flops * op.occurrences == pytest.approx(op.flops, rel=1e-12)
        assert facts.hbm_bytes * op.occurrences == pytest.approx(op.hbm_bytes, rel=1e-12)
    assert entry.totals["flops_per_step"] * 3 == pytest.approx(sum(op.flops for op in mlp.ops))
    collectives = [op for op in mlp.ops if op.category == "collective"]
    assert entry.totals["collectives_per_step"] * 3 == sum(op.occurrences for op in collectives)
    # meta.json: one training step per traced step, 3 steps
    meta = json.loads((FIXTURES_DIR / "mlp" / "meta.json").read_text())
    assert entry.steps == meta["trace"]["steps"]


def test_a_report_matches_its_own_baseline(mlp: Report, tmp_path: Path) -> None:
    path = tmp_path / "mlp.json"
    written = baseline.write_baseline(path, mlp, {"jax": "0.10.2"})
    assert baseline.is_baseline_file(path)
    (read,) = baseline.read_baselines(path).values()
    assert read == written
    results = regressions.against_file(mlp, path, Budget(), {"jax": "0.10.2"})
    assert _failed(results) == []
    assert [r.name for r in results][:2] == ["baseline.devices", "baseline.mesh"]
    assert any(r.name == "baseline.ops" and "16 ops" in r.message for r in results)


def test_an_added_all_gather_is_named_with_its_source(
    mlp: Report, mlp_worse: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mlp.json"
    baseline.write_baseline(path, mlp)
    results = regressions.against_file(mlp_worse, path, Budget())
    op = next(op for op in mlp_worse.ops if op.opcode == "all-gather")
    (gather,) = [r for r in results if r.name == f"baseline.new_collective:{op.key}"]
    assert gather.source == op.source and re.fullmatch(r".+make_fixtures\.py:\d+", op.source)
    assert f"new collective {op.name}: all-gather in 4 group(s) of 2" in gather.message
    assert gather.message.endswith(f"at {op.source}; not in the baseline")
    assert not next(r for r in results if r.name == "baseline.collectives_per_step").passed
    # CPU step times are shown but do not gate
    (timing,) = [r for r in results if r.name == "baseline.step_time"]
    assert timing.passed and "times do not gate on CPU" in timing.message
    # GitHub annotations land on the op's line, relative to the checkout
    # (the fixtures record the script relative to the repository; an absolute source is made
    # relative to the working directory)
    file, _, line = op.source.rpartition(":")
    expected = file
    if Path(file).is_absolute():
        monkeypatch.chdir(Path(file).parent)
        expected = Path(file).name
    annotations = github_annotations(regressions.against_file(mlp_worse, path, Budget()))
    assert f"::error file={expected},line={line},title=baseline.new_collective" in annotations


def test_one_file_holds_one_entry_per_machine(mlp: Report, gpu: Report, tmp_path: Path) -> None:
    path = tmp_path / "both.json"
    baseline.write_baseline(path, mlp)
    baseline.write_baseline(path, gpu)
    entries = baseline.read_baselines(path)
    assert sorted(entries) == ["CPU/cpu", "GPU/h100"]
    assert _failed(regressions.against_file(gpu, path, Budget())) == []
    assert _failed(regressions.against_file(mlp, path, Budget())) == []
    # re-recording one machine leaves the other alone
    baseline.write_baseline(path, mlp)
    assert baseline.read_baselines(path)["GPU/h100"] == entries["GPU/h100"]

    only_cpu = tmp_path / "cpu.json"
    baseline.write_baseline(only_cpu, mlp)
    (missing,) = regressions.against_file(gpu, only_cpu, Budget())
    assert not missing.passed
    assert "has no baseline for GPU/h100 (it has: CPU/cpu)" in missing.message
    assert "--profan-update-baseline" in missing.message


def test_the_same_program_on_two_chips_keeps_two_entries(gpu: Report, tmp_path: Path) -> None:
    """The H100 and H200 recordings of one program: each is checked against its own chip's
    entry, never against the other's (their times differ by the hardware, not the code)."""
    h200 = report_for(FIXTURES_DIR / "gpu_kernels_h200")
    only_h100 = tmp_path / "h100.json"
    baseline.write_baseline(only_h100, gpu)
    (missing,) = regressions.against_file(h200, only_h100, Budget())
    assert not missing.passed
    assert "has no baseline for GPU/h200 (it has: GPU/h100)" in missing.message
    both = tmp_path / "both.json"
    baseline.write_baseline(both, gpu)
    baseline.write_baseline(both, h200)
    assert sorted(baseline.read_baselines(both)) == ["GPU/h100", "GPU/h200"]
    assert _failed(regressions.against_file(gpu, both, Budget())) == []
    assert _failed(regressions.against_file(h200, both, Budget())) == []


def test_gpu_step_times_gate(gpu: Report, tmp_path: Path) -> None:
    path = tmp_path / "gpu.json"
    baseline.write_baseline(path, gpu)
    (timing,) = [r for r in regressions.against_file(gpu, path, Budget()) if "step_time" in r.name]
    assert timing.passed and "do not gate" not in timing.message


def _timed(entry: baseline.Entry, minimum: float, median: float) -> baseline.Entry:
    return dataclasses.replace(entry, step_min_s=minimum, step_median_s=median)


def _step_time(new: baseline.Entry, old: baseline.Entry, policy: Budget) -> list:
    results = regressions.against(new, old, policy)
    return [r for r in results if r.name.startswith(("baseline.step_time", "baseline.op_time"))]


def test_synthetic_time_tolerance_comes_from_the_noise(gpu: Report) -> None:
    """Baseline steps 1.0 ms min / 1.1 ms median: spread 10%, x3 = 30% tolerance (over the 2%
    floor); new steps with a tight spread keep that tolerance (the larger spread wins)."""
    real = baseline.entry_from_report(gpu)
    old = _timed(real, 1.0e-3, 1.1e-3)
    policy = Budget()

    (inside,) = _step_time(_timed(real, 1.29e-3, 1.30e-3), old, policy)
    assert inside.passed and "+29.0%, tolerance +30.0%" in inside.message
    outside = _step_time(_timed(real, 1.31e-3, 1.32e-3), old, policy)[0]
    assert not outside.passed and "+31.0%, tolerance +30.0%" in outside.message
    # a quiet baseline and quiet steps: the 2% floor
    quiet = _timed(real, 1.0e-3, 1.0e-3)
    floor = _step_time(_timed(real, 1.03e-3, 1.03e-3), quiet, policy)[0]
    assert not floor.passed and "+3.0%, tolerance +2.0%" in floor.message
    # noisy new steps widen it: min 1.0, median 1.2 -> 20% spread -> 60%
    (noisy,) = _step_time(_timed(real, 1.5e-3, 1.8e-3), quiet, policy)
    assert noisy.passed and "+50.0%, tolerance +60.0%" in noisy.message
    # the gate: off for GPU when asked, on for CPU when asked
    off = Budget(time_gate=False)
    (ungated,) = _step_time(_timed(real, 9e-3, 9e-3), quiet, off)
    assert ungated.passed and "times do not gate on GPU" in ungated.message
    assert regressions.Policy(time_gate="on").gates_time("CPU")
    auto = regressions.Policy(time_gate="auto")
    assert not auto.gates_time("CPU") and auto.gates_time("TPU")


def test_synthetic_slower_ops_are_named_when_the_step_time_fails(gpu: Report) -> None:
    """The same GPU program with one op 10 ms slower per step (the step's min and median too):
    the step time fails (+104%, beyond the 43.8% its noise allows) and names the op."""
    old = baseline.entry_from_report(gpu)
    heaviest = max(old.ops.values(), key=lambda op: op.time_per_step_s)
    slower_ops = dict(old.ops)
    slower_ops[heaviest.key] = dataclasses.replace(
        heaviest, time_per_step_s=heaviest.time_per_step_s + 10e-3
    )
    new = dataclasses.replace(
        old,
        ops=slower_ops,
        step_min_s=old.step_min_s + 10e-3,
        step_median_s=old.step_median_s + 10e-3,
    )
    step, named = _step_time(new, old, Budget())
    assert not step.passed
    assert named.name == f"baseline.op_time:{heaviest.key}" and named.source == heaviest.source
    assert "(+10 ms)" in named.message
    # 10/9.628803 = +103.9%; 3 x (11.035171 - 9.628803)/9.628803 = 43.8% (the trace's steps)
    assert "+103.9%, tolerance +43.8%" in step.message


def test_recorded_versions_are_named_when_structure_differs(
    mlp: Report, mlp_worse: Report, tmp_path: Path
) -> None:
    path = tmp_path / "mlp.json"
    baseline.write_baseline(path, mlp, {"jax": "0.9.0"})
    results = regressions.against_file(mlp_worse, path, Budget(), {"jax": "0.10.2"})
    flops = next(r for r in results if r.name == "baseline.flops_per_step")
    assert "(recorded with jax 0.9.0 -> 0.10.2: the difference may come from there)" in (
        flops.message
    )
    same = regressions.against_file(mlp, path, Budget(), {"jax": "0.10.2"})
    assert _failed(same) == []  # versions alone never fail a check


def test_many_changed_ops_are_capped() -> None:
    transformer = baseline.entry_from_report(report_for(FIXTURES_DIR / "transformer"))
    old = baseline.entry_from_report(report_for(FIXTURES_DIR / "mlp"))
    results = regressions.against(transformer, old, Budget())
    prefixes = ("baseline.new", "baseline.op:", "baseline.gone")
    ops = [r for r in results if r.name.startswith(prefixes)]
    assert len(ops) == structure.MAX_OP_LINES
    assert all(not r.passed for r in ops)
    # every op that is new, gone, or changed in executions, FLOPs, bytes or collective
    differing = set(transformer.ops) ^ set(old.ops)
    for key in set(transformer.ops) & set(old.ops):
        a, b = transformer.ops[key], old.ops[key]
        facts = ("per_step", "flops", "hbm_bytes", "ici_bytes", "collective")
        if any(getattr(a, name) != getattr(b, name) for name in facts):
            differing.add(key)
    (more,) = [r for r in results if r.name == "baseline.ops.more"]
    assert f"... and {len(differing) - structure.MAX_OP_LINES} more op(s)" in more.message
    # collectives first
    assert ops[0].name.startswith(("baseline.new_collective", "baseline.gone", "baseline.op:"))
    assert "collective" in ops[0].message


def test_memory_compares_exactly(mlp: Report, mlp_worse: Report) -> None:
    """Per-device argument/output/temp bytes equal XLA's memory_analysis() of each fixture."""
    old, new = baseline.entry_from_report(mlp), baseline.entry_from_report(mlp_worse)
    for entry, name in ((old, "mlp"), (new, "mlp_worse")):
        xla = json.loads((FIXTURES_DIR / name / "memory_analysis.json").read_text())
        (facts,) = entry.memory.values()
        assert facts.argument_bytes == xla["argument_size_in_bytes"]
        assert facts.output_bytes == xla["output_size_in_bytes"]
        assert facts.temp_bytes == xla["temp_size_in_bytes"]
    (memory,) = [r for r in regressions.against(new, old, Budget()) if "memory" in r.name]
    assert not memory.passed
    assert "temp 131,224 B vs 131,160 B (+64, x1)" in memory.message  # XLA: 131224 vs 131160
    assert f"peak at {new.memory['jit_train_step/device'].peak_instruction}" in memory.message
    (same,) = [r for r in regressions.against(old, old, Budget()) if "memory" in r.name]
    assert same.passed and "as in the baseline" in same.message
    # a report without the memory section (e.g. an older JSON report) compares the rest
    without = mlp.to_dict()
    without.pop("memory")
    rows = regressions.against(without, old, Budget())
    assert not [r for r in rows if "memory" in r.name]


def test_bad_baseline_files(mlp: Report, tmp_path: Path) -> None:
    assert baseline.read_baselines(tmp_path / "absent.json") == {}
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match=r"broken\.json:1:2: not valid JSON"):
        baseline.read_baselines(broken)
    a_report = tmp_path / "report.json"
    a_report.write_text(json.dumps(mlp.to_dict()))
    assert not baseline.is_baseline_file(a_report)
    with pytest.raises(ConfigError, match=r"report\.json: not a profan baseline"):
        baseline.read_baselines(a_report)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"format": "profan-baseline", "version": 99, "machines": {}}))
    with pytest.raises(ConfigError, match="baseline version 99 is not supported"):
        baseline.read_baselines(future)
    with pytest.raises(ConfigError, match="malformed baseline"):
        future.write_text(json.dumps({"format": "profan-baseline", "version": 1}))
        baseline.read_baselines(future)


def test_synthetic_mesh_names_compare_when_both_sides_know_them(mlp: Report) -> None:
    real = baseline.entry_from_report(mlp)
    assert real.mesh == {"jit_train_step": {"data": 4, "model": 2}}  # names from hlo/ dumps
    # what a trace analysed without its program shows: XLA's groups, generated names
    entry = dataclasses.replace(real, mesh={"jit_train_step": {"axis0": 4, "axis1": 2}})
    named = real
    other = dataclasses.replace(entry, mesh={"jit_train_step": {"batch": 4, "model": 2}})
    wider = dataclasses.replace(entry, mesh={"jit_train_step": {"axis0": 2, "axis1": 4}})

    def mesh_row(new: baseline.Entry, old: baseline.Entry) -> CheckResult:
        results = regressions.against(new, old, Budget())
        return next(r for r in results if r.name == "baseline.mesh")

    assert mesh_row(named, named).passed
    assert mesh_row(entry, named).passed  # sizes agree; this side has no program names
    assert "without the program's names" in mesh_row(entry, named).message
    assert mesh_row(named, entry).passed
    renamed = mesh_row(other, named)  # both name their axes, differently
    assert not renamed.passed and "'batch': 4" in renamed.message
    assert not mesh_row(wider, entry).passed  # other sizes never pass

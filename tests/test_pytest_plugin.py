"""The pytest plugin without JAX: registration, profan.check on real fixture reports (budget
files and dicts, baselines written and compared), clear failures for misuse and a missing JAX.
A test project runs in a pytest subprocess, with the plugin loaded as installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.conftest import FIXTURES_DIR, REPO_ROOT

ROOT = REPO_ROOT

PROJECT_CONFTEST = """
import sys
sys.modules["jax"] = None  # this project runs without JAX, whether or not it is installed
"""

PROJECT_TEST = f"""
import pytest
from profan.report.analysis.pipeline import report_for

MLP = report_for({str(FIXTURES_DIR / "mlp")!r})
MLP_WORSE = report_for({str(FIXTURES_DIR / "mlp_worse")!r})


def test_budget_dict_passes(profan):
    limits = {{"budget": {{"step_time_s": 10.0, "max_suspicious": 1000}}}}
    results = profan.check(MLP, budget=limits)
    assert [r.name for r in results] == ["step_time", "suspicious"]


def test_budget_dict_fails(profan):
    profan.check(MLP, budget={{"budget": {{"step_time_s": 1e-9}}}})


def test_budget_file(profan):
    profan.check(MLP, budget="budget.toml")


def test_budget_dict_with_a_typo(profan):
    profan.check(MLP, budget={{"budget": {{"step_time": 1.0}}}})


def test_baseline_of_mlp(profan):
    profan.check(MLP, baseline="baselines/mlp.json")


def test_mlp_worse_against_it(profan):
    profan.check(MLP_WORSE, baseline="baselines/mlp.json")


def test_capture_without_jax(profan):
    profan.capture(print, 1)


@pytest.mark.profan("budget.toml")
def test_marker_with_positional():
    pass


@pytest.mark.profan(budget="budget.toml", step=3)
def test_marker_with_a_typo():
    pass
"""


def _plugin_args() -> list[str]:
    """Load the plugin as installed (entry point); name it explicitly in an environment whose
    profan was installed before the entry point existed."""
    if any(e.value == "profan.pytest_plugin" for e in entry_points(group="pytest11")):
        return []
    return ["-p", "profan.pytest_plugin"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    (root / "conftest.py").write_text(textwrap.dedent(PROJECT_CONFTEST))
    (root / "test_checks.py").write_text(textwrap.dedent(PROJECT_TEST))
    (root / "budget.toml").write_text("[budget]\nstep_time_s = 1e-9\n")
    return root


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args(), *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _failure(output: str, test: str) -> str:
    """The failure section of one test in pytest's output."""
    start = output.index(f"_ {test} _")
    ends = [output.find(mark, start + 1) for mark in ("\n___", "\n===")]
    return output[start : min((e for e in ends if e > 0), default=len(output))]


def test_entry_point_and_extra_are_declared() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["pytest11"] == {"profan": "profan.pytest_plugin"}
    assert any(d.startswith("jax") for d in pyproject["project"]["optional-dependencies"]["jax"])


def test_plugin_imports_light() -> None:
    """Loaded in every pytest session where profan is installed: no jax, pandas or report."""
    code = (
        "import sys, profan.pytest_plugin\n"
        "print(sorted(m for m in ('jax', 'pandas', 'numpy', 'profan.report.model') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_checks_in_a_project(project: Path) -> None:
    result = _pytest(project, "--junitxml=junit.xml")
    out = result.stdout
    assert result.returncode == 1
    summary = out.splitlines()[-1]
    assert summary.startswith("8 failed, 1 passed")
    failed = {
        line.split("::")[1].split()[0] for line in out.splitlines() if line.startswith("FAILED")
    }
    assert failed == {
        "test_budget_dict_fails",
        "test_budget_file",
        "test_budget_dict_with_a_typo",
        "test_baseline_of_mlp",
        "test_mlp_worse_against_it",
        "test_capture_without_jax",
        "test_marker_with_positional",
        "test_marker_with_a_typo",
    }, summary

    tight = _failure(out, "test_budget_dict_fails")
    assert "FAIL  step_time: median step time 2.33 ms (budget 1 ns)" in tight
    assert "profan check: 0 passed, 1 failed" in tight
    assert "Traceback" not in tight and "def test_" not in tight  # the check's lines only
    assert "FAIL  step_time" in _failure(out, "test_budget_file")
    typo = _failure(out, "test_budget_dict_with_a_typo")
    assert "budget dict" in typo and "step_time" in typo
    missing = _failure(out, "test_baseline_of_mlp")
    assert "baselines/mlp.json has no baseline for CPU/cpu (it has: none)" in missing
    assert "pytest --profan-update-baseline" in missing
    no_jax = _failure(out, "test_capture_without_jax")
    assert "profan.capture: profan.capture needs JAX: pip install 'profan[jax]'" in no_jax
    assert "Traceback" not in no_jax
    assert "takes the keywords budget, baseline, steps, warmup; got positional" in _failure(
        out, "test_marker_with_positional"
    )
    assert "unknown: step" in _failure(out, "test_marker_with_a_typo")

    # record the baseline, then mlp passes and mlp_worse fails on its new all-gather
    tests = ["test_checks.py::test_baseline_of_mlp", "test_checks.py::test_mlp_worse_against_it"]
    update = _pytest(project, "--profan-update-baseline", tests[0])
    assert update.returncode == 0, update.stdout
    recorded = json.loads((project / "baselines" / "mlp.json").read_text())
    assert list(recorded["machines"]) == ["CPU/cpu"]
    assert "jax" not in recorded["machines"]["CPU/cpu"]["recorded"]  # no jax here: not recorded
    compared = _pytest(project, *tests)
    assert compared.returncode == 1
    assert compared.stdout.splitlines()[-1].startswith("1 failed, 1 passed")
    worse = _failure(compared.stdout, "test_mlp_worse_against_it")
    assert "FAIL  baseline.new_collective:" in worse
    assert "new collective all-gather: all-gather in 4 group(s) of 2" in worse

"""The README's own `profan check` budget, read out of README.md and run on the bundled
transformer fixture: a handful of lines, each naming an op and a number that can be checked
against the trace's own events (issue 28)."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

REPO = REPO_ROOT


def _readme_budget() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index("`profan check` reads `profan.toml`:") :]
    found = re.search(r"```toml\n(.*?)```", after, re.S)
    assert found, "the README's budget example"
    return found.group(1)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory, fixtures_dir: Path) -> list[str]:
    budget = tmp_path_factory.mktemp("readme") / "profan.toml"
    budget.write_text(_readme_budget(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "profan", "check", str(fixtures_dir / "transformer"),
         "--budget", str(budget)],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # the example fails some budgets, on purpose
    return done.stdout.splitlines()


def test_the_readme_budget_gives_a_short_result(checked: list[str]) -> None:
    results = [line for line in checked if line.startswith(("PASS  ", "FAIL  "))]
    assert 4 <= len(results) <= 10, checked
    assert checked[-1].startswith("profan check: ")
    # every check name is short (no scope key of hundreds of characters)
    names = [line[6:].split(": ", 1)[0] for line in results]
    assert all(len(name) <= 60 for name in names), names
    # every per-op line names an op and a time or share
    for line in results:
        if "ops[" in line:
            assert re.search(r"\d+(\.\d+)? (ms|µs|us|s)\b|\d+(\.\d+)?%", line), line
            assert re.search(r"(all-reduce|dot|fusion)[\w.]*", line), line


def test_per_op_times_are_per_step_and_agree_with_the_trace(
    checked: list[str], fixtures_dir: Path
) -> None:
    """``all-reduce*`` matches op names (not scopes that merge all-reduces into a layer), and
    its time is per step and per device: the raw events' total over devices and steps."""
    profile = analyse(fixtures_dir / "transformer").profile
    ops = profile.ops
    reduces = ops[ops["op_name"].str.startswith("all-reduce")]
    devices = ops["device"].nunique()
    steps = len(profile.steps)
    expected_ms = float(reduces["duration_s"].sum()) / devices / steps * 1e3
    (line,) = [x for x in checked if "ops[all-reduce*].time" in x]
    count, value = re.search(
        r"(\d+) op\(s\) .* take ([\d.]+) ms per step per device", line
    ).groups()
    assert int(count) == reduces["op_name"].nunique()
    assert float(value) == pytest.approx(expected_ms, rel=0.01)
    assert f"mean of {steps} steps" in line


def test_scope_patterns_select_by_scope_only(checked: list[str], fixtures_dir: Path) -> None:
    (line,) = [x for x in checked if "ops[scope:" in x and ".time" in x]
    pattern = re.search(r"ops\[scope:([^\]]+)\]", line).group(1)
    report = build_report(analyse(fixtures_dir / "transformer"), with_rules=False)
    expected = [op for op in report.ops if fnmatch.fnmatchcase(op.scope or "", pattern)]
    assert expected and f"{len(expected)} op(s)" in line
    # a scope pattern is asked for: a name pattern never selects by scope
    assert not [op for op in report.ops if fnmatch.fnmatchcase(op.name, pattern)]

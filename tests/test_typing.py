"""mypy with the project's own configuration ([tool.mypy] in pyproject.toml: all of ``profan/``,
strict on the HLO, cost, roofline and report-model modules) finds no error, so a contributor's
pytest run catches type drift as CI's mypy step does (docs/ci.md).  Skips without mypy (the
``lint`` extra installs it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

ROOT = REPO_ROOT


def test_mypy_finds_no_error_in_profan() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[lint]')")
    # The checkout's own configuration and file list; the incremental cache in the checkout
    # (.mypy_cache, ignored by git) makes a run after a small change take seconds.
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout}{done.stderr}"
    assert done.stdout.startswith("Success: no issues found"), done.stdout

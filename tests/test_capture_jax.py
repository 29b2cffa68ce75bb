"""profan.capture on real JAX programs: the cases of tests/capture_jax_cases.py, run in one child
pytest process on 8 virtual CPU devices and reported here case by case.

Why a child process: JAX starts runtime threads with its backend, and later tests in this
process fork (the trace loader reads many hosts in worker processes); forking a process that
holds JAX's threads can deadlock (JAX warns so)."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

# One child run of every case, JAX started and compiling: ~10 s of CPU (the quick loop skips it;
# profan.capture without JAX: tests/test_capture_nojax.py).
pytestmark = pytest.mark.slow

CASES_FILE = Path(__file__).with_name("capture_jax_cases.py")
CASES = [
    node.name
    for node in ast.parse(CASES_FILE.read_text()).body
    if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
]

if importlib.util.find_spec("jax") is None:
    pytest.skip(
        "jax is not installed: pip install -e '.[jax,test]' to run the capture tests",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """Each case's outcome in the child run: ("passed" | "failed" | "skipped", its text)."""
    junit = tmp_path_factory.mktemp("capture") / "junit.xml"
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            str(CASES_FILE),
        ],
        cwd=CASES_FILE.parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not junit.exists():
        pytest.fail(f"the child pytest wrote no results:\n{child.stdout}\n{child.stderr}")
    results: dict[str, tuple[str, str]] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            results[case.get("name", "")] = ("failed", problem.text or problem.get("message", ""))
        elif skipped is not None:
            results[case.get("name", "")] = ("skipped", skipped.get("message", ""))
        else:
            results[case.get("name", "")] = ("passed", "")
    return results


@pytest.mark.parametrize("case", CASES)
def test_capture(case: str, outcomes: dict[str, tuple[str, str]]) -> None:
    assert case in outcomes, f"{case} did not run in the child process"
    state, text = outcomes[case]
    if state == "skipped":
        pytest.skip(text)
    assert state == "passed", text

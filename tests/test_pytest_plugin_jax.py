"""The pytest plugin end to end: a JAX project's own test file, run by pytest in a subprocess on
8 CPU devices, with the plugin loaded as an installed plugin would be.

The project's program changes between runs (``MODEL_VARIANT``): the baseline passes; an added
all-gather fails, naming the new collective and its source line; doubling a matmul fails;
``--profan-update-baseline`` then makes it pass. The all-gather's source line is checked against
XLA's own compiled HLO text, not against profan.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from importlib.metadata import entry_points
from pathlib import Path

import pytest

if importlib.util.find_spec("jax") is None:  # found, not imported: the runs are subprocesses
    pytest.skip(
        "jax is not installed: pip install -e '.[jax,test]' to run the plugin tests",
        allow_module_level=True,
    )

PROJECT_TEST = """
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

VARIANT = os.environ.get("MODEL_VARIANT", "base")
HIDDEN = 512 if VARIANT == "double" else 256
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))


def sharded(shape, *spec):
    return jax.device_put(jnp.ones(shape, jnp.float32), NamedSharding(mesh, P(*spec)))


@jax.jit
def layer(x, w1, w2):
    hidden = jax.nn.relu(x @ w1)
    if VARIANT == "allgather":
        hidden = jax.lax.with_sharding_constraint(hidden, NamedSharding(mesh, P("data", None)))
    return hidden @ w2


ARGS = (
    sharded((64, 128), "data", None),
    sharded((128, HIDDEN), None, "model"),
    sharded((HIDDEN, 128), "model", None),
)


def test_layer(profan):
    report = profan.capture(layer, *ARGS, steps=3, warmup=1)
    profan.check(report, budget="budget.toml", baseline="baselines/layer.json")


@pytest.mark.profan(budget="budget.toml", baseline="baselines/layer_marked.json", steps=2)
def test_layer_marked():
    return layer(*ARGS)


def test_too_tight_budget(profan):
    profan.check(profan.capture(layer, *ARGS, steps=2), budget="tight.toml")
"""

XLA_SOURCE_LINES = r"""
# The source lines XLA's own printout gives the collectives: the instruction's stack_frame_id,
# through the module's StackFrames and FileLocations tables, to a line.
import json, re, sys
sys.path.insert(0, ".")
import test_model_perf as m
text = m.layer.lower(*m.ARGS).compile().as_text()
frames = {int(a): int(b) for a, b in re.findall(r"^(\d+) \{file_location_id=(\d+) ", text, re.M)}
location = r"^(\d+) \{file_name_id=\d+ function_name_id=\d+ line=(\d+)"
places = {int(a): int(b) for a, b in re.findall(location, text, re.M)}
lines = {}
for kind, frame in re.findall(r"= \S+ (all-gather|all-reduce)\(.*stack_frame_id=(\d+)", text):
    lines.setdefault(kind, set()).add(places[frames[int(frame)]])
print(json.dumps({k: sorted(v) for k, v in lines.items()}))
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
    (root / "test_model_perf.py").write_text(textwrap.dedent(PROJECT_TEST).lstrip())
    (root / "budget.toml").write_text("[budget]\nstep_time_s = 60.0\n")
    (root / "tight.toml").write_text("[budget]\nstep_time_s = 1e-9\n")
    return root


def _env(variant: str) -> dict[str, str]:
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env["MODEL_VARIANT"] = variant
    env.pop("GITHUB_ACTIONS", None)
    return env


def _pytest(project: Path, variant: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA"]
    return subprocess.run(
        [*command, *_plugin_args(), *args],
        cwd=project,
        env=_env(variant),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _failure(output: str, test: str) -> str:
    """The failure section of one test in pytest's output (under CI=true pytest also repeats
    the whole message in its short summary)."""
    start = output.index(f"_ {test} _")
    ends = [output.find(mark, start + 1) for mark in ("\n___", "\n===")]
    return output[start : min((e for e in ends if e > 0), default=len(output))]


def _line(project: Path, text: str) -> int:
    lines = (project / "test_model_perf.py").read_text().splitlines()
    (number,) = [i + 1 for i, line in enumerate(lines) if text in line]
    return number


def _xla_lines(project: Path, variant: str) -> dict[str, list[int]]:
    result = subprocess.run(
        [sys.executable, "-c", XLA_SOURCE_LINES],
        cwd=project,
        env=_env(variant),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_baseline_cycle(project: Path) -> None:
    """update -> pass -> all-gather fails -> doubled matmul fails -> update -> pass."""
    tests = ["test_model_perf.py::test_layer", "test_model_perf.py::test_layer_marked"]

    # 1. record the baselines
    first = _pytest(project, "base", "--profan-update-baseline", *tests)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 passed" in first.stdout
    recorded = json.loads((project / "baselines" / "layer.json").read_text())
    assert recorded["format"] == "profan-baseline"
    assert list(recorded["machines"]) == ["CPU/cpu"]
    entry = recorded["machines"]["CPU/cpu"]
    assert entry["device_count"] == 8
    assert entry["mesh"] == {"jit_layer": {"data": 4, "model": 2}}  # the program's names
    assert (project / "baselines" / "layer_marked.json").is_file()

    # 2. the same program passes; its figures are JUnit properties
    same = _pytest(
        project, "base", "--junitxml=junit.xml", "--profan-trace-dir=traces_base", *tests
    )
    assert same.returncode == 0, same.stdout + same.stderr
    assert "2 passed" in same.stdout
    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ElementTree.parse(project / "junit.xml").iter("testcase")
    }
    figures = properties["test_layer"]
    # per device and step: two matmuls [16,128]x[128,128] (2*16*128*128 FLOPs each), relu and
    # the all-reduce's adds over [16,128] (16*128 each); 8 devices
    per_device = 2 * (2 * 16 * 128 * 128) + 2 * (16 * 128)
    assert float(figures["profan.flops_per_step"]) == 8 * per_device
    assert float(figures["profan.collectives_per_step"]) == 8  # one all-reduce per device
    assert figures["profan.machine"] == "CPU/cpu"
    assert int(figures["profan.steps"]) == 3
    assert figures["profan.checks_failed"] == "0"
    assert int(properties["test_layer_marked"]["profan.steps"]) == 2
    assert list((project / "traces_base").glob("*test_layer/plugins/profile/*/*.xplane.pb"))

    # 3. a change that adds an all-gather fails, naming it and its source line (XLA's metadata)
    gathered = _pytest(
        project, "allgather", "--profan-github", "--profan-trace-dir=traces_allgather", *tests
    )
    assert gathered.returncode == 1, gathered.stdout + gathered.stderr
    assert "2 failed" in gathered.stdout
    (gather_line,) = _xla_lines(project, "allgather")["all-gather"]
    assert gather_line == _line(project, "hidden = jax.nn.relu(x @ w1)")
    new_collective = re.compile(
        r"FAIL  baseline\.new_collective:\S+: new collective all-gather\S*: all-gather in 4 "
        r"group\(s\) of 2, 16\.4 kB each of f32\[16,256\], 8 executions per step \(all devices\), "
        rf"at test_model_perf\.py:{gather_line}; not in the baseline"
    )
    for test in ("test_layer", "test_layer_marked"):  # each test's own failure names it once
        assert len(new_collective.findall(_failure(gathered.stdout, test))) == 1, test
    collectives = "collective executions per step 16 vs 8 in the baseline (+8, x2)"
    assert f"FAIL  baseline.collectives_per_step: {collectives}" in gathered.stdout
    assert "pytest --profan-update-baseline" in gathered.stdout
    annotation = re.compile(
        rf"^::error file=test_model_perf\.py,line={gather_line},title=baseline\.new_collective"
        r"%3A\S+::new collective all-gather",
        re.MULTILINE,
    )
    assert len(annotation.findall(gathered.stdout)) == 2

    # 4. doubling a matmul's size fails, naming the matmuls and their lines
    doubled = _pytest(project, "double", *tests)
    assert doubled.returncode == 1, doubled.stdout + doubled.stderr
    for code in ("hidden = jax.nn.relu(x @ w1)", "return hidden @ w2"):
        assert re.search(
            rf"FAIL  baseline\.op:\S+: matmul \S+ at test_model_perf\.py:{_line(project, code)}: "
            r"FLOPs per execution 1,048,576 vs 524,288 \(\+524,288, x2\)",
            doubled.stdout,
        ), doubled.stdout
    assert "FAIL  baseline.flops_per_step" in doubled.stdout

    # 5. --profan-update-baseline accepts the change, then it passes
    updated = _pytest(project, "double", "--profan-update-baseline", *tests)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    again = _pytest(project, "double", *tests)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 passed" in again.stdout


def test_budget_failure_prints_the_check_lines(project: Path) -> None:
    result = _pytest(project, "base", "test_model_perf.py::test_too_tight_budget")
    assert result.returncode == 1
    assert re.search(r"FAIL  step_time: median step time \S+ \S+ \(budget 1 ns\)", result.stdout)
    assert "profan check: 0 passed, 1 failed" in result.stdout
    assert "--profan-update-baseline" not in result.stdout  # not a baseline failure


DOCS = Path(__file__).resolve().parents[1] / "docs" / "ci.md"


def _doc_command(pattern: str) -> list[str]:
    """A command line of docs/ci.md (continuation lines joined), as argv."""
    text = DOCS.read_text().replace("\\\n", " ")
    (line,) = re.findall(pattern, text, re.MULTILINE)
    return shlex.split(line)


def _run_doc(
    project: Path, argv: list[str], variant: str, **env: str
) -> subprocess.CompletedProcess[str]:
    program = {
        "pytest": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_plugin_args()],
        "profan": [sys.executable, "-m", "profan"],
    }[argv[0]]
    return subprocess.run(
        [*program, *argv[1:]],
        cwd=project,
        env={**_env(variant), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_docs_ci_commands_work(tmp_path: Path) -> None:
    """The commands docs/ci.md gives (record, the workflow's pytest step, profan check --github)
    run as written on a project laid out as the page says, and annotate the right line."""
    perf = tmp_path / "tests" / "perf"
    perf.mkdir(parents=True)
    (perf / "test_model_perf.py").write_text(
        textwrap.dedent(PROJECT_TEST).lstrip().replace("budget.toml", "profan.toml")
    )
    toml = re.search(r"# tests/perf/profan.toml\n(.*?)```", DOCS.read_text(), re.DOTALL)
    assert toml is not None
    (perf / "profan.toml").write_text(toml.group(1))
    xla_flags = re.search(r"XLA_FLAGS: (\S+)", DOCS.read_text())
    assert xla_flags is not None and xla_flags.group(1) == _env("base")["XLA_FLAGS"]

    record = _doc_command(r"^XLA_FLAGS=\S+ (pytest tests/perf --profan-update-baseline)$")
    assert _run_doc(tmp_path, [*record, "-k", "layer"], "base").returncode == 0
    workflow = _doc_command(r"^\s+- run: (pytest .*)$")
    assert workflow[:2] == ["pytest", "tests/perf"]
    selected = [*workflow, "-k", "layer"]
    passed = _run_doc(tmp_path, selected, "base", GITHUB_ACTIONS="true")
    assert passed.returncode == 0, passed.stdout
    assert "::error" not in passed.stdout
    check = _doc_command(r"^(profan check .*)$")
    assert (tmp_path / check[2]).is_dir()  # --profan-trace-dir wrote it where the page says
    assert check[check.index("--baseline") + 1] == "tests/perf/baselines/layer.json"
    report = _run_doc(tmp_path, ["profan", "report", check[2], "--format", "json"], "base")
    assert report.returncode == 0, report.stderr
    (tmp_path / "accepted-report.json").write_text(report.stdout)
    same = _run_doc(tmp_path, check, "base")
    assert same.returncode == 0, same.stdout + same.stderr  # the trace against its own baseline
    shutil.rmtree(tmp_path / "perf-traces")

    failed = _run_doc(tmp_path, selected, "allgather", GITHUB_ACTIONS="true")
    assert failed.returncode == 1
    (line,) = _xla_lines(perf, "allgather")["all-gather"]
    annotation = (
        f"::error file=tests/perf/test_model_perf.py,line={line},title=baseline.new_collective"
    )
    assert failed.stdout.count(annotation) == 2  # the fixture's test and the marked one
    assert (tmp_path / "perf-junit.xml").is_file()

    # profan check on the kept trace: the per-machine baseline file, and a JSON report baseline
    with_report = [*check]
    with_report[with_report.index("--baseline") + 1] = "accepted-report.json"
    for argv in (check, with_report):
        checked = _run_doc(tmp_path, argv, "allgather")
        assert checked.returncode == 1, checked.stdout + checked.stderr
        assert re.search(
            rf"^::error file=tests/perf/test_model_perf\.py,line={line},"
            r"title=baseline\.new_collective%3A\S+::new collective all-gather",
            checked.stdout,
            re.MULTILINE,
        ), checked.stdout
        assert (tmp_path / "check.xml").is_file()

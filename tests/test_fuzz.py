"""Fuzzing the readers of user input (issue 26): mutated real inputs raise profan's own errors
(``ProfanError``: exit 2) or nothing — never another exception (exit 3), never a hang (a
deadline per example), never unbounded memory (the process's peak RSS after all examples).

Inputs: the matmul fixture's ``.xplane.pb`` (the wire decoder), its HLO text (the parser), and
the packaged chip and kernel TOML and a baseline profan recorded (the config reader).  In-process
for speed, bounded to about a minute on two cores; ``-m "not slow"`` leaves it out.  Two CLI runs
check the exit codes end to end.
"""

from __future__ import annotations

import contextlib
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profan.errors import EXIT_BAD_INPUT, ProfanError
from profan.paths import data_path
from tests.conftest import FIXTURES_DIR

pytestmark = pytest.mark.slow

MATMUL = FIXTURES_DIR / "matmul"
(XPLANE,) = sorted((MATMUL / "trace").rglob("*.xplane.pb"))
HLO_TEXT = (MATMUL / "hlo" / "module_0012.jit_matmul.cpu_after_optimizations.txt").read_text()
FUZZ = settings(
    max_examples=400,
    deadline=5000,  # ms per example: a hang or a quadratic blow-up fails
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # the same examples on every run: CI failures reproduce
    database=None,
)
# Bounded memory: the peak RSS after every example, over the RSS before the first.
MAX_GROWTH_KIB = 1 << 20  # 1 GiB


def _mutated(data: bytes, draw: st.DataObject) -> bytes:
    """``data`` with a few bytes overwritten, a span cut out or the tail cut off."""
    out = bytearray(data)
    for _ in range(draw.draw(st.integers(1, 8), label="edits")):
        kind = draw.draw(st.sampled_from(["byte", "cut", "truncate", "varint"]), label="kind")
        at = draw.draw(st.integers(0, max(len(out) - 1, 0)), label="at")
        if kind == "byte" and out:
            out[at] = draw.draw(st.integers(0, 255), label="value")
        elif kind == "cut":
            del out[at : at + draw.draw(st.integers(1, 64), label="length")]
        elif kind == "truncate":
            del out[at:]
        else:  # a huge varint where a length or id was: the decoder must bound it
            out[at:at] = b"\xff" * 9 + b"\x01"
    return bytes(out)


@pytest.fixture(scope="module")
def memory_start() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _check_memory(start: int) -> None:
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start
    assert grown < MAX_GROWTH_KIB, f"peak RSS grew by {grown} KiB"


def test_wire_decoder_on_mutated_xplane(tmp_path: Path, memory_start: int) -> None:
    from profan.trace.xplane import read_host

    original = XPLANE.read_bytes()
    target = tmp_path / "vm.xplane.pb"

    @FUZZ
    @given(st.data())
    def decode(data: st.DataObject) -> None:
        target.write_bytes(_mutated(original, data))
        with contextlib.suppress(ProfanError):
            read_host(str(target), "vm")

    decode()
    _check_memory(memory_start)


def test_hlo_parser_on_mutated_text(memory_start: int) -> None:
    from profan.hlo.parser import parse_module

    @FUZZ
    @given(st.data())
    def parse(data: st.DataObject) -> None:
        text = _mutated(HLO_TEXT.encode(), data).decode("utf-8", errors="replace")
        with contextlib.suppress(ProfanError):
            parse_module(text, file="fuzz.hlo")

    parse()
    _check_memory(memory_start)


@pytest.fixture(scope="module")
def config_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Real configuration files: the packaged chips and kernels, a budget, and a baseline
    recorded from the matmul fixture."""
    from profan.cli import main

    folder = tmp_path_factory.mktemp("configs")
    budget = folder / "profan.toml"
    budget.write_text("[budget]\nstep_time_s = 1.0\n[baseline]\ntime_gate = true\n")
    baseline = folder / "baseline.json"
    argv = ["check", str(MATMUL), "--budget", str(budget), "--baseline", str(baseline)]
    assert main([*argv, "--update-baseline"]) == 0
    return {
        "chips": data_path("chips.toml").read_bytes(),
        "kernels": data_path("kernels.toml").read_bytes(),
        "budget": budget.read_bytes(),
        "baseline": baseline.read_bytes(),
    }


def test_config_readers_on_mutated_files(
    config_files: dict[str, bytes], tmp_path: Path, memory_start: int
) -> None:
    from profan.chips import read_chip_file
    from profan.cost.kernels import read_kernel_file
    from profan.report.check.baseline import read_baselines
    from profan.report.check.budget import load_budget

    readers = {
        "chips": read_chip_file,
        "kernels": read_kernel_file,
        "budget": load_budget,
        "baseline": read_baselines,
    }

    @FUZZ
    @given(st.sampled_from(sorted(readers)), st.data())
    def read(kind: str, data: st.DataObject) -> None:
        path = tmp_path / f"{kind}.{'json' if kind == 'baseline' else 'toml'}"
        path.write_bytes(_mutated(config_files[kind], data))
        with contextlib.suppress(ProfanError):
            readers[kind](path)

    read()
    _check_memory(memory_start)


def test_cli_exit_codes_end_to_end(config_files: dict[str, bytes], tmp_path: Path) -> None:
    """Through the installed program: a mutated baseline and a truncated trace are exit 2."""
    budget = tmp_path / "profan.toml"
    budget.write_bytes(config_files["budget"])
    baseline = tmp_path / "baseline.json"
    data = json.loads(config_files["baseline"])
    (entry,) = data["machines"].values()
    entry["totals"] = "many"
    baseline.write_text(json.dumps(data), encoding="utf-8")
    trace = tmp_path / "trace" / "plugins" / "profile" / "run1"
    trace.mkdir(parents=True)
    (trace / "vm.xplane.pb").write_bytes(XPLANE.read_bytes()[:5000])
    program = [sys.executable, "-m", "profan"]
    runs = [
        [*program, "check", str(MATMUL), "--budget", str(budget), "--baseline", str(baseline)],
        [*program, "report", str(tmp_path / "trace"), "--no-cache"],
    ]
    for argv in runs:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == EXIT_BAD_INPUT, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr

"""Outputs never destroy a user's file (issue 26: A4, A5, C12).

An output that is an input is refused before any analysis; a destination that cannot take a
file is a clear error (exit 2) before the analysis where it can be known, and after it (a full
disk) the old file is kept; baselines recorded by several runners at once keep every entry.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profan.cli import main
from profan.errors import EXIT_BAD_INPUT

PROFAN = [sys.executable, "-m", "profan"]


def _profan(args: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    options.setdefault("stdout", subprocess.PIPE)
    return subprocess.run(PROFAN + args, stderr=subprocess.PIPE, text=True, timeout=300, **options)


@pytest.fixture()
def matmul(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A copy of the matmul fixture (its trace and HLO dumps), so inputs may be written over."""
    shutil.copytree(fixtures_dir / "matmul", tmp_path / "matmul")
    (tmp_path / "profan.toml").write_text("[budget]\nmfu_min = 0.0\n", encoding="utf-8")
    return tmp_path / "matmul"


def _one_line_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("profan: error:")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    return lines[0]


# -- A4: an output that is an input ------------------------------------------------------------


@pytest.mark.parametrize("which", ["hlo", "config", "config-hard-link"])
def test_export_refuses_to_overwrite_its_inputs(
    matmul: Path, which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hlo_dir = matmul / "hlo"
    config = matmul.parent / "profan.toml"
    victim = {
        "hlo": hlo_dir / "module_0012.jit_matmul.cpu_after_optimizations.txt",
        "config": config,
        "config-hard-link": matmul.parent / "other.json",
    }[which]
    if which == "config-hard-link":
        os.link(config, victim)  # another name, the same inode
    before = victim.read_bytes()
    export = ["export", str(matmul / "trace"), "--format", "json", "--output", str(victim)]
    code = main([*export, "--hlo", str(hlo_dir), "--config", str(config)])
    assert code == EXIT_BAD_INPUT
    assert str(victim) in _one_line_error(capsys.readouterr().err)
    assert victim.read_bytes() == before


def test_check_refuses_junit_over_its_budget(
    matmul: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget = matmul.parent / "profan.toml"
    before = budget.read_bytes()
    code = main(["check", str(matmul / "trace"), "--budget", str(budget), "--junit", str(budget)])
    assert code == EXIT_BAD_INPUT
    assert "--budget" in _one_line_error(capsys.readouterr().err)
    assert budget.read_bytes() == before


def test_report_refuses_an_out_dir_among_the_hlo_dumps(
    matmul: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hlo_dir = matmul / "hlo"
    listing = sorted(hlo_dir.iterdir())
    code = main(["report", str(matmul / "trace"), "--hlo", str(hlo_dir), "--out", str(hlo_dir)])
    assert code == EXIT_BAD_INPUT
    assert "--hlo" in _one_line_error(capsys.readouterr().err)
    assert sorted(hlo_dir.iterdir()) == listing


# -- C12: errors on the output side ------------------------------------------------------------


def test_a_bad_junit_path_is_refused_before_the_analysis(
    matmul: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from profan.commands import check

    def no_analysis(*args: object, **kwargs: object) -> None:
        raise AssertionError("the analysis ran before the output was checked")

    monkeypatch.setattr(check, "_check", no_analysis)
    budget = matmul.parent / "profan.toml"
    junit = budget / "results.xml"  # under a regular file: no folder can be made there
    code = main(["check", str(matmul / "trace"), "--budget", str(budget), "--junit", str(junit)])
    assert code == EXIT_BAD_INPUT
    assert str(junit) in _one_line_error(capsys.readouterr().err)


def test_junit_to_a_full_device_is_exit_2(matmul: Path) -> None:
    budget = matmul.parent / "profan.toml"
    done = _profan(
        ["check", str(matmul / "trace"), "--budget", str(budget), "--junit", "/dev/full"]
    )
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    line = _one_line_error(done.stderr)
    assert "/dev/full" in line and os.strerror(28) in line  # ENOSPC, in the system's words


@pytest.mark.parametrize("command", ["report", "annotate", "memory"])
def test_stdout_on_a_full_device_is_exit_2(matmul: Path, command: str) -> None:
    with open("/dev/full", "w") as full:
        done = _profan([command, str(matmul / "trace")], stdout=full)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert "standard output" in _one_line_error(done.stderr)


def _small_files() -> None:
    """In the child: files may grow to 4 kB (EFBIG past that: the full disk of a test)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.parametrize("command", ["report", "export"])
def test_a_failed_write_keeps_the_old_file(matmul: Path, tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if command == "report":
        target = out / "report.json"
        args = ["report", str(matmul / "trace"), "--format", "json", "--out", str(out)]
    else:
        target = out / "trace.json"
        args = ["export", str(matmul / "trace"), "--output", str(target)]
    old = b'{"the": "old file"}\n'
    target.write_bytes(old)
    done = _profan([*args, "--no-cache"], preexec_fn=_small_files)
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    assert str(target) in _one_line_error(done.stderr)
    assert target.read_bytes() == old
    assert sorted(path.name for path in out.iterdir()) == [target.name]  # no temporary left


# -- A5: baselines recorded at once ------------------------------------------------------------

# A CPU trace scored against several chips: each report is its own machine in the baseline.
CHIPS = ["cpu", "h100", "h200", "a100", "tpu-v5e", "b200"]


@pytest.fixture(scope="module")
def machine_reports(fixtures_dir: Path) -> list[dict[str, Any]]:
    from profan.report.analysis.pipeline import Progress, report_for

    trace = str(fixtures_dir / "matmul" / "trace")
    return [report_for(trace, chip=chip, progress=Progress(False)).to_dict() for chip in CHIPS]


def _record(path: str, report: dict[str, Any], barrier: Any) -> None:
    from profan.report.check.baseline import write_baseline

    barrier.wait()
    write_baseline(path, report)


def test_concurrent_baseline_updates_keep_every_entry(
    machine_reports: list[dict[str, Any]], tmp_path: Path
) -> None:
    from profan.report.check.baseline import machine_key, read_baselines

    machines = {machine_key(report) for report in machine_reports}
    assert len(machines) == len(CHIPS)  # the test means something only with distinct machines
    context = multiprocessing.get_context("fork")
    for round_ in range(6):
        path = tmp_path / f"baseline-{round_}.json"
        barrier = context.Barrier(len(machine_reports))
        workers = [
            context.Process(target=_record, args=(str(path), report, barrier))
            for report in machine_reports
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
            assert worker.exitcode == 0
        assert set(read_baselines(path)) == machines, f"round {round_}"

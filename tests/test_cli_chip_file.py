"""A user's chip file (``--chips FILE``) extends the catalogue for every command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from profan.chips import catalogue
from profan.cli import main
from profan.trace.options import CHIPS_ENV, KERNELS_ENV

# A made-up workstation chip, written the way a user would add one (synthetic by design).
SYNTHETIC_CHIP_FILE = """
[chips.synthetic-workstation]
display_name = "synthetic workstation"
kind = "CPU"
device_strings = ["synthetic-workstation"]
devices_per_chip = 1
peak_flops = { bf16 = 2.0e12, f32 = 1.0e12 }
hbm_bytes = 128e9
hbm_bytes_per_s = 4.0e11
ici_link_bytes_per_s_uni = 1.0e10
ici_link_bytes_per_s_bi = 2.0e10
ici_links = 1
topology = "switched"
ici_hop_latency_s = 1e-6
dcn_bytes_per_s = 1.25e9
pcie_bytes_per_s = 1.0e10
mxu_size = 0
[chips.synthetic-workstation.sources]
all = "a test chip"
"""


def _forget_after_the_test(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Unset ``name`` for the test (a default the user's environment sets must not change what
    it sees; restored after it)."""
    monkeypatch.delenv(name, raising=False)


def test_report_scores_against_a_chip_from_the_users_file(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _forget_after_the_test(monkeypatch, CHIPS_ENV)
    chip_file = tmp_path / "synthetic_chips.toml"
    chip_file.write_text(SYNTHETIC_CHIP_FILE)
    trace = str(fixtures_dir / "matmul")

    # Unknown without the file...
    assert main(["report", trace, "--chip", "synthetic-workstation", "--format", "json"]) == 2
    assert "synthetic-workstation" in capsys.readouterr().err

    # ...and used, with its own peak, once the file is given.
    argv = ["report", trace, "--chip", "synthetic-workstation", "--format", "json"]
    assert main([*argv, "--chips", str(chip_file)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chip"]["name"] == "synthetic-workstation"
    # in force for that command only: nothing left in the environment or the catalogue
    assert CHIPS_ENV not in os.environ and "synthetic-workstation" not in catalogue()
    assert report["summary"]["score_peak_flops_per_s"] == pytest.approx(2.0e12)  # the bf16 peak
    # The fixture's matmul is f32: its compute time uses the file's f32 peak.
    matmul = next(op for op in report["ops"] if op["category"] == "matmul")
    assert matmul["flops"] / matmul["t_compute_s"] == pytest.approx(1.0e12)


def test_bad_chip_file_is_unusable_input(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _forget_after_the_test(monkeypatch, CHIPS_ENV)
    bad = tmp_path / "synthetic_bad_chips.toml"
    bad.write_text("[chips.broken\n")
    assert main(["report", str(fixtures_dir / "matmul"), "--chips", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_bad_chips.toml" in err and "Traceback" not in err


def test_kernel_file_gives_a_custom_call_its_model(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A user's kernel file (``--kernels FILE``) comes before the built-in registry: mapping the
    H100 fixture's cuBLASLt target to the ``no-work`` model takes its gemms' FLOPs to 0."""
    _forget_after_the_test(monkeypatch, KERNELS_ENV)
    argv = ["report", str(fixtures_dir / "gpu_kernels"), "--format", "json"]
    assert main(argv) == 0
    before = {
        (op["module"], op["name"]): op
        for op in json.loads(capsys.readouterr().out)["ops"]
        if op["opcode"] == "custom-call"
    }
    gemm = before[("jit_matmul_bf16", "custom-call.1")]
    meta = json.loads((fixtures_dir / "gpu_kernels/meta.json").read_text())
    truth = next(p for p in meta["programs"] if p["name"] == "matmul_bf16")["truth"]["flops"]
    assert gemm["flops"] == truth * gemm["occurrences"]  # 2·4096³ per execution
    kernel_file = tmp_path / "synthetic_kernels.toml"
    kernel_file.write_text(
        '[kernels.synthetic-no-work]\ntargets = ["__cublas$lt$matmul"]\nmodel = "no-work"\n'
    )
    assert main([*argv, "--kernels", str(kernel_file)]) == 0
    after = {
        (op["module"], op["name"]): op
        for op in json.loads(capsys.readouterr().out)["ops"]
        if op["opcode"] == "custom-call"
    }
    assert after[("jit_matmul_bf16", "custom-call.1")]["flops"] == 0
    # a call with another target keeps its model
    conv = ("jit_conv_bf16", "cudnn-conv.1")
    assert after[conv]["flops"] == before[conv]["flops"] > 0


def test_bad_kernel_file_is_unusable_input(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _forget_after_the_test(monkeypatch, KERNELS_ENV)
    bad = tmp_path / "synthetic_bad_kernels.toml"
    bad.write_text('[kernels.x]\ntargets = ["a"]\nmodel = "magic"\n')
    assert main(["report", str(fixtures_dir / "matmul"), "--kernels", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_bad_kernels.toml" in err and "magic" in err and "Traceback" not in err

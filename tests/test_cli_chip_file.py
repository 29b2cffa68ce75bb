"""A user's chip file (``--chips FILE``) extends the catalogue for every command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profan.chips import USER_CHIPS_ENV
from profan.cli import main

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


def test_report_scores_against_a_chip_from_the_users_file(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(USER_CHIPS_ENV, raising=False)
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
    monkeypatch.delenv(USER_CHIPS_ENV, raising=False)
    bad = tmp_path / "synthetic_bad_chips.toml"
    bad.write_text("[chips.broken\n")
    assert main(["report", str(fixtures_dir / "matmul"), "--chips", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_bad_chips.toml" in err and "Traceback" not in err

"""``profan hlo FILE`` on the fixture dumps and on broken input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profan.cli import main
from profan.hlo import parse_file


def _dump(fixtures_dir: Path, name: str) -> Path:
    meta_path = fixtures_dir / name / "meta.json"
    if not meta_path.is_file():
        pytest.skip(f"fixture {name} not present")
    meta = json.loads(meta_path.read_text())
    return meta_path.parent / meta["hlo_files"][0]["file"]


def test_json_summary_counts_and_collective_groups(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _dump(fixtures_dir, "mlp")
    meta = json.loads((fixtures_dir / "mlp" / "meta.json").read_text())
    assert main(["hlo", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    counts = meta["hlo_files"][0]["xla_counts"]
    assert summary["computations"] == counts["computations"]
    assert summary["instructions"] == counts["instructions"]
    assert sum(summary["opcodes"].values()) == counts["instructions"]
    # The fixture generator recorded each collective's replica groups; sizes must agree.
    recorded = {c["name"]: c["groups"] for c in meta["hlo_collectives"]}
    found = {c["name"]: c for c in summary["collectives"]}
    assert set(recorded) <= set(found)
    assert found["all-reduce"]["groups"] == 4 and found["all-reduce"]["group_size"] == 2
    assert found["all-reduce.4"]["groups"] == 2 and found["all-reduce.4"]["group_size"] == 4
    assert recorded["all-reduce"] == "replica_groups={{0,1},{2,3},{4,5},{6,7}}"


def test_text_summary_lists_opcodes(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _dump(fixtures_dir, "collectives")
    module = parse_file(path)
    assert main(["hlo", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(module.computations)} computations" in out
    for opcode in ("all-gather", "reduce-scatter", "all-to-all", "collective-permute"):
        assert opcode in out
    assert "source-target pairs" in out


def test_chip_adds_a_roofline_table(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("profan.roofline")
    path = _dump(fixtures_dir, "matmul")
    assert main(["hlo", str(path), "--chip", "tpu-v5e", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    matmuls = [row for row in summary["roofline"] if row["category"] == "matmul"]
    # The fixture multiplies f32[256,512] by f32[512,1024]: 2*M*K*N FLOPs.
    assert [row["flops"] for row in matmuls] == [2 * 256 * 512 * 1024]


def test_unparseable_input_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "synthetic_broken.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT a = f32[] add(\n")
    assert main(["hlo", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_broken.hlo:3:" in err and "Traceback" not in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hlo", str(tmp_path / "absent.hlo")]) == 2
    assert "cannot read" in capsys.readouterr().err

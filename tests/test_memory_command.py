"""``profan memory TRACE|HLO`` end to end through the CLI, every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profan.cli import main
from tests.conftest import FIXTURES_DIR, gpu_chip, gpu_fixtures

MLP_DUMP = FIXTURES_DIR / "mlp" / "hlo" / "module_0024.jit_train_step.cpu_after_optimizations.txt"


pytestmark = pytest.mark.usefixtures("private_cache")


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    assert main(["memory", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_one_entry_per_program_with_the_issue_fields(capsys) -> None:
    report = _json(capsys, str(FIXTURES_DIR / "mlp"))
    oracle = json.loads((FIXTURES_DIR / "mlp" / "memory_analysis.json").read_text())
    fields = {
        "module",
        "memory_space",
        "argument_bytes",
        "output_bytes",
        "alias_bytes",
        "temp_bytes",
        "peak_bytes",
        "source",
        "top_buffers",
    }
    assert len(report["memory"]) == 13  # every program the mlp trace embeds
    assert all(fields <= set(entry) for entry in report["memory"])
    (step,) = [e for e in report["memory"] if e["module"] == "jit_train_step(24)"]
    assert step["source"] == "buffer-assignment"
    assert step["argument_bytes"] == oracle["argument_size_in_bytes"]
    assert step["temp_bytes"] == oracle["temp_size_in_bytes"]
    assert step["top_buffers"][0]["size_bytes"] >= step["top_buffers"][-1]["size_bytes"]
    assert report["chip"] == "cpu" and report["chip_approximate"] is True


def test_module_filter_and_top(capsys) -> None:
    report = _json(
        capsys, str(FIXTURES_DIR / "mlp" / "trace"), "--module", "jit_train_step", "--top", "3"
    )
    (entry,) = report["memory"]
    assert entry["module"] == "jit_train_step(24)"
    assert len(entry["top_buffers"]) == 3
    assert entry["live_buffer_count"] > 3


def test_hlo_file_gives_the_estimate(capsys) -> None:
    report = _json(capsys, str(MLP_DUMP))
    oracle = json.loads((FIXTURES_DIR / "mlp" / "memory_analysis.json").read_text())
    (entry,) = report["memory"]
    assert entry["source"] == "estimate"
    assert entry["argument_bytes"] == oracle["argument_size_in_bytes"]
    assert entry["output_bytes"] == oracle["output_size_in_bytes"]
    assert any("estimate" in note for note in entry["notes"])


@pytest.mark.parametrize("name", gpu_fixtures("gpu_transformer"))
@pytest.mark.parametrize("fmt", ["term", "md", "html"])
def test_text_formats_show_peak_buffers_and_chip(capsys, fmt: str, name: str) -> None:
    assert (
        main(
            [
                "memory",
                str(FIXTURES_DIR / name),
                "--module",
                "jit_train_step",
                "--format",
                fmt,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "jit_train_step(13930)" in out
    assert "1.54 GB" in out  # the peak, XLA's peak_memory_in_bytes 1,544,355,936
    assert gpu_chip(name) in out and "headroom" in out
    assert "loop_broadcast_fusion.3" in out  # the largest buffer live at the peak
    if fmt == "html":
        assert '<svg class="memory-timeline"' in out and '<svg class="memory-buffers"' in out
        assert out.count("<polyline") == 1


def test_chip_override(capsys) -> None:
    report = _json(
        capsys,
        str(FIXTURES_DIR / "gpu_transformer"),
        "--module",
        "jit_train_step",
        "--chip",
        "h200",
    )
    assert report["chip"] == "h200" and report["hbm_bytes"] == 141e9
    (entry,) = report["memory"]
    assert entry["headroom_bytes"] == 141e9 - entry["peak_bytes"]


def test_bad_inputs_exit_2_with_a_message(capsys, tmp_path: Path) -> None:
    assert main(["memory", str(tmp_path / "missing")]) == 2
    assert "profan: error" in capsys.readouterr().err
    assert main(["memory", str(FIXTURES_DIR / "mlp"), "--module", "nope"]) == 2
    assert "no program named 'nope'" in capsys.readouterr().err
    bad = tmp_path / "bad.txt"
    bad.write_text("HloModule broken\n\nENTRY %e {\n  ROOT %x = f32[ parameter(0)\n}\n")
    assert main(["memory", str(bad)]) == 2
    assert "bad.txt" in capsys.readouterr().err
    assert main(["memory", str(FIXTURES_DIR / "mlp"), "--chip", "no-such-chip"]) == 2


def test_json_trace_without_xplane_is_a_clear_error(capsys, tmp_path: Path) -> None:
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    (json_trace,) = (FIXTURES_DIR / "mlp" / "trace").rglob("*.trace.json.gz")
    (run / json_trace.name).write_bytes(json_trace.read_bytes())
    assert main(["memory", str(tmp_path)]) == 2
    assert "xplane" in capsys.readouterr().err


def test_nothing_is_written_near_the_trace(tmp_path: Path, capsys) -> None:
    import shutil

    copy = tmp_path / "mlp"
    shutil.copytree(FIXTURES_DIR / "mlp" / "trace", copy)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    assert main(["memory", str(copy)]) == 0
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before

"""A trace-viewer JSON given alone: the HLO comes from the run's ``.xplane.pb`` beside it; with
none there, the report says so in one line at its top and prints measured times only (no MFU,
no roofline figures, no findings that need the HLO), and ``check`` fails an MFU gate.

The JSON files are the fixtures' own (``vm.trace.json.gz``, written by the same profiler
session as the ``.xplane.pb`` beside them); the events are counted in the test from the JSON.
A JSON alone is a copy in ``tmp_path``: nothing is written into ``fixtures/``.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

import profan
from profan.cli import main

_TOP_LINE = "no HLO: "


def _json_of(fixtures_dir: Path, name: str) -> Path:
    (path,) = (fixtures_dir / name / "trace").glob("plugins/profile/*/vm.trace.json.gz")
    return path


def _alone(fixtures_dir: Path, name: str, tmp_path: Path) -> Path:
    (tmp_path / "alone").mkdir()
    copy = tmp_path / "alone" / "vm.trace.json.gz"
    shutil.copyfile(_json_of(fixtures_dir, name), copy)
    return copy


def _cpu_op_times(path: Path) -> dict[str, float]:
    """Seconds per ``hlo_op`` of the JSON's op events (CPU: the host's events with ``hlo_op``)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    out: dict[str, float] = defaultdict(float)
    for event in events:
        if event.get("ph") == "X" and "hlo_op" in (event.get("args") or {}):
            out[event["args"]["hlo_op"]] += float(event["dur"]) * 1e-6
    return dict(out)


def _report(path: Path, fmt: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["report", str(path), "--format", fmt, "--top", "500", *extra]) == 0
    return capsys.readouterr().out


def test_the_hlo_comes_from_the_xplane_beside_the_json(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _json_of(fixtures_dir, "transformer")
    profile = profan.load(path)
    assert profile.modules  # the xplane's embedded HloProto
    assert profile.unmatched == [] and profile.ops["matched"].all()
    (note,) = [n for n in profile.notes if "beside the JSON" in n]
    assert "vm.xplane.pb" in note
    raw = _cpu_op_times(path)
    assert len(profile.ops) > 6000
    ops = profile.ops.groupby("op_name", observed=True)["duration_s"].sum()
    assert set(ops.index) == set(raw)
    assert max(abs(ops[name] - seconds) for name, seconds in raw.items()) < 1e-9
    data = json.loads(_report(path, "json", capsys))
    assert "hlo_missing" not in data["trace"]
    # the same MFU as the report of the run's .xplane.pb (the same HLO, other event files)
    reference = json.loads(_report(fixtures_dir / "transformer" / "trace", "json", capsys))
    assert data["summary"]["mfu"] == pytest.approx(reference["summary"]["mfu"], rel=0.02)
    assert data["summary"]["mfu"] > 0


@pytest.mark.parametrize("name", ["transformer", "mlp", "gpu_transformer_nocb"])
def test_a_json_alone_says_its_hlo_is_missing_in_every_format(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = _alone(fixtures_dir, name, tmp_path)
    extra = ["--chip", "h100"] if name.startswith("gpu") else []
    data = json.loads(_report(path, "json", capsys, *extra))
    missing = data["trace"]["hlo_missing"]
    assert missing.startswith(_TOP_LINE) and "--hlo DIR" in missing and ".xplane.pb" in missing
    assert data["summary"].get("mfu") is None
    assert {f["rule"] for f in data["findings"]} <= {"idle-gaps", "straggler-host"}
    # the measured times still print: every op event of the JSON, in seconds
    assert data["ops"] and sum(op["measured_s"] for op in data["ops"]) > 0
    if not name.startswith("gpu"):
        raw = _cpu_op_times(path)
        assert sum(op["measured_s"] for op in data["ops"]) == pytest.approx(sum(raw.values()))
    term = _report(path, "term", capsys, *extra).splitlines()
    assert _TOP_LINE in term[1] and sum(_TOP_LINE in line for line in term) == 1
    assert not [line for line in term if line.startswith("MFU")]
    markdown = _report(path, "md", capsys, *extra)
    head = markdown.split("## ")[0]
    assert head.count(_TOP_LINE) == 1 and "| MFU |" not in markdown
    out = tmp_path / "html"
    assert main(["report", str(path), "--format", "html", "--out", str(out), *extra]) == 0
    capsys.readouterr()
    (page,) = out.glob("*.html")
    header = page.read_text().split("</header>")[0]
    assert _TOP_LINE in header and ">MFU<" not in header
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # nothing written beside it


def test_check_fails_an_mfu_gate_on_a_json_alone(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _alone(fixtures_dir, "transformer", tmp_path)
    budget = tmp_path / "profan.toml"
    budget.write_text("[budget]\nmfu_min = 0.0\n")
    assert main(["check", str(path), "--budget", str(budget)]) == 1
    lines = capsys.readouterr().out.splitlines()
    (failed,) = [line for line in lines if line.startswith("FAIL")]
    assert "HLO" in failed and "--hlo" in failed
    # beside its .xplane.pb, the same JSON passes that gate
    assert main(["check", str(_json_of(fixtures_dir, "transformer")), "--budget", str(budget)]) == 0


@pytest.mark.parametrize("name", ["gpu_transformer", "gpu_transformer_nocb_h200"])
def test_a_gpu_json_takes_device_stats_not_hlo_from_the_xplane_beside_it(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A GPU JSON has an event per kernel, not per op execution: its HLO would count an op's
    FLOPs once per kernel, so the report points to the .xplane.pb instead."""
    path = _json_of(fixtures_dir, name)
    data = json.loads(_report(path, "json", capsys))
    assert data["chip"]["name"] == ("h200" if name.endswith("h200") else "h100")
    assert data["trace"]["hlo_missing"].startswith(_TOP_LINE)
    assert data["summary"].get("mfu") is None
    profile = profan.load(path)
    (note,) = [n for n in profile.notes if "beside the JSON" in n]
    assert "not its HLO" in note


_ROOFLINE_COLUMNS = ("ideal", "bound", "eff", "FLOPs", "bytes")


@pytest.mark.parametrize("name", ["transformer", "gpu_transformer_nocb"])
def test_a_json_alone_prints_no_roofline_columns_and_its_unmatched_time(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """No HLO, no ideal, bound, efficiency, FLOPs or bytes (they were '0 s / unknown / - / ?'),
    no time by bound (all 'unknown'), and the unmatched events' own time (was '0 s': the ops'
    sum counted them as matched)."""
    path = _alone(fixtures_dir, name, tmp_path)
    extra = ["--chip", "h100"] if name.startswith("gpu") else []
    data = json.loads(_report(path, "json", capsys, *extra))
    s = data["summary"]
    unmatched_events = sum(u["count"] for u in data["unmatched"])
    assert unmatched_events > 1000  # every op event of the JSON: there is no HLO to join to
    assert s["unmatched_op_time_s"] == pytest.approx(s["total_op_time_s"]) and s["total_op_time_s"]
    assert s["matched_op_time_s"] == pytest.approx(0.0, abs=1e-12)
    if not name.startswith("gpu"):
        assert s["unmatched_op_time_s"] == pytest.approx(sum(_cpu_op_times(path).values()))
    term = _report(path, "term", capsys, *extra)
    (header,) = [line for line in term.splitlines() if line.startswith("op ")]
    assert header.split()[:4] == ["op", "category", "n", "measured"]
    assert not set(header.split()) & set(_ROOFLINE_COLUMNS)
    assert "time by bound" not in term and "ideal, FLOPs" not in term
    assert "not shown at" not in term  # left out, not hidden for want of room
    (line,) = [line for line in term.splitlines() if line.startswith("Unmatched:")]
    assert line.startswith(f"Unmatched: {unmatched_events} op events (")
    assert "(0 s," not in line
    markdown = _report(path, "md", capsys, *extra)
    (table_head,) = [line for line in markdown.splitlines() if line.startswith("| op |")]
    assert not {cell.strip() for cell in table_head.split("|")} & set(_ROOFLINE_COLUMNS)
    assert "## Time by bound" not in markdown and "ideal, FLOPs" not in markdown
    out = tmp_path / "html"
    assert main(["report", str(path), "--format", "html", "--out", str(out), *extra]) == 0
    capsys.readouterr()
    (page,) = out.glob("*.html")
    html = page.read_text()
    header = html.split("</header>")[0]
    assert "class='bound-row'" not in header and "time by category" in header
    assert "Measured: summed" in html and "Measured, ideal, FLOPs" not in html


def test_a_report_joined_to_hlo_keeps_its_roofline_columns(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = fixtures_dir / "transformer" / "trace"
    data = json.loads(_report(path, "json", capsys))
    assert data["summary"]["unmatched_op_time_s"] == 0.0 and not data["unmatched"]
    term = _report(path, "term", capsys)
    (header,) = [line for line in term.splitlines() if line.startswith("op ")]
    assert {"ideal", "bound", "eff"} <= set(header.split())
    assert "time by bound" in term
    assert "## Time by bound" in _report(path, "md", capsys)

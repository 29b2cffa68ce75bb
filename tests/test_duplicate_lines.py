"""A line that is in the file twice, byte for byte, is read once and said (profan.trace.space).

Lines of one id are one timeline (xplane.proto), so a copy of a line adds every event a second
time: the long fuzz run (benchmarks/README.md) turned the matmul trace's op line into two and got
exit 0 with its MFU 0.273 -> 0.479.  Here that mutation is made with protobuf on the real
fixture (``synthetic_duplicated_line``): the report must equal the original's, with a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from profan.cli import main
from tests.raw_xplane import inspect_xplane

pytestmark = pytest.mark.usefixtures("private_cache")


def _report(trace: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["report", "--format", "json", "--top", "100000", str(trace)]) == 0
    return json.loads(capsys.readouterr().out)


def _ops(report: dict, *fields: str) -> dict[tuple[str, str], tuple]:
    return {(op["program"], op["name"]): tuple(op[f] for f in fields) for op in report["ops"]}


def _op_line(space: Any) -> tuple[Any, Any]:
    """The plane and line holding the most op events (events with an ``hlo_op`` stat)."""

    def op_events(plane: Any, line: Any) -> int:
        ids = {key for key, meta in plane.stat_metadata.items() if meta.name == "hlo_op"}
        return sum(any(stat.metadata_id in ids for stat in event.stats) for event in line.events)

    return max(
        ((plane, line) for plane in space.planes for line in plane.lines),
        key=lambda pair: op_events(*pair),
    )


def _with_a_copied_line(source: Path, target: Path) -> str:
    """``source``'s trace folder copied to ``target`` with its busiest line's bytes twice."""
    shutil.copytree(source, target)
    (xplane,) = target.rglob("*.xplane.pb")
    space = inspect_xplane().read_xspace(str(xplane))
    plane, line = _op_line(space)
    plane.lines.add().CopyFrom(line)
    xplane.write_bytes(space.SerializeToString())
    return line.name


def test_a_copied_line_is_read_once_and_said(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = _report(fixtures_dir / "matmul" / "trace", capsys)
    name = _with_a_copied_line(
        fixtures_dir / "matmul" / "trace", tmp_path / "synthetic_duplicated_line"
    )
    copied = _report(tmp_path / "synthetic_duplicated_line", capsys)
    assert _ops(copied, "occurrences", "measured_s") == _ops(original, "occurrences", "measured_s")
    for figure in ("mfu", "matched_op_time_s", "total_op_time_s", "step_time_median_s"):
        assert copied["summary"][figure] == original["summary"][figure], figure
    notes = [note for note in copied["trace"]["notes"] if "twice, byte for byte" in note]
    assert len(notes) == 1 and repr(name) in notes[0], copied["trace"]["notes"]
    assert not [n for n in original["trace"]["notes"] if "twice" in n]


def test_two_lines_of_one_timeline_with_different_events_are_both_read(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a copy: the same line's events split over two lines (what the schema allows) give
    the original's figures too, with no note."""
    original = _report(fixtures_dir / "matmul" / "trace", capsys)
    target = tmp_path / "synthetic_split_line"
    shutil.copytree(fixtures_dir / "matmul" / "trace", target)
    (xplane,) = target.rglob("*.xplane.pb")
    space = inspect_xplane().read_xspace(str(xplane))
    plane, line = _op_line(space)
    second = plane.lines.add()
    second.CopyFrom(line)
    half = len(line.events) // 2
    del line.events[half:]
    del second.events[:half]
    xplane.write_bytes(space.SerializeToString())
    split = _report(target, capsys)
    assert _ops(split, "occurrences") == _ops(original, "occurrences")
    assert split["summary"]["matched_op_time_s"] == pytest.approx(
        original["summary"]["matched_op_time_s"]
    )
    assert not [n for n in split["trace"]["notes"] if "twice" in n]

"""The readers' notes (where the measured side came from) reach every report format.

``Profile.notes`` say how the trace was read: TPU op times from the device's clock, which rule
joined a CUDA-graph kernel whose sanitized name fits two instructions, the HLO taken from the
``.xplane.pb`` beside a trace-viewer JSON.  The JSON report carries them (``trace.notes``, each
once); terminal, Markdown and HTML list the first ten and count the rest.  What a note says is
checked here against the raw trace (read with protobuf alone, ``fixtures/inspect_xplane.py``)
and the HLO dump's text, not against profan's own output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.cli import main
from profan.report.model import Report
from profan.report.render import markdown, terminal
from profan.report.render.html.header import header_html
from tests.conftest import FIXTURES_DIR
from tests.raw_xplane import inspect_xplane

DEVICE_CLOCK = "op times from the device's own clock"
COMMAND_BUFFER_RULE = "kernel loop_broadcast_fusion_1 is the sanitized name of"


def _raw_event_names_and_stats(trace: Path, plane_prefix: str) -> tuple[set[str], set[str]]:
    """The event names and stat names of the planes whose name starts with ``plane_prefix``."""
    ix = inspect_xplane()
    names: set[str] = set()
    stats: set[str] = set()
    for plane in ix.read_xspace(str(trace)).planes:
        if not plane.name.startswith(plane_prefix):
            continue
        stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                names.add(plane.event_metadata[event.metadata_id].name)
                stats.update(stat_names.get(stat.metadata_id, "?") for stat in event.stats)
    return names, stats


def _outputs(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The report in every format (HTML: the page's header)."""
    out: dict[str, str] = {}
    for fmt in ("json", "term", "md"):
        assert main(["report", *args, "--format", fmt]) == 0
        out[fmt] = capsys.readouterr().out
    page_dir = tmp_path / "html"
    assert main(["report", *args, "--format", "html", "--out", str(page_dir)]) == 0
    capsys.readouterr()
    (page,) = page_dir.glob("*.html")
    out["html"] = page.read_text().split("</header>")[0]
    return out


def _assert_in_every_format(outputs: dict[str, str], words: str) -> None:
    notes = json.loads(outputs["json"])["trace"]["notes"]
    assert len(notes) == len(set(notes))  # each once
    assert [note for note in notes if words in note], notes
    terminal_text = " ".join(outputs["term"].split())  # wrapped: joined again
    assert "Notes (how the trace was read)" in outputs["term"] and words in terminal_text
    assert "## Notes (how the trace was read)" in outputs["md"] and words in outputs["md"]
    assert words.replace("'", "&#x27;") in outputs["html"]


def test_the_device_clock_note_on_the_v6e_trace(
    corpus_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"
    if not trace.exists():
        pytest.skip(f"{trace} is not there")
    # the note is true of the raw trace: its TPU op events carry the device's own clock
    _, stats = _raw_event_names_and_stats(trace, "/device:TPU:")
    assert {"device_offset_ps", "device_duration_ps"} <= stats
    _assert_in_every_format(_outputs([str(trace)], tmp_path, capsys), DEVICE_CLOCK)


def test_the_command_buffer_rule_note_on_gpu_transformer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = FIXTURES_DIR / "gpu_transformer"
    hlo = folder / "hlo"
    # the collision the note explains is in the inputs: a kernel of that name ran in a command
    # buffer, and the HLO dump has an instruction of each name that sanitizes to it
    (trace,) = (folder / "trace").rglob("*.xplane.pb")
    kernels, _ = _raw_event_names_and_stats(trace, "/device:GPU:")
    assert "loop_broadcast_fusion_1" in kernels
    (text,) = [p.read_text() for p in hlo.glob("*after_optimizations.txt")]
    assert re.search(r"\bloop_broadcast_fusion\.1 = ", text)
    assert "loop_broadcast_fusion#1" in text
    outputs = _outputs([str(folder), "--hlo", str(hlo)], tmp_path, capsys)
    _assert_in_every_format(outputs, COMMAND_BUFFER_RULE)
    (note,) = [n for n in json.loads(outputs["json"])["trace"]["notes"] if COMMAND_BUFFER_RULE in n]
    assert note.endswith("joined to loop_broadcast_fusion.1 (loop_broadcast_fusion#1 "
                         "(get-tuple-element) launches no kernel)")  # fmt: skip


def test_past_ten_notes_the_text_formats_count_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(FIXTURES_DIR / "matmul"), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    data["trace"]["notes"] = [f"note number {i}" for i in range(13)]
    report = Report.from_dict(data)
    text = terminal.render(report)
    assert "note number 9" in text and "note number 10" not in text
    assert "… and 3 more (JSON: trace.notes)" in text
    md = markdown.render(report)
    assert "- note number 9\n- … and 3 more (JSON: trace.notes)" in md
    header = header_html(report)
    assert "how the trace was read): 13" in header and header.count("<li>note number") == 10
    # no notes: no section
    data["trace"]["notes"] = []
    bare = Report.from_dict(data)
    assert "Notes (" not in terminal.render(bare) + markdown.render(bare) + header_html(bare)

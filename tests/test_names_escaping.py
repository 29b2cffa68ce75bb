"""Names from a trace are data (issue 26, B10): no name steers the terminal, a CI log, Markdown
or JUnit XML, whatever characters it holds.

The trace is synthetic: the real matmul fixture's xplane with its one op (``ynn_fusion``) renamed
to a hostile name in the events, their stats and the embedded HloProto, and the source file of
its stack frames renamed too (a newline, ESC and OSC sequences, BEL, NUL, CR, a vertical tab,
HTML, a backtick, a pipe, brackets, ``%``, ``,`` and ``:``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from profan.trace.schema import load_schema

HOSTILE = "ynn\nPASS  all: ok\x1b[31m\x1b]8;;http://x\x07<svg onload=alert(1)>`|[a](b)\x0b%,:\r\x00"
HOSTILE_FILE = "src/<svg onload=alert(1)>\n`x`|\x1b]0;t\x07.py"
# What no output may hold: C0 controls but LF (the renderers' own line ends) and the colour
# codes profan does not print without a terminal, DEL, C1 controls.
CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def _rename(space_bytes: bytes) -> bytes:
    xplane, hlo = load_schema("xplane.proto"), load_schema("hlo.proto")
    space = xplane["tensorflow.profiler.XSpace"]()
    space.ParseFromString(space_bytes)
    for plane in space.planes:
        for stat_meta in plane.stat_metadata.values():  # (string stats held by reference)
            if stat_meta.name == "ynn_fusion":
                stat_meta.name = HOSTILE
        for meta in plane.event_metadata.values():
            meta.name = meta.name.replace("ynn_fusion", HOSTILE)
            meta.display_name = meta.display_name.replace("ynn_fusion", HOSTILE)
            for stat in meta.stats:
                if plane.stat_metadata[stat.metadata_id].name != "Hlo Proto":
                    continue
                proto = hlo["xla.HloProto"]()
                proto.ParseFromString(stat.bytes_value)
                for computation in proto.hlo_module.computations:
                    for instruction in computation.instructions:
                        if instruction.name == "ynn_fusion":
                            instruction.name = HOSTILE
                files = proto.hlo_module.stack_frame_index.file_names
                for index, name in enumerate(files):
                    if name.endswith("make_fixtures.py"):
                        files[index] = HOSTILE_FILE
                stat.bytes_value = proto.SerializeToString()
        for line in plane.lines:
            for event in line.events:
                for stat in event.stats:
                    if stat.str_value == "ynn_fusion":
                        stat.str_value = HOSTILE
    return space.SerializeToString()


@pytest.fixture(scope="module")
def synthetic_hostile_trace(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    (source,) = (fixtures_dir / "matmul" / "trace").rglob("*.xplane.pb")
    trace = tmp_path_factory.mktemp("hostile") / "trace"
    run = trace / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(_rename(source.read_bytes()))
    return trace


def _profan(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "profan", *args, *(["--no-cache"] if args[0] != "memory" else [])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return done


def _no_controls(text: str) -> None:
    found = sorted({hex(ord(c)) for c in CONTROLS.findall(text)})
    assert not found, f"control characters in the output: {found}"


def test_synthetic_hostile_names_reach_the_trace(synthetic_hostile_trace: Path) -> None:
    """The test means something: the JSON report (which keeps names as they are) holds them."""
    import json

    report = json.loads(_profan("report", str(synthetic_hostile_trace), "--format", "json").stdout)
    assert HOSTILE in {op["name"] for op in report["ops"]}
    assert any(HOSTILE_FILE in (op.get("source") or "") for op in report["ops"])


@pytest.mark.parametrize(
    "command",
    [["report"], ["annotate"], ["memory"], ["memory", "--format", "md"], ["diff", "TRACE"]],
    ids=["report", "annotate", "memory", "memory-md", "diff"],
)
def test_synthetic_hostile_names_as_text(synthetic_hostile_trace: Path, command: list[str]) -> None:
    trace = str(synthetic_hostile_trace)
    args = [trace if word == "TRACE" else word for word in command]
    text = _profan(args[0], trace, *args[1:]).stdout
    _no_controls(text)
    if command[0] != "annotate":  # (its HLO text breaks a line at a newline in a name)
        assert not any(line.startswith("PASS") for line in text.splitlines())
    if command[0] in ("report", "memory") and command[1:] == []:
        assert r"ynn\nPASS" in text  # the name, shown escaped


def test_synthetic_hostile_names_in_check_github_and_junit(
    synthetic_hostile_trace: Path, tmp_path: Path
) -> None:
    budget = tmp_path / "profan.toml"
    budget.write_text(
        '[budget]\nmfu_min = 0.99\n[[budget.ops]]\nmatch = "*ynn*"\nmin_efficiency = 0.99\n',
        encoding="utf-8",
    )
    junit = tmp_path / "results.xml"
    trace = str(synthetic_hostile_trace)
    done = _profan("check", trace, "--budget", str(budget), "--github", "--junit", str(junit))
    _no_controls(done.stdout)
    lines = done.stdout.splitlines()
    assert all(
        line.startswith(("PASS  ", "FAIL  ", "profan check: ", "::error ")) for line in lines
    )
    assert sum(line.startswith("FAIL  ops[") for line in lines) == 1  # one line per result
    annotation = next(line for line in lines if "ops[" in line and line.startswith("::error"))
    properties, _, message = annotation[len("::error ") :].partition("::")
    # GitHub's escaping: properties split on ',' and '=' only where profan put them
    assert [part.split("=", 1)[0] for part in properties.split(",")] == ["file", "line", "title"]
    assert "%0A" in message and "%25" in message
    # JUnit: parses, and the test case names the op (XML-forbidden characters shown escaped)
    cases = ElementTree.parse(junit).getroot().iter("testcase")
    names = [case.get("name") or "" for case in cases]
    assert any("<svg onload=alert(1)>" in name and r"\x00" in name for name in names)


def _cells(row: str) -> list[str]:
    return re.split(r"(?<!\\)\|", row.strip().strip("|"))


def test_synthetic_hostile_names_in_markdown(synthetic_hostile_trace: Path) -> None:
    text = _profan("report", str(synthetic_hostile_trace), "--format", "md").stdout
    _no_controls(text)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| op | category"))
    columns = _cells(lines[header])
    row = lines[header + 2]
    cells = _cells(row)
    assert len(cells) == len(columns)  # the name's pipe breaks no cell
    op_cell = cells[0].strip()
    fence = re.match(r"`+", op_cell)
    assert fence and op_cell.endswith(fence[0]) and len(fence[0]) > 1  # a backtick ends no span
    source_cell = cells[columns.index(" source ")]
    assert "<" not in source_cell and "&lt;svg" in source_cell  # outside a code span: no tag

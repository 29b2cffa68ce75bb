"""What the long fuzz run (benchmarks/fuzz_long.py, benchmarks/README.md) found, each as the
smallest synthetic input that showed it: exit 2 with one line naming where, never exit 3, a hang
or raw control characters."""

from __future__ import annotations

from pathlib import Path

import pytest

from profan.cli import main
from profan.errors import EXIT_BAD_INPUT

LONG = "1" + "0" * 5000  # 5,001 digits: past Python's int-conversion limit (4,300)
OVER_U64 = "100000000000000000000000"  # past 2**64: msgpack (the parse cache) has no room for it

# A small synthetic module with the stack-frame tables jax writes.
SYNTHETIC_HLO = """\
HloModule synthetic_matmul, entry_computation_layout={(f32[4,8]{1,0}, f32[8,2]{1,0})->f32[4,2]{1,0}}

FileNames
1 "synthetic.py"

FunctionNames
1 "matmul"

FileLocations
1 {file_name_id=1 function_name_id=1 line=LINE end_line=12 column=3 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=0}

ENTRY %main (a: f32[4,8], b: f32[8,2]) -> f32[4,2] {
  %a = f32[4,8]{1,0} parameter(0)
  %b = f32[8,2]{1,0} parameter(1)
  ROOT %dot = f32[4,2]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines, "no error printed"
    assert "bug in profan" not in lines[0], lines[0]
    return lines[0]


def _hlo(tmp_path: Path, text: str) -> str:
    path = tmp_path / "synthetic.hlo.txt"
    path.write_text(text)
    return str(path)


def test_synthetic_module_parses(tmp_path: Path) -> None:
    assert main(["hlo", _hlo(tmp_path, SYNTHETIC_HLO.replace("LINE", "12"))]) == 0


@pytest.mark.parametrize(
    ("old", "new", "at"),
    [
        ("1 {file_location_id", LONG + " {file_location_id", ":13:1:"),  # a table's id
        ("line=12", "line=" + LONG, ":10:43:"),  # a FileLocations field
        ("f32[4,8]{1,0} parameter", f"f32[{LONG},8]{{1,0}} parameter", ":16:12:"),  # a shape
        ("lhs_contracting_dims={1}", f"lhs_contracting_dims={{{LONG}}}", ":18:"),  # an attribute
    ],
)
def test_synthetic_number_past_the_conversion_limit_is_a_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, at: str
) -> None:
    text = SYNTHETIC_HLO.replace("LINE", "12").replace(old, new, 1)
    assert main(["hlo", _hlo(tmp_path, text)]) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert at in line and "number too long (5001 digits)" in line, line


def test_synthetic_file_location_line_past_int64_is_a_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # XLA reads a file location's fields as int64; profan's parse cache held the value and
    # failed to store it (exit 3)
    path = _hlo(tmp_path, SYNTHETIC_HLO.replace("LINE", OVER_U64))
    assert main(["hlo", path]) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert ":10:43: HLO syntax error: " + OVER_U64 + " is beyond int64" in line, line
    # int64's largest passes (the cache stores it), one more does not
    assert main(["hlo", _hlo(tmp_path, SYNTHETIC_HLO.replace("LINE", str(2**63 - 1)))]) == 0
    capsys.readouterr()
    assert main(["hlo", _hlo(tmp_path, SYNTHETIC_HLO.replace("LINE", str(2**63)))]) == 2


def test_synthetic_layout_tile_past_int64_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = SYNTHETIC_HLO.replace("LINE", "12").replace(
        "%a = f32[4,8]{1,0}", f"%a = f32[4,8]{{1,0:T({OVER_U64})}}"
    )
    assert main(["hlo", _hlo(tmp_path, text)]) == EXIT_BAD_INPUT
    assert f"{OVER_U64} is beyond int64" in _error_line(capsys)


@pytest.mark.parametrize(
    ("option", "name", "text", "where"),
    [
        ("--baseline", "synthetic-baseline.json", '{"format": ' + LONG + "}", ":1:12: format: "),
        ("--budget", "synthetic-budget.toml", "[budget]\nmax_suspicious = " + LONG, ":2:18: "),
    ],
)
def test_synthetic_config_number_past_the_conversion_limit_is_an_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fixtures_dir: Path,
    option: str,
    name: str,
    text: str,
    where: str,
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main(["check", str(fixtures_dir / "matmul"), option, str(path)]) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert f"{path}{where}" in line and "number too long (5001 digits" in line, line
    if option == "--budget":
        assert "max_suspicious: number too long" in line, line


def test_synthetic_budget_file_past_the_size_cap_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixtures_dir: Path
) -> None:
    # a megabyte-long [[budget.ops]] glob took fnmatch 10.7 s and 253 MB per op: a TOML file
    # past 1 MiB is refused before it is decoded, naming the file and the cap
    path = tmp_path / "synthetic-budget.toml"
    path.write_text('[budget]\n[[budget.ops]]\nmatch = "' + "*a" * (1 << 19) + '"\n')
    assert main(["check", str(fixtures_dir / "matmul"), "--budget", str(path)]) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert line.startswith(f"profan: error: {path}: the budget is larger than 1 MiB"), line


@pytest.mark.parametrize(
    ("command", "option", "text", "key"),
    [
        ("check", "--budget", '[budget]\n[[budget.ops]]\nmatch = "{}"\n', "budget.ops[0].match"),
        ("report", "--kernels", '[kernels.k]\ntargets = ["{}"]\nmodel = "opaque"\n',
         "kernels.k.targets[0]"),
    ],
)  # fmt: skip
def test_synthetic_glob_past_the_length_cap_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fixtures_dir: Path,
    command: str,
    option: str,
    text: str,
    key: str,
) -> None:
    path = tmp_path / "synthetic.toml"
    argv = [command, str(fixtures_dir / "matmul"), option, str(path)]
    path.write_text(text.replace("{}", "*a" * 500 + "*"))  # 1,001 characters
    assert main(argv) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert f"{path}: {key}: must be a string of length <= 1000" in line, line
    # 1,000 characters are a pattern like any other
    path.write_text(text.replace("{}", "*a" * 500))
    assert main(argv) != EXIT_BAD_INPUT, capsys.readouterr().err


def test_synthetic_plane_names_with_controls_are_escaped_in_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixtures_dir: Path
) -> None:
    # 'no op executions ... (planes found: ...)' printed the trace's plane names raw: a control
    # character in one reached the terminal
    from profan.trace.schema import load_schema

    (source,) = (fixtures_dir / "matmul" / "trace").rglob("*.xplane.pb")
    space = load_schema("xplane.proto")["tensorflow.profiler.XSpace"]()
    space.ParseFromString(source.read_bytes())
    for index, plane in enumerate(space.planes):
        plane.name = f"\x08\r\x1b[31m\x1b]0;t\x07plane{index}\n"
    path = tmp_path / "synthetic.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert main(["report", "--no-cache", str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not any(c < " " for c in err.rstrip("\n")), repr(err)
    assert "(planes found: \\x08\\r\\x1b[31m\\x1b]0;t\\x07plane0\\n" in err, err


@pytest.mark.parametrize(
    ("fixture", "plane"), [("gpu_kernels", "/device:GPU:0"), ("matmul", "/host:CPU")]
)
def test_synthetic_hlo_op_naming_no_stat_metadata_is_no_op_execution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixtures_dir: Path, fixture: str, plane: str
) -> None:
    # an hlo_op stat held as a reference to no stat metadata made the op's name NaN, and the
    # report fell over it (exit 3): such an event is left out, with a note saying how many
    from profan.trace.schema import load_schema

    (source,) = (fixtures_dir / fixture / "trace").rglob("*.xplane.pb")
    space = load_schema("xplane.proto")["tensorflow.profiler.XSpace"]()
    space.ParseFromString(source.read_bytes())
    (target,) = [p for p in space.planes if p.name == plane]
    (hlo_op,) = [key for key, meta in target.stat_metadata.items() if meta.name == "hlo_op"]
    dangling = max(target.stat_metadata) + 1000
    stats = [
        s for line in target.lines for e in line.events for s in e.stats if s.metadata_id == hlo_op
    ]
    for stat in stats[::2]:  # every other op event: the rest still join
        stat.ref_value = dangling
    assert len(stats) > 1
    path = tmp_path / "synthetic.xplane.pb"
    path.write_bytes(space.SerializeToString())
    assert main(["report", "--no-cache", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{plane}: " in out and "whose hlo_op stat names nothing" in out, out

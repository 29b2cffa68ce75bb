"""Every configuration file is read one strict way (issue 26: B6, C11, D18).

Budgets, ``--chips``, ``--kernels`` (and ``$PROFAN_CHIPS`` / ``$PROFAN_KERNELS``), baselines and
JSON reports: text that is not UTF-8, a byte-order mark, deep nesting, numbers that are not
finite and fields of the wrong type are exit 2 with one line naming the file and where in it —
never ignored, never exit 3.  The files are the packaged ones (profan/data) or ones profan wrote
from real fixtures, re-encoded or edited in tmp_path.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from profan.cli import main
from profan.errors import EXIT_BAD_INPUT, ConfigError
from profan.paths import data_path

KERNELS = data_path("kernels.toml")
CHIPS = data_path("chips.toml")


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line the CLI printed on stderr."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "bug in profan" not in lines[0]
    return lines[0]


def _latin1(text: str) -> bytes:
    """``text`` with a Latin-1 accent in its first comment (an editor's non-UTF-8 save)."""
    return ("# profan, café\n" + text).encode("latin-1")


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_kernels_file_from_the_environment_not_utf8_is_an_error(
    encoding: str,
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """B6: it was ignored, every custom call turned "cost unknown" and the run exited 0."""
    kernels = tmp_path / "kernels.toml"
    text = KERNELS.read_text(encoding="utf-8")
    kernels.write_bytes(text.encode("utf-16") if encoding == "utf-16" else _latin1(text))
    monkeypatch.setenv("PROFAN_KERNELS", str(kernels))
    code = main(["report", str(fixtures_dir / "gpu_kernels"), "--format", "json", "--no-cache"])
    line = _error_line(capsys)
    assert code == EXIT_BAD_INPUT
    assert str(kernels) in line and "UTF-8" in line
    if encoding == "latin-1":
        assert f"{kernels}:1:" in line  # where: the first line, at the accent


def test_chips_and_kernels_options_not_utf8(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chips = tmp_path / "chips.toml"
    chips.write_bytes(CHIPS.read_text(encoding="utf-8").encode("utf-16"))
    kernels = tmp_path / "kernels.toml"
    kernels.write_bytes(_latin1(KERNELS.read_text(encoding="utf-8")))
    trace = str(fixtures_dir / "matmul")
    assert main(["report", trace, "--chips", str(chips)]) == EXIT_BAD_INPUT
    assert "UTF-16" in _error_line(capsys)
    assert main(["report", trace, "--kernels", str(kernels)]) == EXIT_BAD_INPUT
    assert f"{kernels}:1:" in _error_line(capsys)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("latin1", "[budget]\nstep_time_s = 1.0 # café\n".encode("latin-1"), ":2:24: "),
        ("bom", b"\xef\xbb\xbf[budget]\nstep_time_s = 1.0\n", "byte-order mark"),
        ("deep", ("a = " + "[" * 2000 + "]" * 2000 + "\n").encode(), "nests deeper"),
        ("inf", b"[budget]\nstep_time_s = inf\n", "budget.step_time_s: inf is not a finite"),
    ],
)
def test_budget_files_that_cannot_be_decoded(
    name: str,
    content: bytes,
    expected: str,
    fixtures_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    budget = tmp_path / f"{name}.toml"
    budget.write_bytes(content)
    code = main(["check", str(fixtures_dir / "matmul"), "--budget", str(budget)])
    line = _error_line(capsys)
    assert code == EXIT_BAD_INPUT
    assert line.startswith(f"profan: error: {budget}") and expected in line
    # D18: a BOM used to read "Invalid statement (at line 1, column 1)" of a line that is fine
    assert "Invalid statement" not in line


def test_decode_errors_say_line_and_column() -> None:
    from profan.tomlschema import MAX_NESTING, decode_config

    with pytest.raises(ConfigError, match=r"^f\.toml:2:5: not valid TOML: "):
        decode_config(b"a = 1\nb = = 2\n", origin="f.toml", what="x", syntax="toml")
    with pytest.raises(ConfigError, match=r"^f\.json:3:1: not valid JSON: "):
        decode_config(b'{\n"a": 1,\n}', origin="f.json", what="x", syntax="json")
    with pytest.raises(ConfigError, match=r"^f\.json: not valid JSON: NaN is not a number"):
        decode_config(b'{"a": NaN}', origin="f.json", what="x", syntax="json")
    with pytest.raises(ConfigError, match=r"^f\.json: a\[1\]: inf is not a finite number"):
        decode_config(b'{"a": [1, 1e400]}', origin="f.json", what="x", syntax="json")
    nested = b'{"a":' * MAX_NESTING + b"1" + b"}" * MAX_NESTING
    decode_config(nested, origin="f.json", what="x", syntax="json")  # the bound itself: read
    with pytest.raises(ConfigError, match="nests deeper than"):
        decode_config(b"[" + nested + b"]", origin="f.json", what="x", syntax="json")


@pytest.fixture(scope="module")
def recorded_baseline(fixtures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-machine baseline profan recorded from the matmul fixture."""
    folder = tmp_path_factory.mktemp("baseline")
    budget = folder / "profan.toml"
    budget.write_text("[budget]\n")
    path = folder / "baseline.json"
    argv = ["check", str(fixtures_dir / "matmul"), "--budget", str(budget)]
    assert main([*argv, "--baseline", str(path), "--update-baseline"]) == 0
    return path


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("steps", "3", "machines.CPU/cpu.steps: must be a whole number, got a string"),
        ("step_min_s", -0.5, "machines.CPU/cpu.step_min_s: must be a number >= 0"),
        ("device_count", None, "machines.CPU/cpu.device_count: must be a whole number"),
        ("totals", [], "machines.CPU/cpu.totals: must be a table"),
        ("ops", [{"key": 1}], "machines.CPU/cpu.ops[0].key: must be a string"),
    ],
)
def test_malformed_baseline_fields(
    field: str,
    value: object,
    expected: str,
    recorded_baseline: Path,
    fixtures_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = json.loads(recorded_baseline.read_text(encoding="utf-8"))
    assert list(data["machines"]) == ["CPU/cpu"]
    data["machines"]["CPU/cpu"][field] = value
    edited = tmp_path / "baseline.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    budget = tmp_path / "profan.toml"
    budget.write_text("[budget]\n")
    argv = ["check", str(fixtures_dir / "matmul"), "--budget", str(budget)]
    assert main([*argv, "--baseline", str(edited)]) == EXIT_BAD_INPUT
    line = _error_line(capsys)
    assert str(edited) in line and expected in line


def test_version_strings_are_named_as_strings(
    recorded_baseline: Path, fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """D18: ``"version": "1"`` read "version '1' is not supported (this profan reads 1)"."""
    from profan.report.analysis.pipeline import read_json_report
    from profan.report.check.baseline import read_baselines

    data = json.loads(recorded_baseline.read_text(encoding="utf-8"))
    data["version"] = "1"
    edited = tmp_path / "baseline.json"
    edited.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=r'version: must be a whole number .*got "1"') as caught:
        read_baselines(edited)
    assert "not supported" not in str(caught.value)
    capsys.readouterr()
    assert main(["report", str(fixtures_dir / "matmul"), "--format", "json"]) == 0
    report = tmp_path / "report.json"
    report.write_text(capsys.readouterr().out, encoding="utf-8")
    document = json.loads(report.read_text(encoding="utf-8"))
    document["schema_version"] = str(document["schema_version"])
    report.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"schema_version: must be a whole number, got '\d+'"):
        read_json_report(report)


def test_synthetic_trace_json_duration_beyond_float(
    fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """C11: ``"dur": 1e400`` in a trace-viewer JSON decoded to inf and crashed (exit 3)."""
    (source,) = (fixtures_dir / "matmul" / "trace").rglob("*.trace.json.gz")
    text = gzip.decompress(source.read_bytes()).decode()
    events = json.loads(text)["traceEvents"]
    index = next(i for i, e in enumerate(events) if e.get("ph") == "X" and "dur" in e)
    document = json.loads(text)
    document["traceEvents"][index]["dur"] = "DUR"
    edited = json.dumps(document).replace('"DUR"', "1e400")
    run = tmp_path / "trace" / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "vm.trace.json.gz").write_bytes(gzip.compress(edited.encode()))
    code = main(["report", str(tmp_path / "trace"), "--no-cache"])
    line = _error_line(capsys)
    assert code == EXIT_BAD_INPUT
    assert f"traceEvents[{index}].dur" in line and "finite" in line

"""CLI conventions on real fixtures: ``--version``, ``report --sort/--filter`` and ``--format
csv`` (read back by pandas against the JSON report), ``--format`` on ``diff`` and ``annotate``,
``check --baseline`` without ``--budget``, ``diff`` naming both chips, options that do nothing
said so or refused, help texts that list every input form, the narrow terminal's note."""

from __future__ import annotations

import io
import json
from importlib.metadata import version

import pandas as pd
import pytest

from profan.cli import main
from tests.conftest import FIXTURES_DIR

TRANSFORMER = str(FIXTURES_DIR / "transformer")


def run(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(list(words))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def json_ops() -> list[dict]:
    from profan.report.analysis.pipeline import report_for

    return report_for(TRANSFORMER).to_dict()["ops"]


def csv_of(capsys, *words: str) -> pd.DataFrame:
    code, out, err = run(capsys, "report", TRANSFORMER, "--format", "csv", *words)
    assert code == 0, err
    return pd.read_csv(io.StringIO(out))


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"profan {version('profan')}"


def test_csv_has_the_json_reports_rows(capsys, json_ops) -> None:
    table = csv_of(capsys)
    assert table["key"].tolist() == [op["key"] for op in json_ops]
    assert table["measured_s"].tolist() == pytest.approx([op["measured_s"] for op in json_ops])


@pytest.mark.parametrize(
    ("expr", "keep"),
    [
        ("category=matmul", lambda op: op["category"] == "matmul"),
        ("bound=HBM", lambda op: op["bound_by"] == "hbm"),
        ("flag=exposed-collective", lambda op: "exposed-collective" in op["flags"]),
        ("program=jit_train_step", lambda op: op["program"].split("(")[0] == "jit_train_step"),
        (
            "all-reduce",
            lambda op: "all-reduce" in op["label"] or "all-reduce" in (op["source"] or ""),
        ),
    ],
)
def test_filter_keeps_exactly_the_matching_ops(capsys, json_ops, expr, keep) -> None:
    table = csv_of(capsys, "--filter", expr)
    wanted = [op["key"] for op in json_ops if keep(op)]
    assert len(wanted) > 0
    assert table["key"].tolist() == wanted


def test_filters_combine_and_sort_orders(capsys, json_ops) -> None:
    table = csv_of(
        capsys, "--filter", "category=matmul", "--filter", "bound=compute", "--sort", "eff:asc"
    )
    wanted = [op for op in json_ops if op["category"] == "matmul" and op["bound_by"] == "compute"]
    assert sorted(table["key"]) == sorted(op["key"] for op in wanted)
    assert table["efficiency"].dropna().is_monotonic_increasing
    by_flops = csv_of(capsys, "--sort", "flops")
    assert by_flops["flops"].tolist() == sorted((op["flops"] for op in json_ops), reverse=True)


def test_selection_heading_in_markdown(capsys, json_ops) -> None:
    code, out, err = run(
        capsys, "report", TRANSFORMER, "--format", "md", "--filter", "category=matmul",
        "--sort", "eff", "--top", "3",
    )  # fmt: skip
    assert code == 0, err
    matmuls = sum(op["category"] == "matmul" for op in json_ops)
    assert f"## Top 3 of {matmuls} ops where category=matmul (of {len(json_ops)}), by eff" in out


@pytest.mark.parametrize("words", [["--filter", "colour=red"], ["--sort", "nonsense"]])
def test_bad_selection_is_one_line_exit_2(capsys, words) -> None:
    code, out, err = run(capsys, "report", TRANSFORMER, *words)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("profan: error: ")


def test_diff_names_both_chips_and_has_formats(capsys) -> None:
    a, b = str(FIXTURES_DIR / "gpu_transformer"), str(FIXTURES_DIR / "gpu_transformer_h200")
    from profan.report.analysis.pipeline import report_for

    chip_a, chip_b = report_for(a).chip.name, report_for(b).chip.name
    assert chip_a != chip_b
    code, out, err = run(capsys, "diff", a, b, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["a"]["chip"], data["b"]["chip"]) == (chip_a, chip_b)
    assert data["a"]["programs"] and data["a"]["devices"].startswith("1 × GPU")
    code, out, err = run(capsys, "diff", a, b)
    assert f"chip {chip_a}" in out.split("\n")[1] and f"chip {chip_b}" in out.split("\n")[2]
    code, out, err = run(capsys, "diff", a, b, "--format", "md")
    assert out.startswith("# profan diff") and f"| chip | {chip_a} | {chip_b} |" in out


def test_annotate_formats(capsys, json_ops) -> None:
    code, out, err = run(capsys, "annotate", TRANSFORMER, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert sorted(op["key"] for op in data["ops"]) == sorted(op["key"] for op in json_ops)
    assert data["text"].startswith("// profan annotate: module")
    code, out, err = run(capsys, "annotate", TRANSFORMER, "--format", "md")
    assert out.startswith("# profan annotate: module") and "\n```\nHloModule" in out


def test_check_with_a_baseline_alone(capsys, tmp_path) -> None:
    baseline = tmp_path / "report.json"
    code, out, err = run(capsys, "report", TRANSFORMER, "--format", "json", "--out", str(tmp_path))
    assert code == 0 and baseline.is_file(), err
    code, out, err = run(capsys, "check", TRANSFORMER, "--baseline", str(baseline))
    assert code == 0, err
    assert "baseline.step_time" in out and "FAIL" not in out
    code, out, err = run(capsys, "check", TRANSFORMER)
    assert code == 2 and "--budget" in err and "--baseline" in err


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--format", "json", "--plots"], "--plots does nothing without --out"),
        (["--format", "csv", "--top", "3"], "--top does nothing with --format csv"),
    ],
)
def test_options_that_do_nothing_say_so(capsys, words, said) -> None:
    code, _out, err = run(capsys, "report", TRANSFORMER, *words)
    assert code == 0 and said in err


@pytest.mark.parametrize("option", ["--chips", "--kernels"])
def test_cache_refuses_chip_and_kernel_files(capsys, option) -> None:
    with pytest.raises(SystemExit) as done:
        main(["cache", "info", option, "x.toml"])
    assert done.value.code == 2
    assert f"unrecognized arguments: {option}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["report", "annotate", "check", "diff", "export"])
def test_help_lists_every_input_form(capsys, command) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for form in ("directory", "run directory", ".xplane.pb", ".trace.json.gz", "gs://", "s3://"):
        assert form in text, (command, form)


def test_narrow_terminal_names_the_dropped_columns(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    code, out, err = run(capsys, "report", TRANSFORMER, "--top", "3", "--no-cache")
    assert code == 0, err
    table = out[out.index("Top 3 ops") :]
    header = next(line for line in table.split("\n") if line.startswith("op "))
    note = " ".join(table[table.index("(not shown at 100 columns:") :].split("\n")[:2])
    for column in ("FLOPs", "bytes"):
        assert column not in header.split() and column in note

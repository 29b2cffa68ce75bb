"""The Python API as a notebook uses it: ``profan.report(path)`` on a real fixture, its op table
as a DataFrame, the CSV read back by pandas against the JSON report (parsed with ``json``, an
independent reader), the short reprs and the notebook's HTML view; ``profan.load`` on every
form of input the CLI takes."""

from __future__ import annotations

import io
import json
import math

import pandas as pd
import pytest

import profan
from profan.errors import ProfanError
from profan.report.render.ops_table import DERIVED_COLUMNS
from tests.conftest import FIXTURES_DIR

TRANSFORMER = FIXTURES_DIR / "transformer"


@pytest.fixture(scope="module")
def report() -> profan.Report:
    return profan.report(str(TRANSFORMER))


@pytest.fixture(scope="module")
def json_ops(report: profan.Report) -> list[dict]:
    return json.loads(report.to_json())["ops"]


def test_report_is_callable_and_its_package_still_imports() -> None:
    import profan.report.analysis.pipeline as pipeline  # the package of that name, as before

    assert callable(profan.report)
    assert pipeline.report_for is not None


def test_ops_frame_has_one_row_per_json_op_in_order(report, json_ops) -> None:
    ops = report.ops
    assert isinstance(ops, pd.DataFrame)
    assert list(ops["key"]) == [op["key"] for op in json_ops]
    assert set(json_ops[0]) | set(DERIVED_COLUMNS) == set(ops.columns)
    assert ops["measured_s"].dtype == "float64" and ops["occurrences"].dtype == "int64"
    assert isinstance(ops["category"].dtype, pd.CategoricalDtype)
    assert ops["measured_s"].tolist() == [op["measured_s"] for op in json_ops]


def test_sort_values_finds_the_least_efficient_op(report, json_ops) -> None:
    worst = report.ops.sort_values("efficiency").iloc[0]
    known = [op for op in json_ops if op["efficiency"] is not None]
    assert worst["key"] == min(known, key=lambda op: op["efficiency"])["key"]
    # ops without an efficiency are missing values, not zeros
    unknown = sum(op["efficiency"] is None for op in json_ops)
    assert int(report.ops["efficiency"].isna().sum()) == unknown


def test_csv_read_back_by_pandas_has_the_json_rows(report, json_ops) -> None:
    table = pd.read_csv(io.StringIO(report.to_csv()))
    assert len(table) == len(json_ops)
    assert table["key"].tolist() == [op["key"] for op in json_ops]
    for row, op in zip(table.itertuples(), json_ops, strict=True):
        assert math.isclose(row.measured_s, op["measured_s"], rel_tol=1e-12)
        assert (op["efficiency"] is None) == pd.isna(row.efficiency)
        assert json.loads(row.flags) == op["flags"]
        assert row.occurrences == op["occurrences"]


def test_to_csv_writes_a_file_and_never_into_the_trace(report, tmp_path) -> None:
    target = tmp_path / "ops.csv"
    assert report.to_csv(target) is None
    assert target.read_text() == report.to_csv()
    assert not list(tmp_path.glob(".ops.csv.*"))  # the temporary is renamed into place
    with pytest.raises(ProfanError, match="inside"):
        report.to_csv(TRANSFORMER / "trace" / "ops.csv")
    assert not (TRANSFORMER / "trace" / "ops.csv").exists()


def test_repr_is_one_short_line(report, json_ops) -> None:
    data = json.loads(report.to_json())
    text = repr(report)
    assert "\n" not in text and len(text) < 300
    assert f"{len(json_ops)} ops" in text
    assert f"{data['device']['count']} × {data['device']['kind']}" in text
    assert f"{data['summary']['step_count']} steps" in text
    assert data["chip"]["name"] in text


def test_repr_html_shows_the_header_and_top_ops_under_50_kb(report, json_ops) -> None:
    view = report._repr_html_()
    assert len(view.encode()) < 50_000
    assert "<table>" in view and json_ops[0]["label"] in view
    assert json_ops[9]["label"] in view and f"{len(json_ops) - 10} more ops" in view


def test_text_formats_render(report, json_ops) -> None:
    assert report.to_markdown().startswith("# profan report")
    assert json_ops[0]["label"] in report.to_text(width=100)
    assert "<!DOCTYPE html>" in report.to_html()


def test_filter_and_sort_options(json_ops) -> None:
    chosen = profan.report(str(TRANSFORMER), filter="category=matmul", sort="eff:asc")
    matmuls = [op for op in json_ops if op["category"] == "matmul"]
    assert len(chosen.ops) == len(matmuls) > 0
    assert sorted(chosen.ops["key"]) == sorted(op["key"] for op in matmuls)
    assert chosen.ops["efficiency"].is_monotonic_increasing
    assert f"{len(matmuls)} ops (of {len(json_ops)}" in repr(chosen)


def test_bad_option_is_a_profan_error() -> None:
    with pytest.raises(ProfanError, match="unknown key"):
        profan.report(str(TRANSFORMER), filter="colour=red")
    with pytest.raises(ProfanError, match="top"):
        profan.report(str(TRANSFORMER), top=0)


@pytest.mark.parametrize(
    "form",
    ["fixture folder", "trace dir", "run dir", "xplane file", "trace.json.gz"],
)
def test_load_takes_every_form_the_cli_takes(form: str) -> None:
    run_dir = next((TRANSFORMER / "trace" / "plugins" / "profile").iterdir())
    path = {
        "fixture folder": TRANSFORMER,
        "trace dir": TRANSFORMER / "trace",
        "run dir": run_dir,
        "xplane file": run_dir / "vm.xplane.pb",
        "trace.json.gz": run_dir / "vm.trace.json.gz",
    }[form]
    profile = profan.load(str(path))
    assert len(profile.ops) > 0
    text = repr(profile)
    assert "\n" not in text and len(text) < 300
    assert f"{len(profile.ops)} op executions" in text
    assert f"{len(profile.steps)} steps" in text

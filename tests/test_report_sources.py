"""Where each op's FLOPs and bytes come from, shown in the JSON and explained in the table; no
false alarm on an op whose cost is unknown or only a lower bound; a headline that never shows a
share above 100%. On the H100 and H200 fixtures (real cuBLAS, cuDNN and Pallas calls) and every
trace."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.cli import main
from profan.cost.kernels import SOURCES
from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.check.budget import Budget, OpBudget, evaluate
from profan.report.format import SOURCE_MARKS, bytes_lines, sources_legend, step_share_text
from profan.report.model import OpEntry, Report
from profan.report.render import terminal
from profan.trace.options import KERNELS_ENV
from profan.units import si
from tests.conftest import gpu_fixtures

_REPORTS: dict[str, Report] = {}


def _report(path: Path) -> Report:
    if str(path) not in _REPORTS:
        _REPORTS[str(path)] = build_report(analyse(path))
    return _REPORTS[str(path)]


def _every_trace(fixtures_dir: Path, corpus_dir: Path) -> list[Path]:
    fixtures = sorted(p for p in fixtures_dir.iterdir() if (p / "trace").is_dir())
    corpus = sorted((corpus_dir / "traces").glob("*.xplane.pb"))
    return fixtures + [p for p in corpus if "corrupt" not in p.name]


@pytest.mark.parametrize("name", gpu_fixtures("gpu_kernels"))
def test_every_op_says_where_its_figures_come_from(fixtures_dir: Path, name: str) -> None:
    report = _report(fixtures_dir / name)
    data = json.loads(json.dumps(report.to_dict()))
    for op in data["ops"]:
        assert op["flops_source"] in SOURCES and op["bytes_source"] in SOURCES, op["label"]
    calls = [op for op in data["ops"] if op["opcode"] == "custom-call"]
    assert calls and all(op["flops_source"] != "unknown" for op in calls)
    # the Pallas matmuls: FLOPs from their shapes, bytes only a lower bound, marked as such
    pallas = [op for op in report.ops if op.name == "pallas_call.1"]
    assert pallas and all(op.bytes_source == "lower-bound" for op in pallas)
    text = terminal.render(report, top=len(report.ops), width=200)
    flat = " ".join(text.split())
    assert "≥ a lower bound" in flat and "(s) read from the operand shapes" in flat
    for op in pallas:
        row = next(line for line in text.splitlines() if line.startswith(op.label[:10]))
        assert "≥" in row
    # a lower bound is never called far from the roofline, whatever the threshold
    assert not any("far-from-roofline" in op.flags for op in pallas)


def test_every_source_but_the_hlo_has_its_mark_in_the_legend() -> None:
    assert set(SOURCE_MARKS) == set(SOURCES) - {"hlo"}
    # an op costed as an upper bound (a splash kernel with its block mask counted full)
    op = OpEntry(
        key="k", module="jit_f", name="splash", opcode="custom-call", category="attention",
        occurrences=1, measured_s=1e-3, flops=3.4e10, hbm_bytes=1.39e8, ici_bytes=0.0,
        t_compute_s=1.5e-4, t_hbm_s=5e-5, t_ici_s=0.0, roofline_s=1.5e-4, bound_by="compute",
        efficiency=0.15, flops_source="upper-bound", bytes_source="upper-bound",
    )  # fmt: skip
    assert bytes_lines(op) == ["≤" + si(1.39e8, "B")]
    legend = sources_legend([op])
    assert legend is not None and "≤ an upper bound" in legend


def _forget_after_the_test(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "")
    monkeypatch.delenv(name)


def test_an_unknown_kernel_is_named_once_and_never_called_slow(
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Map the fixture's cuBLASLt gemms to the `opaque` model (FLOPs unknown, bytes a lower
    bound): the report names `__cublas$lt$matmul` in one cost-unknown finding that says how to
    add a model, and with a threshold every other op fails (efficiency below 100%) none of the
    gemms is called far from its roofline."""
    _forget_after_the_test(monkeypatch, KERNELS_ENV)
    kernels = tmp_path / "synthetic_opaque_kernels.toml"
    kernels.write_text(
        '[kernels.opaque-gemm]\ntargets = ["__cublas$lt$matmul"]\nmodel = "opaque"\n'
    )
    config = tmp_path / "profan.toml"
    config.write_text("[rules]\nefficiency_below = 1.0\nmin_time_share = 0.0\n")
    argv = ["report", str(fixtures_dir / "gpu_kernels"), "--format", "json"]
    assert main([*argv, "--config", str(config), "--kernels", str(kernels)]) == 0
    data = json.loads(capsys.readouterr().out)
    gemms = [op for op in data["ops"] if op["flops_source"] == "unknown"]
    assert len(gemms) >= 5  # f32, f32 highest, bf16, c64, f64 gemms and the attention's
    assert all(op["bytes_source"] == "lower-bound" for op in gemms)
    unknown = [f for f in data["findings"] if f["rule"] == "cost-unknown"]
    assert len(unknown) == 1
    assert "FLOPs of __cublas$lt$matmul unknown" in unknown[0]["message"]
    assert f"{len(gemms)} op(s)" in unknown[0]["message"]
    assert "--kernels FILE" in unknown[0]["look_at"]
    assert 'targets = ["__cublas$lt$matmul"]' in unknown[0]["look_at"]
    far = {f["op"] for f in data["findings"] if f["rule"] == "far-from-roofline"}
    assert far  # the threshold does fire on ops whose cost is known ...
    assert not far & {op["key"] for op in gemms}  # ... but on no gemm of unknown cost
    # a per-op efficiency budget gives no verdict either
    report = Report.from_dict(data)
    op = next(o for o in report.ops if o.key == gemms[0]["key"])
    (result,) = evaluate(report, Budget(ops=(OpBudget(op.key, min_efficiency=1.0),)))
    assert result.passed and "not judged" in result.message


def test_synthetic_step_share_never_above_100_percent() -> None:
    assert step_share_text(1e-3, 2e-3) == (
        "the step runs at 50.0% of its roofline (ideal 1 ms vs measured 2 ms, mean per step)"
    )
    words = step_share_text(3e-3, 2e-3)
    assert words is not None and "cannot be" in words and "%" not in words
    assert step_share_text(None, 2e-3) is None


@pytest.mark.slow
def test_headline_shares_are_at_most_100_percent_on_every_trace(
    fixtures_dir: Path, corpus_dir: Path
) -> None:
    for path in _every_trace(fixtures_dir, corpus_dir):
        report = _report(path)
        text = terminal.render(report, width=200)
        headline = next(line for line in text.splitlines() if line.startswith("MFU"))
        shares = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", headline)]
        assert shares and all(share <= 100 for share in shares), (path.name, headline)
        assert "of the bf16 peak" in headline, headline

"""The GEMM table (JSON ``gemms``, ``profan.report.analysis.gemms``) on real GPU traces: the
H100/H200 fixtures and the MI300X corpus.

* every row's ``2 x M x N x K x batch x executions`` is its FLOPs, the cost model's for the
  matmul: for a library gemm the op's own FLOPs, for a fusion at most the op's (its other work
  left out);
* M x N x batch is the element count of each listed op's result shape as the report prints it
  (``ops[].shape``, from the HLO, not from the table's code);
* each row's executions and time are those of the ops it lists, and every op is in one row.
"""

from __future__ import annotations

import math
import re
from functools import cache
from pathlib import Path

import pytest

from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.model import Report
from tests.conftest import FIXTURES_DIR, gpu_fixtures

FIXTURE_FOLDERS = [
    folder
    for group in ("gpu_kernels", "gpu_transformer", "gpu_transformer_nocb")
    for folder in gpu_fixtures(group)
]
CORPUS_TRACES = ["mi300x_jax08_gemm", "mi300x_jax08_attention"]
ARRAY = re.compile(r"^[a-z0-9]+\[([0-9,]*)\]")


@cache
def _report(path: str, hlo: str | None) -> Report:
    return report_for(path, hlo=hlo, use_cache=False)


def _fixture(folder: str) -> Report:
    trace, hlo = resolve_layout(FIXTURES_DIR / folder, None)
    return _report(str(trace), str(hlo) if hlo is not None else None)


def _elements(shape: str | None) -> int | None:
    found = ARRAY.match(shape or "")
    if found is None:
        return None
    return math.prod(int(d) for d in found.group(1).split(",") if d)


def _check(report: Report) -> None:
    assert report.gemms, "a trace with matmuls has a GEMM table"
    by_label = {op.label: op for op in report.ops}
    seen: set[str] = set()
    for row in report.gemms:
        per_execution = 2 * row.m * row.n * row.k * row.batch
        assert per_execution * row.executions == pytest.approx(row.flops, rel=1e-9), row
        ops = [by_label[label] for label in row.ops]
        op_flops = sum(op.flops for op in ops)
        assert row.op_flops == pytest.approx(op_flops, rel=1e-9)
        if row.dims_from == "backend-config":  # a library gemm: the op is the matmul
            assert row.flops == pytest.approx(op_flops, rel=1e-9), row
        else:
            assert row.flops <= op_flops * (1 + 1e-9), row
        for op in ops:
            elements = _elements(op.shape)
            if elements is not None:
                assert elements == row.m * row.n * row.batch, (op.label, op.shape)
        assert row.executions == sum(op.occurrences for op in ops)
        assert row.time_s == pytest.approx(sum(op.measured_s for op in ops), rel=1e-9)
        assert row.efficiency is not None and 0 < row.efficiency < 1.5
        assert not seen & set(row.ops), "an op is in one row"
        seen.update(row.ops)
    times = [row.time_s for row in report.gemms]
    assert times == sorted(times, reverse=True)
    back = Report.from_dict(report.to_dict())
    assert back.gemms == report.gemms
    assert back.to_dict()["gemms"] == report.to_dict()["gemms"]


@pytest.mark.parametrize("folder", FIXTURE_FOLDERS)
def test_fixture_gemm_rows_are_their_ops(folder: str) -> None:
    _check(_fixture(folder))


@pytest.mark.parametrize("name", CORPUS_TRACES)
def test_corpus_gemm_rows_are_their_ops(corpus_dir: Path, name: str) -> None:
    _check(_report(str(corpus_dir / "traces" / f"{name}.xplane.pb"), None))


def test_library_gemms_carry_their_dtypes_and_kernels() -> None:
    rows = _fixture("gpu_kernels").gemms
    fp8 = [row for row in rows if row.lhs_dtype.startswith("f8")]
    assert fp8 and fp8[0].out_dtype == "bf16" and fp8[0].peak == "fp8"
    assert fp8[0].kernels[0].name.startswith("nvjet_")
    f64 = [row for row in rows if row.lhs_dtype == "f64"]
    assert f64 and f64[0].peak == "f64"

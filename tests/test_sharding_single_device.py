"""Single-device programs (the H100 and H200 fixtures, the CPU matmul and xla_programs): no mesh, no
collectives, no strategies, and every matmul's global shapes are its local ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from profan.hlo.parser import parse_module
from profan.sharding import describe, program_mesh
from tests.conftest import FIXTURES_DIR

SINGLE_DEVICE = sorted(
    [p for p in FIXTURES_DIR.glob("gpu_*/hlo/*after_optimizations.txt")]
    + [p for p in FIXTURES_DIR.glob("matmul/hlo/*after_optimizations.txt")]
    + [p for p in FIXTURES_DIR.glob("xla_programs/*/hlo/*after_optimizations.txt")]
)


def test_the_single_device_fixtures_are_there() -> None:
    assert len([p for p in SINGLE_DEVICE if p.parts[-3].startswith("gpu_")]) >= 15
    assert len(SINGLE_DEVICE) >= 32


@pytest.mark.parametrize("path", SINGLE_DEVICE, ids=lambda p: f"{p.parts[-3]}/{p.name[:40]}")
def test_single_device_program_has_no_mesh(path: Path) -> None:
    module = parse_module(path.read_text(), file=str(path))
    assert module.num_partitions * module.replica_count == 1
    report = describe(module)
    assert report.mesh.axes == [] and report.mesh.num_devices == 1
    assert report.collectives == [] and report.strategies == []
    assert program_mesh(module) is None and report.mesh.names_from is None
    for matmul in report.matmuls:
        assert matmul.global_lhs == matmul.local_lhs, matmul.name
        assert matmul.global_rhs == matmul.local_rhs, matmul.name
        assert matmul.global_out == matmul.local_out, matmul.name
        assert not (matmul.lhs_split or matmul.rhs_split or matmul.out_split)
        assert matmul.global_flops == matmul.local_flops
    json.dumps(report.to_dict())

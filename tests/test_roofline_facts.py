"""What ``Score.ops``' records tell the report about each op, checked against the HLO text and the
fixtures' recorded truth: op path, scope, result shape, program position, collective groups."""

from __future__ import annotations

import ast
import json
import math
import re

import pytest

import profan
from profan.roofline import score
from profan.sharding import describe
from tests.conftest import FIXTURES_DIR


def _load(name: str):  # type: ignore[no-untyped-def]
    folder = FIXTURES_DIR / name
    return profan.load(str(folder / "trace"), hlo=str(folder / "hlo"))


def _hlo_lines(name: str) -> dict[str, str]:
    """Instruction name -> its line in the dump, read with a regex (independent of the parser)."""
    (dump,) = (FIXTURES_DIR / name / "hlo").glob("*after_optimizations.txt")
    lines: dict[str, str] = {}
    for line in dump.read_text().splitlines():
        match = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = ", line)
        if match:
            lines.setdefault(match.group(1), line)
    return lines


@pytest.fixture(scope="module")
def transformer():  # type: ignore[no-untyped-def]
    profile = _load("transformer")
    shardings = {key: describe(module) for key, module in profile.modules.items()}
    return profile, score(profile, shardings=shardings)


def test_op_path_shape_and_position_come_from_the_instruction(transformer) -> None:
    _, result = transformer
    lines = _hlo_lines("transformer")
    ops = [op for op in result.ops if op.opcode is not None]
    assert len(ops) > 50
    for row in ops:
        line = lines[row.name]
        op_name = re.search(r'op_name=("(?:[^"\\]|\\.)*")', line)
        assert row.op_path == (ast.literal_eval(op_name.group(1)) if op_name else None), row.name
        # the result shape as printed, layouts ({1,0}, {1,0:T(...)}) removed
        printed = line.split(" = ", 1)[1].split(f" {row.opcode}(", 1)[0]
        printed = re.sub(r"/\*index=\d+\*/", "", printed)  # XLA numbers long tuples
        assert row.shape == re.sub(r"\{[^{}]*\}", "", printed), row.name
        if row.scope is not None:
            assert row.op_path.startswith(row.scope.split("/")[0]), row.name
    # program order: positions are distinct and follow the order of the entry's lines
    entry = [op for op in ops if op.position is not None]
    assert len({op.position for op in entry}) == len(entry)
    order = list(lines)
    by_position = [op.name for op in sorted(entry, key=lambda op: op.position)]
    assert by_position == sorted(by_position, key=order.index)


def test_collectives_carry_groups_and_mesh_axes_from_the_truth() -> None:
    profile = _load("collectives")
    shardings = {key: describe(module) for key, module in profile.modules.items()}
    result = score(profile, shardings=shardings)
    truth = json.loads((FIXTURES_DIR / "collectives" / "meta.json").read_text())
    mesh = dict(zip(truth["mesh"]["axis_names"], truth["mesh"]["axis_sizes"], strict=True))
    by_kind = {c["kind"]: c for c in truth["truth"]["collectives"] if c["kind"] != "all-reduce"}
    rows = [op for op in result.ops if op.collective is not None]
    kinds = {row.collective.kind for row in rows}
    assert kinds >= set(by_kind)
    (report,) = shardings.values()
    for row in rows:
        facts = row.collective
        if facts.kind not in by_kind:
            continue
        expected = by_kind[facts.kind]
        groups = expected["device_groups"]
        if facts.kind == "collective-permute":
            assert facts.group_size == sum(len(g) for g in groups)  # one pair per device
            assert facts.num_groups is None
        else:
            assert facts.group_size == len(groups[0])
            assert facts.num_groups == len(groups)
        # the mesh axes the analysis found span as many devices as the truth's axes
        assert facts.axes is not None
        sizes = [report.mesh.shape[a] for a in facts.axes]
        assert math.prod(sizes) == math.prod(mesh[a] for a in expected["axes"]), row.name
        assert facts.full_bytes > 0 and facts.output_bytes > 0
    # ops that are no collective carry none
    assert all(op.collective is None for op in result.ops if op.category == "matmul")

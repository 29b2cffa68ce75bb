"""The module graph (profan.hlo.graph) checked against what real programs did and printed.

* execution counts of the schedule walk equal how often the profiler saw each op run;
* every operand resolves to the instruction whose shape the dump printed beside the operand
  (including the implicit get-tuple-elements behind ``%name#N`` in a newer XLA's GPU dump);
* users are the inverse of operands.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from profan.hlo import parse_file, parse_module
from profan.hlo.graph import ModuleGraph, scheduled_computations
from profan.hlo.model import Module
from profan.trace import load
from tests.conftest import FIXTURES_DIR, gpu_fixtures


def _dumps() -> list[Path]:
    """Every after-optimizations dump of the fixtures (XLA-printed)."""
    return sorted(FIXTURES_DIR.glob("*/hlo/*after_optimizations.txt"))


def test_scan_loop_body_runs_as_often_as_the_trace_shows() -> None:
    # 3 scanned layers: the while body runs 3 times per step, its condition 4 times.
    module = parse_file(str(next((FIXTURES_DIR / "scan_layers" / "hlo").glob("*after_opt*"))))
    scheduled = {s.computation.name: s for s in scheduled_computations(module)}
    loop = next(i for i in module.entry if i.opcode == "while")
    body = scheduled[loop.attributes["body"].lstrip("%")]
    condition = scheduled[loop.attributes["condition"].lstrip("%")]
    assert (body.count, condition.count) == (3, 4)
    assert body.count_is_exact and condition.count_is_exact
    assert scheduled[module.entry.name].count == 1

    profile = load(str(FIXTURES_DIR / "scan_layers" / "trace"))
    runs_of_entry = Counter()
    runs = Counter()
    checked = 0
    for row in profile.ops.itertuples():
        instruction = profile.instruction(row.module_key, row.op_name)
        if instruction is None or instruction.computation not in scheduled:
            continue
        runs[(instruction.computation, row.op_name, row.device, row.step)] += 1
        if instruction.computation == module.entry.name:
            runs_of_entry[(row.device, row.step)] = 1
    for (computation, _, device, step), seen in runs.items():
        assert runs_of_entry[(device, step)] == 1
        assert seen == scheduled[computation].count, computation
        checked += 1
    assert checked > 0
    assert any(key[0] == body.computation.name for key in runs)


def test_synthetic_counts_multiply_through_nested_loops_and_calls() -> None:
    # outer loop (5 trips) -> call -> inner loop (7 trips); a loop with no known trip count
    # and a conditional make the counts inexact.  Checked by hand: inner body 5*7 = 35,
    # inner condition 5*8 = 40, outer condition 6.
    text = """HloModule synthetic
inner_body { p = s32[] parameter(0)
  ROOT n = s32[] add(p, p) }
inner_cond { p = s32[] parameter(0)
  ROOT c = pred[] compare(p, p), direction=LT }
callee { p = s32[] parameter(0)
  ROOT w = s32[] while(p), condition=inner_cond, body=inner_body,
    backend_config={"known_trip_count":{"n":"7"}} }
outer_body { p = s32[] parameter(0)
  ROOT r = s32[] call(p), to_apply=callee }
outer_cond { p = s32[] parameter(0)
  ROOT c = pred[] compare(p, p), direction=LT }
free_body { p = s32[] parameter(0)
  ROOT n = s32[] negate(p) }
branch { p = s32[] parameter(0)
  ROOT n = s32[] negate(p) }
ENTRY main { p = s32[] parameter(0)
  w = s32[] while(p), condition=outer_cond, body=outer_body,
    backend_config="{\\"known_trip_count\\":{\\"n\\":\\"5\\"}}"
  u = s32[] while(w), condition=outer_cond, body=free_body
  b = pred[] compare(u, u), direction=EQ
  ROOT c = s32[] conditional(b, u, u), true_computation=branch, false_computation=branch }
"""
    scheduled = {s.computation.name: s for s in scheduled_computations(parse_module(text))}
    counts = {name: (s.count, s.count_is_exact) for name, s in scheduled.items()}
    assert counts["main"] == (1, True)
    assert counts["outer_body"] == (5, True)
    assert counts["callee"] == (5, True)
    assert counts["inner_body"] == (35, True)
    assert counts["inner_cond"] == (40, True)
    # outer_cond runs 6 times for the first loop and at least once for the second
    assert counts["outer_cond"] == (7, False)
    assert counts["free_body"] == (1, False)
    # both branches of the conditional are one computation: it runs every time
    assert counts["branch"] == (1, True)
    assert "inner_body" in scheduled and len(scheduled) == 8


@pytest.fixture(scope="module")
def profiles() -> dict[str, object]:
    return {}


def _proto_of(profiles: dict, dump: Path, module: Module) -> Module:
    fixture = dump.parent.parent
    if fixture.name not in profiles:
        profiles[fixture.name] = load(str(fixture / "trace"))
    found = [m for m in profiles[fixture.name].modules.values() if m.name == module.name]
    assert len(found) == 1, (dump.name, [m.name for m in profiles[fixture.name].modules.values()])
    return found[0]


@pytest.mark.parametrize("dump", _dumps(), ids=lambda p: f"{p.parent.parent.name}/{p.name[:40]}")
def test_operand_shapes_of_a_dump_equal_the_embedded_hloproto(dump: Path, profiles: dict) -> None:
    # The dumps print operands by name only; the profiler's HloProto of the same program
    # records each operand's shape, independently of the text.  A get-tuple-element the text
    # wrote as ``%name#N`` has another name in the proto (``get-tuple-element.65``): the
    # operands that use it are compared through the element they read.
    module = parse_file(str(dump))
    proto = _proto_of(profiles, dump, module)
    graph = ModuleGraph(module)
    compared = 0
    for computation in proto.computations:
        text_computation = module.computation(computation.name)
        for proto_instruction in computation:
            instruction = text_computation.get(proto_instruction.name)
            if instruction is None:
                assert proto_instruction.opcode == "get-tuple-element"
                continue
            assert len(instruction.operands) == len(proto_instruction.operands)
            for index, operand in enumerate(proto_instruction.operands):
                assert graph.operand_shape(instruction, index) == operand.shape, (
                    instruction.name,
                    index,
                )
                compared += 1
    assert compared > 0


def _users_by_inversion(module: Module) -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for computation in module.computations:
        for user in computation:
            for name in dict.fromkeys(user.operand_names):
                found.setdefault((computation.name, name), []).append(user.name)
    return found


@pytest.mark.parametrize("name", gpu_fixtures("gpu_transformer"))
def test_users_invert_operands_on_the_gpu_train_step(name: str) -> None:
    module = parse_file(str(next((FIXTURES_DIR / name / "hlo").glob("*after_optimizations.txt"))))
    graph = ModuleGraph(module)
    expected = _users_by_inversion(module)
    total = 0
    for computation in module.computations:
        for instruction in computation:
            users = [u.name for u in graph.users(instruction)]
            assert users == expected.get((computation.name, instruction.name), [])
            total += len(users)
    assert total == sum(len(v) for v in expected.values())
    # an implicit get-tuple-element (``%arg_tuple.1#0``) has the users that printed it
    element = next(i for i in module.instructions() if i.implicit)
    assert graph.users(element)
    assert all(element.name in u.operand_names for u in graph.users(element))


def test_a_single_line_knows_only_its_printed_shapes() -> None:
    from profan.hlo import parse_instruction

    line = parse_instruction("%a = f32[4]{0} add(f32[4]{0} %x, %y)")
    graph = ModuleGraph(None)
    assert graph.operand_shape(line, 0) is not None and graph.operand_shape(line, 0).dims == (4,)
    assert graph.operand_shape(line, 1) is None
    assert graph.operand(line, 0) is None and graph.users(line) == []
    assert graph.scheduled() == []

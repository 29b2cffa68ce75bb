"""The undonated-input rule: it names the inputs a program replaces with a new value (state in,
new state out) without donating them, and nothing else.

``fixtures/state_steps`` (``fixtures/make_state_fixtures.py``) records, per program, which inputs
it replaces and which it donates; XLA's own ``memory_analysis()`` says what was donated.  The
MI300X corpus programs are JAX eager ops and matmul benchmarks: outputs that share an input's
shape, and no input updated.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from profan.hlo import parse_file, views
from profan.hlo.model import Module, Shape
from profan.memory.updates import output_flows
from profan.report.analysis.build import Analysis, build_report
from profan.report.analysis.pipeline import analyse
from profan.report.model import Report, UndonatedInput
from profan.report.rules.config import RuleConfig
from tests.conftest import FIXTURES_DIR, gpu_fixtures

STATE_STEPS = FIXTURES_DIR / "state_steps"
MI300X = (
    "mi300x_jax08_attention",
    "mi300x_jax08_gemm",
    "mi300x_jax_conv",
    "mi300x_jax_conv_legacy",
)


@cache
def _analysis(path: Path) -> Analysis:
    return analyse(path)


@cache
def _report(path: Path) -> Report:
    return build_report(_analysis(path))


def _undonated(report: Report) -> dict[str, list[UndonatedInput]]:
    return {
        entry.module.split("(")[0]: entry.undonated
        for entry in report.memory
        if entry.memory_space == "device"
    }


def _leaves(shape: Shape) -> list[tuple[str, tuple[int, ...]]]:
    if shape.is_tuple:
        return [leaf for element in shape.tuple_shapes for leaf in _leaves(element)]
    return [(shape.dtype, shape.dims)]


def _same_shape_pairs(path: Path) -> int:
    """(entry parameter, output) pairs of equal shape and dtype over every program of a trace:
    what the rule used to report when it looked at shapes alone."""
    count = 0
    for module in _analysis(path).profile.modules.values():
        outputs = _leaves(module.entry.root.shape)
        count += sum(1 for p in module.entry.params if _leaves(p.shape)[0] in outputs)
    return count


def _parameter_paths(module: Module) -> set[str]:
    return {path for p in module.entry.params if (path := views.metadata(p).op_name)}


def test_state_steps_report_exactly_the_replaced_inputs_that_are_not_donated() -> None:
    meta = json.loads((STATE_STEPS / "meta.json").read_text())
    found = _undonated(_report(STATE_STEPS))
    assert len(meta["programs"]) == 7
    for program in meta["programs"]:
        truth = program["truth"]
        expected = sorted(set(truth["replaced"]) - set(truth["donated"]))
        items = found[program["module_name"]]
        assert sorted(item.parameter_path for item in items) == expected, program["name"]
        assert sum(item.size_bytes for item in items) == truth["undonated_bytes"]
        # Donation as XLA did it: the donated step aliases exactly the weights it was told to.
        alias = program["memory_analysis"]["alias_size_in_bytes"]
        assert (alias > 0) == bool(truth["donated"]), program["name"]


def test_each_input_is_paired_with_its_own_new_value() -> None:
    """The Adam update: every new parameter is also a new value of its gradient and moments, and
    every new moment of its gradient; each output takes the input it replaces."""
    found = _undonated(_report(STATE_STEPS))
    outputs = {item.parameter_path: item.output for item in found["jit_adam_update"]}
    assert all(name.startswith("divide_subtract_fusion") for key, name in outputs.items()
               if key.startswith("params"))  # fmt: skip
    assert {key.split("[")[0] for key in outputs} == {"params", "mu", "nu"}
    # The weights that go through four SGD steps in a while loop come out of the loop.
    loop = {item.parameter_path: item.output for item in found["jit_sgd_loop"]}
    assert set(loop) == {"params['w1']", "params['w2']"}
    assert all(name.startswith("while") for name in loop.values())


def test_the_rule_names_each_input_and_what_donating_it_saves() -> None:
    # (these inputs are under the rule's floor, 1 MiB: lowered here to see every one)
    lowered = RuleConfig(min_saving_bytes=0, min_saving_memory_share=0)
    report = build_report(_analysis(STATE_STEPS), lowered)
    findings = [f for f in report.findings if f.rule == "undonated-input"]
    assert len(findings) == 9  # 2 (sgd_loop) + 6 (adam_update) + 1 (decode_step)
    (cache_finding,) = [f for f in findings if "input cache" in f.message]
    assert "is replaced by its new value" in cache_finding.message
    assert "donating it would save 32.8 kB" in cache_finding.message
    assert cache_finding.source and "make_state_fixtures.py" in cache_finding.source


@pytest.mark.parametrize("name", ["mlp", "mlp_worse", "transformer", "fsdp", "multihost"])
def test_train_steps_that_do_not_donate_report_every_parameter(name: str) -> None:
    """Each of these SGD steps returns a new value of every parameter and donates none: every
    entry parameter JAX names as a parameter (``params…``, fsdp's ``w1``/``w2``) is reported."""
    report = _report(FIXTURES_DIR / name)
    modules = _analysis(FIXTURES_DIR / name).profile.modules
    (key,) = [key for key in modules if "step" in key]
    (entry,) = [e for e in report.memory if e.module.split("(")[0] == key.split("(")[0]]
    state = {path for path in _parameter_paths(modules[key]) if path.startswith(("params", "w"))}
    assert len(state) >= 2 and entry.alias_bytes == 0
    assert {item.parameter_path for item in entry.undonated} == state


@pytest.mark.parametrize("name", gpu_fixtures("gpu_transformer"))
def test_a_train_step_that_donates_reports_nothing(name: str) -> None:
    report = _report(FIXTURES_DIR / name)
    assert report.memory[0].alias_bytes > 0
    assert not [f for f in report.findings if f.rule == "undonated-input"]


def test_programs_that_only_share_a_shape_report_nothing(fixtures_dir: Path) -> None:
    """Square matmuls, FFTs and collectives of an input return outputs of its shape that are not
    new values of it (gpu_kernels, collectives, scan_layers' forward pass)."""
    for name in (*gpu_fixtures("gpu_kernels"), "collectives", "scan_layers", "matmul"):
        report = _report(fixtures_dir / name)
        assert not [f for f in report.findings if f.rule == "undonated-input"], name
    for name in gpu_fixtures("gpu_kernels"):
        assert _same_shape_pairs(fixtures_dir / name) >= 4


@pytest.mark.parametrize("name", MI300X)
def test_mi300x_inference_programs_report_nothing(corpus_dir: Path, name: str) -> None:
    report = _report(corpus_dir / "traces" / f"{name}.xplane.pb")
    assert not [f for f in report.findings if f.rule == "undonated-input"]
    assert all(not entry.undonated for entry in report.memory)


def test_mi300x_programs_do_have_outputs_of_their_inputs_shapes(corpus_dir: Path) -> None:
    """What made the old shape-only rule fire 14 + 4 times: eager jit_add / jit_exp / jit_tanh /
    jit_dot programs whose output has an input's shape and dtype."""
    traces = corpus_dir / "traces"
    pairs = _same_shape_pairs(traces / "mi300x_jax08_attention.xplane.pb")
    pairs += _same_shape_pairs(traces / "mi300x_jax08_gemm.xplane.pb")
    assert pairs >= 18


def test_new_values_through_in_place_updates_but_not_through_mixing_ops() -> None:
    """XLA's own programs (fixtures/xla_programs): a dynamic-update-slice and a scatter-add are
    new values of the array they update; a sort, a cumsum, a matmul, a loop of tanh(y @ y) are
    not new values of anything, even where the shape is the input's."""
    group = FIXTURES_DIR / "xla_programs"

    def flows(name: str) -> dict:
        (dump,) = (group / name / "hlo").glob("*after_optimizations.txt")
        return output_flows(parse_file(dump))

    for name in ("dynamic_update_slice", "scatter_add"):
        (flow,) = flows(name).values()
        assert flow.carried == {(0, ())} and flow.computed, name
    for name in ("sort", "cumsum", "while_loop", "softmax", "bf16_matmul", "cond"):
        assert all(not flow.carried for flow in flows(name).values()), name

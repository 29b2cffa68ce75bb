"""classify(): categories with reasons, on real HLO (fixtures, XLA's corpus, the TPU trace's)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from profan.attribute import (
    CATEGORIES,
    block_kind,
    classify,
    group_by_scope,
    repeated_scopes,
    scope_of,
    source_of,
)
from profan.hlo.model import Module
from profan.hlo.parser import parse_module
from tests.conftest import FIXTURES_DIR


def _fixture(name: str) -> Module:
    path = next((FIXTURES_DIR / name / "hlo").glob("*after_optimizations.txt"))
    return parse_module(path.read_text(), file=str(path))


def _corpus(corpus_dir: Path, name: str) -> Module:
    path = corpus_dir / "hlo" / "xla" / name
    return parse_module(path.read_text(), file=str(path))


def _find(module: Module, predicate):
    for instruction in module.instructions():
        if predicate(instruction):
            return instruction
    raise AssertionError("no such instruction")


def test_fixture_mlp_categories() -> None:
    module = _fixture("mlp")
    entry = module.entry
    labels = {i.name: classify(i, module) for i in entry.instructions}
    # kCustom fusions whose body is a dot (XLA:CPU's YNNPACK fusions) are matmuls.
    for name in ("ynn_fusion", "ynn_fusion.1", "ynn_fusion.2", "dot.3", "dot.4"):
        assert labels[name].category == "matmul", (name, labels[name])
    assert "dot" in labels["ynn_fusion.2"].reason
    assert labels["all-reduce"].category == "collective"
    assert labels["all-reduce"].kind == "all-reduce"
    assert labels["broadcast_maximum_fusion"].category == "elementwise"
    assert labels["wrapped_reduce"].category == "reduction"
    assert labels["wrapped_reduce-window"].category == "reduction"
    assert labels["param"].category == "other"
    assert labels["tuple.2"].category == "other"
    assert all(label.reason for label in labels.values())


def test_fixture_collectives_kinds() -> None:
    module = _fixture("collectives")
    kinds = Counter(
        classify(i, module).kind
        for i in module.entry.instructions
        if classify(i, module).category == "collective"
    )
    for kind in ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"):
        assert kinds[kind] >= 1, kinds


def test_every_instruction_of_every_fixture_has_a_category() -> None:
    for meta in FIXTURES_DIR.glob("*/meta.json"):
        module = _fixture(meta.parent.name)
        for instruction in module.instructions():
            label = classify(instruction, module)
            assert label.category in CATEGORIES
            assert label.reason


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("file", "predicate", "category", "kind"),
    [
        (
            "xla__backends__gpu__autotuner__cublaslt_test__1.hlo",
            lambda i: (
                i.opcode == "fusion" and "__triton_gemm" in i.attributes.get("backend_config", "")
            ),
            "matmul",
            None,
        ),
        (
            "xla__backends__gpu__transforms__collectives__collective_combiner_annotator_test__4.hlo",
            lambda i: (
                i.opcode == "custom-call" and "cublas" in i.attributes.get("custom_call_target", "")
            ),
            "matmul",
            "library",
        ),
        (
            "xla__hlo__transforms__simplifiers__fusion_constant_sinking_test__6.hlo",
            lambda i: "tpu_custom_call" in i.attributes.get("custom_call_target", ""),
            "custom",
            "kernel",
        ),
        (
            "xla__service__gpu__gpu_aot_compilation_test__2.hlo",
            lambda i: "triton" in i.attributes.get("custom_call_target", ""),
            "custom",
            "kernel",
        ),
        (
            "xla__hlo__transforms__host_offload_legalize_test__2.hlo",
            lambda i: "MoveToHost" in i.attributes.get("custom_call_target", ""),
            "host",
            "MoveToHost",
        ),
        (
            "xla__hlo__analysis__hlo_liveness_analysis_test__12.hlo",
            lambda i: i.opcode == "send",
            "host",
            "send-host",
        ),
        (
            "xla__hlo__analysis__hlo_replication_analysis_test__5.hlo",
            lambda i: i.opcode == "infeed",
            "host",
            "infeed",
        ),
        (
            "xla__backends__gpu__tests__collective_ops_e2e_test__32.hlo",
            lambda i: i.opcode == "all-gather-start",
            "collective",
            "all-gather",
        ),
        (
            "xla__backends__gpu__runtime__ragged_all_to_all_thunk_test__0.hlo",
            lambda i: i.opcode == "ragged-all-to-all",
            "collective",
            "ragged-all-to-all",
        ),
    ],
)
def test_corpus_categories(corpus_dir, file, predicate, category, kind) -> None:
    module = _corpus(corpus_dir, file)
    instruction = _find(module, predicate)
    label = classify(instruction, module)
    assert label.category == category, label
    if kind is not None:
        assert label.kind == kind, label


def test_async_collective_start_and_done_say_so(corpus_dir) -> None:
    module = _corpus(corpus_dir, "xla__backends__gpu__tests__collective_ops_e2e_test__32.hlo")
    start = _find(module, lambda i: i.opcode == "all-gather-start")
    done = _find(module, lambda i: i.opcode == "all-gather-done")
    assert "async-start" in classify(start, module).reason
    assert "async-done" in classify(done, module).reason


def test_synthetic_tpu_fused_collective_and_relayout() -> None:
    text = """HloModule synthetic_fused_collective, num_partitions=4

%all-reduce-scatter.7 (p0: bf16[1024]) -> bf16[256] {
  %p0 = bf16[1024]{0} parameter(0)
  ROOT %slice = bf16[256]{0} slice(%p0), slice={[0:256]}
}

ENTRY %main {
  %param = bf16[1024]{0:T(1024)} parameter(0)
  %fusion.9 = bf16[256]{0:T(256)} fusion(%param), kind=kCustom, calls=%all-reduce-scatter.7
  ROOT %copy.3 = bf16[256]{0:T(128)} copy(%fusion.9)
}
"""
    module = parse_module(text)
    fused = classify(module.entry.get("fusion.9"), module)
    assert (fused.category, fused.kind) == ("collective", "all-reduce-scatter")
    relayout = classify(module.entry.get("copy.3"), module)
    assert relayout.category == "data-movement"
    assert "layout" in relayout.reason


def test_tpu_trace_modules_every_instruction_categorised(corpus_dir) -> None:
    """The HLO text of the TPU v6e trace's modules: print the category shares."""
    counts: Counter[str] = Counter()
    files = sorted((corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*.hlo"))
    assert files
    for path in files:
        module = parse_module(path.read_text(), file=str(path))
        for instruction in module.instructions():
            label = classify(instruction, module)
            assert label.category in CATEGORIES and label.reason
            counts[label.category] += 1
    total = sum(counts.values())
    print("category shares:", {k: f"{v / total:.0%}" for k, v in counts.most_common()})
    # jit_f offloads three arrays to host memory and back: 6 copy-starts and 6 copy-dones.
    assert counts["host"] == 12
    assert counts["collective"] == 1  # jit__psum's all-reduce


def test_host_copy_direction(corpus_dir) -> None:
    path = next((corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("jit_f*.hlo"))
    module = parse_module(path.read_text())
    start_from_host = classify(module.entry.get("copy-start"), module)
    start_to_host = classify(module.entry.get("copy-start.1"), module)
    assert "from host" in start_from_host.reason
    assert "to host" in start_to_host.reason


# --- scopes --------------------------------------------------------------------------------------


def test_scope_of_strips_the_primitive_and_autodiff_wrappers() -> None:
    module = _fixture("transformer")
    scopes = Counter(scope_of(i) for i in module.instructions())
    assert scopes["jit(train_step)/layer0/attention"] > 0
    assert scopes["jit(train_step)/layer1/mlp"] > 0
    # Forward (jvp) and backward (transpose(jvp)) ops of a layer share its scope.
    forward = _find(module, lambda i: "jvp(layer0))/mlp" in (i.attributes.get("metadata") or ""))
    assert scope_of(forward) == "jit(train_step)/layer0/mlp"


def test_repeated_layers_and_grouping() -> None:
    module = _fixture("transformer")
    repeated = repeated_scopes(module.instructions())
    patterns = {r.pattern: r.members for r in repeated}
    assert patterns["jit(train_step)/layer{}"] == (
        "jit(train_step)/layer0",
        "jit(train_step)/layer1",
    )
    groups = group_by_scope(module.instructions(), depth=3)
    assert "jit(train_step)/layer0/attention" in groups
    assert block_kind("jit(train_step)/layer0/attention") == "attention"
    assert block_kind("jit(train_step)/layer1/mlp") == "mlp"
    # Matmuls per layer: the transformer's truth has 24 per layer (forward + 2 gradients × 8).
    matmuls = Counter(
        "/".join((scope_of(i) or "").split("/")[:2])
        for i in module.entry.instructions
        if classify(i, module).category == "matmul"
    )
    assert matmuls["jit(train_step)/layer0"] == matmuls["jit(train_step)/layer1"] == 24


def test_source_of_uses_the_stack_frame_tables() -> None:
    module = _fixture("mlp")
    dot = module.entry.get("dot.4")
    location = source_of(dot, module)
    assert location is not None and "make_fixtures.py:" in location

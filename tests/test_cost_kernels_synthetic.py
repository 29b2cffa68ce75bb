# ruff: noqa: E501  (HLO lines as XLA prints them are long)
"""Kernel cost models on hand-written HLO in XLA's print form (``synthetic``): kernels that only a
TPU, TransformerEngine or a user's own kernel would print.  Backend configs follow the forms in
the sources: TE's attention FFI attributes (transformer_engine/jax/csrc/extensions/attention.cpp,
printed as an MLIR attribute dictionary), JAX's Pallas TPU config (jax/_src/tpu_custom_call.py:
``{"custom_call_config": {"body": ..., "cost_estimate": {...}}}``), Pallas splash attention's
kernel names (``splash_mha_fwd``, ``splash_mha_dq``, ``splash_mha_dkv``).  Every FLOP count is
worked out by hand in the test.
"""

from __future__ import annotations

import pytest

from profan.cost.custom_calls import kernel_call
from profan.cost.estimate import CostModel
from profan.cost.kernels import (
    EXAMPLE_ENTRY,
    KernelCost,
    attended_pairs,
    cost_kernel,
    read_kernel_file,
    reconcile,
    registry,
    using_kernel_file,
    weaker_source,
)
from profan.errors import ConfigError
from profan.hlo import parse_module


def _cost(text: str, name: str = "call") -> KernelCost:
    module = parse_module(text)
    instruction = next(i for c in module.computations for i in c.instructions if i.name == name)
    return cost_kernel(kernel_call(instruction, CostModel(module)))


def _te_module(target: str, mask_type: int, extra_operands: str = "") -> str:
    config = (
        "{attn_heads = 16 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, "
        "deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = 2 : i64, "
        "is_training = true, kv_max_seqlen = 2048 : i64, mask_type = " + str(mask_type) + " : i64, "
        "max_segments_per_seq = 1 : i64, num_gqa_groups = 4 : i64, q_max_seqlen = 2048 : i64, "
        "qk_head_dim = 128 : i64, qkv_layout = 9 : i64, scaling_factor = 8.838835e-02 : f64, "
        "v_head_dim = 128 : i64, window_size_left = -1 : i64, window_size_right = -1 : i64}"
    )
    if "forward" in target:
        result = (
            "(bf16[2,2048,16,128]{3,2,1,0}, f32[2,16,2048,1]{3,2,1,0}, u32[2,4]{1,0}, u8[1]{0})"
        )
    else:
        result = ("(bf16[2,2048,16,128]{3,2,1,0}, bf16[2,2048,4,128]{3,2,1,0}, "
                  "bf16[2,2048,4,128]{3,2,1,0}, u8[33554432]{0})")  # fmt: skip
    return f"""HloModule synthetic_te

ENTRY %main (q: bf16[2,2048,16,128], k: bf16[2,2048,4,128], v: bf16[2,2048,4,128]) -> bf16[2,2048,16,128] {{
  %q = bf16[2,2048,16,128]{{3,2,1,0}} parameter(0)
  %k = bf16[2,2048,4,128]{{3,2,1,0}} parameter(1)
  %v = bf16[2,2048,4,128]{{3,2,1,0}} parameter(2)
  %call = {result} custom-call(%q, %k, %v{extra_operands}), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={config}
  ROOT %out = bf16[2,2048,16,128]{{3,2,1,0}} get-tuple-element(%call), index=0
}}
"""


# B=2, H=16 query heads (4 KV heads: GQA), S=2048, D=128.
FULL_PAIRS = 2048 * 2048
CAUSAL_PAIRS = 2048 * 2049 // 2  # row i sees keys 0..i


@pytest.mark.parametrize(
    ("mask_type", "pairs"),
    [(0, FULL_PAIRS), (1, FULL_PAIRS), (2, CAUSAL_PAIRS), (3, CAUSAL_PAIRS), (4, CAUSAL_PAIRS)],
)
def test_synthetic_te_fused_attention_forward(mask_type: int, pairs: int) -> None:
    kernel = _cost(_te_module("te_fused_attn_forward_ffi", mask_type))
    # Q K^T: 2 x B x H x pairs x D_qk; P V: 2 x B x H x pairs x D_v
    assert kernel.flops == 2 * 2 * 16 * pairs * 128 + 2 * 2 * 16 * pairs * 128
    assert kernel.transcendentals == 2 * 16 * pairs  # one exp per score
    assert kernel.flops_source == "backend-config" and kernel.model == "te-attention"
    # bytes: Q, K, V read; O (8 MiB), softmax stats and rng state written; not the u8 workspace
    assert kernel.bytes_read == 2 * 2048 * (16 + 4 + 4) * 128 * 2
    assert kernel.bytes_written == 2 * 2048 * 16 * 128 * 2 + 2 * 16 * 2048 * 4 + 2 * 4 * 4


@pytest.mark.parametrize(("mask_type", "pairs"), [(0, FULL_PAIRS), (2, CAUSAL_PAIRS)])
def test_synthetic_te_fused_attention_backward(mask_type: int, pairs: int) -> None:
    kernel = _cost(_te_module("te_fused_attn_backward_ffi", mask_type))
    # recompute S (D_qk), dV = P^T dO (D_v), dP = dO V^T (D_v), dQ = dS K (D_qk), dK = dS^T Q
    # (D_qk): 2 x B x H x pairs x (3 x 128 + 2 x 128)
    assert kernel.flops == 2 * 2 * 16 * pairs * (3 * 128 + 2 * 128)
    forward = _cost(_te_module("te_fused_attn_forward_ffi", mask_type))
    assert kernel.flops == 2.5 * forward.flops
    assert kernel.bytes_written == 2 * 2048 * (16 + 4 + 4) * 128 * 2  # dQ, dK, dV


def test_synthetic_attended_pairs_by_hand() -> None:
    assert attended_pairs(4, 4) == 16
    assert attended_pairs(4, 4, "top-left") == 1 + 2 + 3 + 4
    assert attended_pairs(2, 4, "top-left") == 1 + 2  # rows see keys 0..i
    assert attended_pairs(2, 4, "bottom-right") == 3 + 4  # aligned to the last key
    assert attended_pairs(4, 4, "top-left", window_left=1) == 1 + 2 + 2 + 2
    assert attended_pairs(4, 4, None, 0, 1) == 2 + 2 + 2 + 1  # each row: itself and one ahead


SPLASH = """HloModule synthetic_splash

ENTRY %main (q: bf16[8,2048,128], k: bf16[8,2048,128], v: bf16[8,2048,128]) -> bf16[8,2048,128] {
  %mask_next = s8[1,16,16]{2,1,0} constant({...})
  %block_mask = s32[1,16,16]{2,1,0} constant({...})
  %q = bf16[8,2048,128]{2,1,0} parameter(0)
  %k = bf16[8,2048,128]{2,1,0} parameter(1)
  %v = bf16[8,2048,128]{2,1,0} parameter(2)
  %call = (f32[8,2048,128]{2,1,0}, bf16[8,2048,128]{2,1,0}) custom-call(%mask_next, %block_mask, %q, %k, %v), custom_call_target="tpu_custom_call", metadata={op_name="jit(step)/splash_mha_NAME/pallas_call"}, backend_config={"custom_call_config": {"body": "TUzvUgFNTElSMjAuMC4w", "serialization_format": 1}}
  ROOT %out = bf16[8,2048,128]{2,1,0} get-tuple-element(%call), index=1
}
"""


@pytest.mark.parametrize(
    ("name", "per_pair"),
    [("fwd", 128 + 128), ("fwd_causal", 128 + 128), ("dq", 2 * 128 + 128),
     ("dkv", 2 * 128 + 2 * 128)],
)  # fmt: skip
def test_synthetic_splash_attention_from_its_shapes(name: str, per_pair: int) -> None:
    kernel = _cost(SPLASH.replace("NAME", name))
    # q, k, v [heads=8, S=2048, D=128] found after the two mask operands; the mask is data:
    # a "causal" kernel name counts causal pairs (no block sizes: a lower bound); otherwise a
    # full mask, an upper bound
    causal = "causal" in name
    assert kernel.flops == 2 * 8 * (CAUSAL_PAIRS if causal else FULL_PAIRS) * per_pair
    assert kernel.flops_source == ("lower-bound" if causal else "upper-bound")
    # no block sizes in the name: one block spans the sequence, operands read once
    assert kernel.model == "blocked-attention" and kernel.bytes_source == "lower-bound"


def test_synthetic_splash_with_a_user_rule_saying_no_mask(tmp_path) -> None:
    user = tmp_path / "synthetic_kernels.toml"
    user.write_text(
        '[kernels.my-splash]\ntargets = ["tpu_custom_call"]\nmodel = "attention-shapes"\n'
        "params = { causal = false }\n"
    )
    with using_kernel_file(user):
        kernel = _cost(SPLASH.replace("NAME", "fwd"))
    assert kernel.rule == "my-splash" and kernel.flops_source == "shape-signature"
    assert kernel.flops == 2 * 8 * FULL_PAIRS * (128 + 128)


def _pallas_matmul(config: str) -> str:
    return f"""HloModule synthetic_pallas

ENTRY %main (x: f32[2048,1024], y: f32[1024,2048]) -> f32[2048,2048] {{
  %x = f32[2048,1024]{{1,0:T(8,128)}} parameter(0)
  %y = f32[1024,2048]{{1,0:T(8,128)}} parameter(1)
  ROOT %call = f32[2048,2048]{{1,0:T(8,128)}} custom-call(%x, %y), custom_call_target="tpu_custom_call", metadata={{op_name="jit(matmul)/matmul_kernel/pallas_call"}}, backend_config={config}
}}
"""


def test_synthetic_pallas_matmul_without_cost_estimate() -> None:
    """Issue 10's v6e case: the trace said 0 bytes; the shapes say a 2048x1024x2048 matmul."""
    kernel = _cost(_pallas_matmul('{"custom_call_config": {"body": "TUzvUgFNTElS"}}'))
    assert kernel.flops == 2 * 2048 * 2048 * 1024  # 8.59 GFLOP
    assert kernel.flops_source == "shape-signature"
    assert kernel.bytes_read + kernel.bytes_written == (2048 * 1024 * 2 + 2048 * 2048) * 4
    assert kernel.bytes_source == "lower-bound"  # >= 33.5 MB, never 0


def test_synthetic_pallas_with_cost_estimate() -> None:
    config = (
        '{"custom_call_config": {"body": "TUzvUgFNTElS", "cost_estimate": {"bytes_accessed":'
        '50331648,"flops":8589934592,"remote_bytes_transferred":0,"transcendentals":7}}}'
    )
    kernel = _cost(_pallas_matmul(config))
    assert (kernel.flops, kernel.transcendentals) == (8589934592, 7)
    assert kernel.flops_source == kernel.bytes_source == "cost-estimate"
    assert kernel.bytes_read + kernel.bytes_written == 50331648
    # an estimate below operands + results is not used for bytes
    low = config.replace("50331648", "1000")
    kernel = _cost(_pallas_matmul(low))
    assert kernel.bytes_read + kernel.bytes_written == (2048 * 1024 * 2 + 2048 * 2048) * 4
    assert kernel.bytes_source == "lower-bound" and any("below" in d for d in kernel.derivation)
    # an estimate more than 2x from what the shapes say: both are shown
    off = config.replace('"flops":8589934592', '"flops":1073741824')
    kernel = _cost(_pallas_matmul(off))
    assert kernel.flops == 1073741824 and any("2x apart" in d for d in kernel.derivation)


def test_synthetic_batched_gemm_with_transposed_rhs() -> None:
    text = """HloModule synthetic_gemm

ENTRY %main (a: bf16[4,512,256], b: bf16[4,1024,256]) -> bf16[4,512,1024] {
  %a = bf16[4,512,256]{2,1,0} parameter(0)
  %b = bf16[4,1024,256]{2,1,0} parameter(1)
  %call = (bf16[4,512,1024]{2,1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["2"],"rhs_contracting_dimensions":["2"],"lhs_batch_dimensions":["0"],"rhs_batch_dimensions":["0"]},"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"},"epilogue":"DEFAULT"}}
  ROOT %out = bf16[4,512,1024]{2,1,0} get-tuple-element(%call), index=0
}
"""
    kernel = _cost(text)
    assert kernel.flops == 2 * 4 * 512 * 1024 * 256
    assert kernel.bytes_written == 4 * 512 * 1024 * 2  # not the 4 MB workspace
    assert kernel.precision == ("DEFAULT", "DEFAULT") and kernel.algorithm is None


def test_synthetic_unknown_target_is_flagged_with_a_lower_bound() -> None:
    text = """HloModule synthetic_unknown

ENTRY %main (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  ROOT %call = f32[1024]{0} custom-call(%x), custom_call_target="my_vendor_kernel"
}
"""
    kernel = _cost(text)
    assert kernel.flops is None and kernel.unknown and kernel.flops_source == "unknown"
    assert (kernel.bytes_read, kernel.bytes_written) == (4096, 4096)
    assert kernel.bytes_source == "lower-bound" and kernel.rule == ""


# ------------------------------------------------------------------------ registry files


def test_example_entry_is_a_valid_user_file(tmp_path) -> None:
    path = tmp_path / "synthetic_kernels.toml"
    path.write_text(EXAMPLE_ENTRY)
    (rule,) = read_kernel_file(path)
    assert rule.matches("my_flash_attention_fwd") and rule.model == "attention-shapes"
    assert rule.params == {"causal": True}


def test_user_rules_come_first_and_builtins_stay(tmp_path) -> None:
    path = tmp_path / "synthetic_kernels.toml"
    path.write_text('[kernels.mine]\ntargets = ["__cublas$*"]\nmodel = "opaque"\n')
    with using_kernel_file(path):
        rules = registry()
    assert rules[0].name == "mine" and rules[0].origin == str(path)
    assert any(rule.name == "te-attention-forward" for rule in rules)
    assert registry()[0].name != "mine"  # in force within the block only


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x = = 1", "not valid TOML"),
        ("[other]\nx = 1", "no \\[kernels.NAME\\]"),
        ('[kernels.a]\ntargets = ["t"]\nmodel = "magic"',
         "kernels.a.model: 'magic' is not allowed \\(allowed: gemm, te-gemm, "),
        ('[kernels.a]\nmodel = "gemm"', "kernels.a: lacks the field 'targets'"),
        ('[kernels.a]\ntargets = ["t"]\nmodel = "gemm"\ncolour = 1',
         "kernels.a: unknown field 'colour' \\(allowed: targets, model, description"),
        ('[kernels.a]\ntargets = []\nmodel = "gemm"', "kernels.a.targets: give at least one"),
        ('[kernels.a]\ntargets = "t"\nmodel = "gemm"', "kernels.a.targets: must be a list"),
    ],
)  # fmt: skip
def test_synthetic_bad_kernel_files(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "synthetic_bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as raised:
        read_kernel_file(path)
    assert str(raised.value).startswith(str(path))


# ------------------------------------------------------------ trace figures and sources


def test_reconcile_trace_figures() -> None:
    # the v6e Pallas matmul: the trace said 0 bytes; the op's own lower bound stays
    value, source, note = reconcile(33554432.0, "lower-bound", 0.0, what="bytes")
    assert (value, source) == (33554432.0, "lower-bound") and "below" in note
    assert reconcile(33554432.0, "lower-bound", 5e7, what="bytes")[:2] == (5e7, "trace")
    assert reconcile(None, "unknown", 1.08e9)[:2] == (1.08e9, "trace")
    # a modelled figure stays; a trace 8x lower is shown beside it
    value, source, note = reconcile(8.59e9, "shape-signature", 1.08e9)
    assert (value, source) == (8.59e9, "shape-signature") and "2x apart" in note
    assert reconcile(8.59e9, "backend-config", 8.0e9) == (8.59e9, "backend-config", None)
    # equal figures agree, 0 and 0 too (a v6e copy-start: no FLOPs in the model or the trace)
    assert reconcile(0.0, "hlo", 0.0) == (0.0, "hlo", None)
    assert reconcile(0.0, "hlo", 1.0e6)[2] is not None  # but 0 against a real figure is shown
    assert weaker_source("hlo", "lower-bound") == "lower-bound"
    assert weaker_source("cost-estimate", "backend-config") == "cost-estimate"


def test_synthetic_apply_hands_sources_precision_and_matrix_math_to_the_op_cost() -> None:
    from profan.chips import get_chip
    from profan.cost.custom_calls import apply
    from profan.cost.model import OpCost

    kernel = KernelCost(8.0, 0.0, 4.0, 2.0, "backend-config", "hlo", dtype="f32",
                        precision=("HIGHEST", "HIGHEST"), model="gemm", matrix_math=True)  # fmt: skip
    cost = apply(kernel, OpCost(0.0, 0.0, 0.0, 0.0))
    assert (cost.flops, cost.hbm_bytes_read, cost.hbm_bytes_written) == (8.0, 4.0, 2.0)
    assert (cost.flops_source, cost.bytes_source) == ("backend-config", "hlo")
    assert cost.precision == ("HIGHEST", "HIGHEST") and cost.matrix_math
    peak = get_chip("h100").peak_flops_per_s(cost.dtype, cost.precision, algorithm=cost.algorithm)
    assert peak.rate == "f32"


def test_synthetic_matrix_math_only_for_matmul_like_kernels() -> None:
    gemm = _cost(_pallas_matmul('{"custom_call_config": {"body": "TUzv"}}'))
    assert gemm.matrix_math  # a Pallas matmul by its shapes
    te = _cost(_te_module("te_fused_attn_forward_ffi", 0))
    assert te.matrix_math
    unknown = _cost(
        _pallas_matmul('{"custom_call_config": {"body": "TUzv"}}').replace(
            "tpu_custom_call", "my_vendor_kernel"
        )
    )
    assert not unknown.matrix_math and unknown.flops is None


def test_synthetic_reconcile_upper_bound() -> None:
    # a pasted fusion line: every operand and result charged in full, an upper bound
    assert reconcile(4e9, "upper-bound", 1e9, what="bytes")[:2] == (1e9, "trace")
    value, source, note = reconcile(4e9, "upper-bound", 5e9, what="bytes")
    assert (value, source) == (4e9, "upper-bound") and "above" in note
    assert weaker_source("upper-bound", "trace") == "upper-bound"
    assert weaker_source("upper-bound", "lower-bound") == "lower-bound"

"""Kernel cost models on REAL custom calls: the GPU fixtures, recorded on an H100 and on an H200
(cuBLASLt incl. fp8, cuDNN conv, cuDNN fused attention forward and backward, Pallas on Triton)
against meta.json's hand-worked truth, the MI300X corpus traces' gemm calls, and the
TransformerEngine / cuDNN / Mosaic calls in XLA's own HLO (../shared/corpus/hlo)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import profan
from profan.chips import chip_for_device
from profan.cost.bytes import in_hbm
from profan.cost.custom_calls import kernel_call
from profan.cost.estimate import CostModel
from profan.cost.kernels import cost_kernel
from profan.hlo import parse_file
from profan.hlo.graph import scheduled_computations
from profan.hlo.model import Instruction, Module
from profan.hlo.views import backend_config, called_computations, custom_call_target
from tests.conftest import FIXTURES_DIR, REPO_ROOT, gpu_fixtures

ROOT = REPO_ROOT


def _modules(group: str) -> dict[str, Module]:
    return {
        path.name.split(".")[1]: parse_file(str(path))
        for path in (FIXTURES_DIR / group / "hlo").glob("*after_optimizations.txt")
    }


def _truth(group: str) -> dict[str, dict]:
    meta = json.loads((FIXTURES_DIR / group / "meta.json").read_text())
    return {program["module_name"]: program["truth"] for program in meta["programs"]}


def _custom_calls(module: Module) -> list[Instruction]:
    return [i for c in module.computations for i in c.instructions if i.opcode == "custom-call"]


def _kernel(module: Module, instruction: Instruction):
    return cost_kernel(kernel_call(instruction, CostModel(module)))


# ----------------------------------------------------------------------- H100 / H200 fixtures

KERNELS = gpu_fixtures("gpu_kernels")


GEMMS = ["jit_matmul_f32", "jit_matmul_f32_highest", "jit_matmul_bf16", "jit_matmul_bf16_bias_gelu",
         "jit_matmul_fp8", "jit_matmul_f64", "jit_matmul_c64"]  # fmt: skip


@pytest.mark.parametrize("group", KERNELS)
@pytest.mark.parametrize("name", GEMMS)
def test_cublas_gemms_match_the_hand_worked_flops(group: str, name: str) -> None:
    module = _modules(group)[name]
    (call,) = _custom_calls(module)
    kernel = _kernel(module, call)
    assert kernel.flops == _truth(group)[name]["flops"]
    assert (kernel.model, kernel.flops_source, kernel.bytes_source) == (
        "gemm", "backend-config", "hlo")  # fmt: skip
    # bytes: every operand once plus the result, not the s8[33554432] cuBLAS workspace
    lhs, rhs = (module.entry.get(o.name.lstrip("%")) for o in call.operands[:2])
    minimum = sum(s.num_elements * s.element_bits // 8 for s in (lhs.shape, rhs.shape))
    result = call.shape.tuple_shapes[0]
    minimum += result.num_elements * result.element_bits // 8
    extra = sum(
        o.shape.num_elements * o.shape.element_bits // 8
        for o in (module.entry.get(p.name.lstrip("%")) for p in call.operands[2:])
    )  # bias, fp8 scales
    assert kernel.bytes_read + kernel.bytes_written == minimum + extra
    precision = backend_config(call)["gemm_backend_config"]["precision_config"]
    assert list(kernel.precision) == precision["operand_precision"]


@pytest.mark.parametrize("group", KERNELS)
def test_cudnn_convolution_counts_valid_taps(group: str) -> None:
    module = _modules(group)["jit_conv_bf16"]
    (call,) = _custom_calls(module)
    kernel = _kernel(module, call)
    assert kernel.flops == _truth(group)["jit_conv_bf16"]["flops_valid_taps"]
    assert kernel.model == "convolution" and kernel.flops_source == "hlo"


@pytest.mark.parametrize("group", KERNELS)
def test_cudnn_fused_attention_forward_causal_and_full_and_backward(group: str) -> None:
    modules, truth = _modules(group), _truth(group)
    # [2, 2048, 16, 128] bf16; causal: row i sees i + 1 keys -> 2048 * 2049 / 2 pairs per head
    causal_pairs = 2048 * 2049 // 2
    (forward,) = _custom_calls(modules["jit_attention_cudnn"])
    kernel = _kernel(modules["jit_attention_cudnn"], forward)
    assert kernel.flops == 2 * 2 * 16 * causal_pairs * (128 + 128)
    assert kernel.flops == pytest.approx(
        truth["jit_attention_cudnn"]["forward_causal_half"], rel=1e-3
    )  # 2049/4096 vs 1/2
    assert kernel.transcendentals == 2 * 16 * causal_pairs
    grad = modules["jit_attention_cudnn_grad"]
    by_target = {custom_call_target(c): _kernel(grad, c) for c in _custom_calls(grad)}
    assert (
        by_target["__cudnn$fmhaSoftmax"].flops == truth["jit_attention_cudnn_grad"]["forward_full"]
    )
    backward = by_target["__cudnn$fmhaSoftmaxBackward"]
    assert backward.flops == truth["jit_attention_cudnn_grad"]["backward_full"]
    assert backward.flops == 2.5 * truth["jit_attention_cudnn_grad"]["forward_full"]
    # the backward writes dQ, dK, dV (3 x 16 MiB), not its 33.8 MB workspace
    assert backward.bytes_written == 3 * 2 * 2048 * 16 * 128 * 2


@pytest.mark.parametrize("group", KERNELS)
@pytest.mark.parametrize("name", ["jit_pallas_matmul", "jit_pallas_matmul_with_cost"])
def test_pallas_triton_matmul_by_its_shapes_and_never_zero_bytes(group: str, name: str) -> None:
    module = _modules(group)[name]
    (call,) = _custom_calls(module)
    kernel = _kernel(module, call)
    truth = _truth(group)[name]
    assert kernel.flops == truth["flops"] and kernel.flops_source == "shape-signature"
    assert kernel.bytes_read + kernel.bytes_written == truth["min_hbm_bytes"]
    assert kernel.bytes_source == "lower-bound"


@pytest.mark.parametrize("group", gpu_fixtures("gpu_transformer"))
def test_transformer_train_step_matmul_and_attention_flops(group: str) -> None:
    """Every FLOP of the scanned 4-layer train step's gemms (cuBLAS calls and Triton gemm
    fusions) times its execution count adds up to the hand-worked dense matmul FLOPs."""
    truth = _truth(group)["jit_train_step"]
    module = _modules(group)["jit_train_step"]
    model = CostModel(module)
    dense = attention = 0.0
    for scheduled in scheduled_computations(module):
        for instruction in scheduled.computation.instructions:
            if instruction.opcode == "custom-call":
                kernel = cost_kernel(kernel_call(instruction, model))
                if kernel.model == "gemm":
                    dense += kernel.flops * scheduled.count
                elif kernel.model == "cudnn-fmha" and "Backward" not in (
                    custom_call_target(instruction) or ""
                ):
                    attention += kernel.flops * scheduled.count
            elif instruction.opcode == "fusion" and "gemm_fusion" in instruction.name:
                body = module.computation(called_computations(instruction)[0])
                dots = [i for i in body.instructions if i.opcode == "dot"]
                dense += sum(model.estimate(dot).flops or 0.0 for dot in dots) * scheduled.count
    assert dense == truth["dense_matmul_flops_train"]
    layers = truth["scan_layers"]
    expected = layers * truth["attention_flops_forward_causal_per_layer"]
    assert attention == pytest.approx(expected, rel=2e-3)  # 1025/2048 pairs vs "half"


# ---------------------------------------------------------------------------- MI300X corpus


@pytest.mark.parametrize("trace", ["mi300x_jax08_gemm", "mi300x_jax08_attention"])
def test_mi300x_gemm_calls_are_costed_and_below_the_peak(corpus_dir: Path, trace: str) -> None:
    profile = profan.load(str(corpus_dir / "traces" / f"{trace}.xplane.pb"))
    chip = chip_for_device(profile.device)
    durations = profile.ops.groupby(["module_key", "op_name"]).duration_s.min()
    checked = 0
    for key, module in profile.modules.items():
        model = CostModel(module)
        for call in _custom_calls(module):
            kernel = cost_kernel(kernel_call(call, model))
            assert kernel.model == "gemm" and kernel.flops_source == "backend-config"
            lhs, rhs = (model.operand_shape(call, i) for i in (0, 1))
            dnums = backend_config(call)["gemm_backend_config"]["dot_dimension_numbers"]
            k = lhs.dims[int(dnums["lhs_contracting_dimensions"][0])]
            batch = math.prod(lhs.dims[int(d)] for d in dnums["lhs_batch_dimensions"])
            m = lhs.num_elements // (k * batch)
            n = rhs.num_elements // (k * batch)
            assert kernel.flops == 2 * batch * m * n * k  # hand formula from the operand shapes
            seconds = durations.get((key, call.name))
            if seconds is not None:
                peak = chip.peak_flops_per_s(kernel.dtype, kernel.precision or None)
                assert kernel.flops / seconds <= peak.flops_per_s
                checked += 1
    assert checked >= 4


# ------------------------------------------------------------------- XLA's own HLO (corpus)


def _corpus_calls(corpus_dir: Path, target: str) -> list[tuple[Path, Module, Instruction]]:
    found = []
    for path in sorted((corpus_dir / "hlo" / "xla").glob("*.hlo")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if f'custom_call_target="{target}"' not in text:
            continue
        module = parse_file(str(path))
        found += [
            (path, module, c) for c in _custom_calls(module) if custom_call_target(c) == target
        ]
    return found


@pytest.mark.parametrize("target", ["te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi"])
def test_transformer_engine_attention_in_xla_benchmarks(corpus_dir: Path, target: str) -> None:
    calls = _corpus_calls(corpus_dir, target)
    assert len(calls) >= 10
    masks = set()
    for _path, module, call in calls:
        config = backend_config(call)
        kernel = _kernel(module, call)
        b, h = config["input_batch"], config["attn_heads"]
        sq, skv = config["q_max_seqlen"], config["kv_max_seqlen"]
        dqk, dv = config["qk_head_dim"], config["v_head_dim"]
        mask = config["mask_type"]
        masks.add(mask)
        # NVTE mask 0 = none (every pair), 2/3 = causal top-left: row i sees i + 1 keys
        pairs = sq * skv if mask == 0 else sum(min(i + 1, skv) for i in range(sq))
        per_pair = dqk + dv if "forward" in target else 3 * dqk + 2 * dv
        assert kernel.flops == 2 * b * h * pairs * per_pair
        assert kernel.flops_source == "backend-config" and kernel.bytes_read > 0
        # GQA: K/V carry num_gqa_groups heads, the FLOPs follow the query heads
        assert config["num_gqa_groups"] < h
    assert {0, 3} <= masks


def test_other_kernels_in_xla_tests(corpus_dir: Path) -> None:
    (_path, module, call), *_ = _corpus_calls(corpus_dir, "__op$block_scaled_dot")
    kernel = _kernel(module, call)
    lhs = CostModel(module).operand_shape(call, 0)
    assert kernel.flops == 2 * call.shape.num_elements * lhs.dims[-1]
    for _path, module, call in _corpus_calls(corpus_dir, "__cudnn$convBackwardInput"):
        kernel = _kernel(module, call)
        assert kernel.model == "convolution" and (kernel.flops or 0) > 0
    mosaic = _corpus_calls(corpus_dir, "tpu_custom_call")
    estimated = 0
    for _path, module, call in mosaic:
        kernel = _kernel(module, call)
        lower = sum(  # operands plus results, in HBM
            leaf.num_elements * leaf.element_bits // 8
            for shape in [*CostModel(module).operand_shapes(call), call.shape]
            if shape is not None
            for leaf in shape.leaves()
            if leaf.is_array and in_hbm(leaf)
        )
        assert kernel.model == "pallas"
        estimate = (backend_config(call) or {}).get("custom_call_config", {}).get("cost_estimate")
        if estimate is None:
            assert kernel.flops is None or kernel.flops_source == "shape-signature"
            assert kernel.bytes_source == "lower-bound"
            assert kernel.bytes_read + kernel.bytes_written >= lower  # never 0 bytes
            continue
        # a real Mosaic kernel (XLA's memory-space-assignment test) with its cost estimate
        estimated += 1
        assert kernel.flops == float(estimate["flops"]) and kernel.flops_source == "cost-estimate"
        stated = float(estimate["bytes_accessed"])
        assert stated >= lower
        assert kernel.bytes_read + kernel.bytes_written == pytest.approx(stated)
        assert kernel.bytes_source == "cost-estimate"
    assert estimated >= 1

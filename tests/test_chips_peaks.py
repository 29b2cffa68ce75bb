"""Precision-aware peaks and megacore figures of the chip catalogue.

The real check: every library gemm, convolution and attention call of the GPU fixture
(``fixtures/gpu_kernels``, recorded on an H100, and ``fixtures/gpu_kernels_h200``) ran below the
peak ``peak_flops_per_s`` gives for its operand dtype and precision, while the f32
DEFAULT-precision and c64 gemms ran far above the plain FP32 rate (they ran on tensor cores as
TF32, as XLA's rule says).
"""

from __future__ import annotations

import json

import pytest

import profan
from profan.chips import Chip, chip_for_device, get_chip
from profan.hlo import parse_file
from profan.hlo.views import backend_config
from tests.conftest import FIXTURES_DIR, gpu_chip, gpu_fixtures

# ---------------------------------------------------------------------------- TPU


@pytest.mark.parametrize(
    ("precision", "passes"), [(None, 1), ("DEFAULT", 1), ("HIGH", 3), ("HIGHEST", 6)]
)
def test_tpu_f32_dot_takes_1_3_or_6_bf16_passes(precision: str | None, passes: int) -> None:
    v6e = get_chip("tpu-v6e")
    peak = v6e.peak_flops_per_s("f32", precision)
    assert peak.flops_per_s == pytest.approx(9.2e14 / passes)
    assert (peak.rate, peak.divisor) == ("bf16", passes)
    assert "bf16 pass" in peak.source and "chips.toml tpu-v6e peak_flops.bf16" in peak.source


def test_tpu_highest_operand_precision_wins_and_algorithms_name_their_passes() -> None:
    v5e = get_chip("tpu-v5e")
    assert v5e.peak_flops_per_s("f32", ["DEFAULT", "HIGHEST"]).divisor == 6
    assert v5e.peak_flops_per_s("f32", ["highest", "default"]).divisor == 6  # HLO text is lower
    x3 = v5e.peak_flops_per_s("f32", algorithm="dot_bf16_bf16_f32_x3")
    assert x3.flops_per_s == pytest.approx(1.97e14 / 3) and "x3" in x3.source
    assert v5e.peak_flops_per_s("f32", algorithm="ALG_DOT_BF16_BF16_F32_X6").divisor == 6
    assert v5e.peak_flops_per_s("f32", algorithm="ALG_UNSET").divisor == 1  # unset = precision
    # the HLO attribute text as printed: operand_precision={highest,highest}, algorithm=...
    assert v5e.peak_flops_per_s("f32", "{highest,highest}").divisor == 6
    assert v5e.peak_flops_per_s("f32", "{default,high}").divisor == 3
    assert v5e.peak_flops_per_s("f32", "dot_bf16_bf16_f32_x3").divisor == 3


def test_tpu_bf16_int8_fp8_and_complex() -> None:
    v6e = get_chip("tpu-v6e")
    assert v6e.peak_flops_per_s("bf16").flops_per_s == 9.2e14
    assert v6e.peak_flops_per_s("f16").flops_per_s == 9.2e14
    assert v6e.peak_flops_per_s("s8").flops_per_s == 1.84e15
    fp8 = v6e.peak_flops_per_s("f8e4m3fn")  # no fp8 rate on v6e: converted, bf16 rate
    assert fp8.flops_per_s == 9.2e14 and "no fp8 rate" in fp8.source
    c64 = v6e.peak_flops_per_s("c64", "HIGHEST")  # 6 passes x 4 real FMAs per complex FMA
    assert c64.flops_per_s == pytest.approx(9.2e14 / 24) and c64.divisor == 24
    f64 = v6e.peak_flops_per_s("f64")
    assert f64.flops_per_s == pytest.approx(9.2e14 / 6) and "emulates f64" in f64.source


def test_tpu_v3_device_is_one_core_and_megacore_chips_split_per_core() -> None:
    v3 = get_chip("tpu-v3")  # two TensorCores, each its own device
    assert v3.peak_flops_per_s("bf16").flops_per_s == pytest.approx(0.7e14)
    assert "2 devices per chip" in v3.peak_flops_per_s("bf16").source
    assert (v3.tensorcores_per_chip, v3.megacore) == (2, False)
    assert v3.per_core() is v3
    for name, bf16, hbm in (("tpu-v4", 2.75e14, 1.2e12), ("tpu-v5p", 4.59e14, 2.8e12)):
        chip = get_chip(name)
        assert (chip.tensorcores_per_chip, chip.megacore, chip.devices_per_chip) == (2, True, 1)
        core = chip.per_core()
        assert core.peak_flops_per_s("bf16").flops_per_s == pytest.approx(bf16 / 2)
        assert core.device_hbm_bytes_per_s == pytest.approx(hbm / 2)
        assert "per TensorCore" in core.figure_sources["accounting"]
        assert not core.megacore and core.ici_link_bytes_per_s_uni == chip.ici_link_bytes_per_s_uni
    for name in ("tpu-v5e", "tpu-v6e"):
        assert get_chip(name).tensorcores_per_chip == 1 and not get_chip(name).megacore


# ---------------------------------------------------------------------------- GPU


def test_nvidia_f32_runs_as_tf32_unless_highest() -> None:
    h100 = get_chip("h100")
    default = h100.peak_flops_per_s("f32", ["DEFAULT", "DEFAULT"])
    assert default.flops_per_s == 4.945e14 and default.rate == "tf32"
    assert h100.peak_flops_per_s("f32", "HIGH").rate == "tf32"  # XLA: precision <= HIGH
    highest = h100.peak_flops_per_s("f32", "HIGHEST")
    assert highest.flops_per_s == 6.7e13 and highest.rate == "f32"
    assert h100.peak_flops_per_s("f32", algorithm="ALG_DOT_F32_F32_F32").rate == "f32"
    assert h100.peak_flops_per_s("f32", algorithm="ALG_DOT_TF32_TF32_F32").rate == "tf32"
    assert h100.peak_flops_per_s("c64").flops_per_s == pytest.approx(4.945e14 / 4)
    assert h100.peak_flops_per_s("c128").flops_per_s == pytest.approx(6.7e13 / 4)
    assert h100.peak_flops_per_s("f8e5m2").flops_per_s == 1.979e15
    assert h100.peak_flops_per_s("f64").flops_per_s == 6.7e13


def test_rocm_f32_gemms_stay_at_the_f32_rate() -> None:
    mi300x = get_chip("mi300x")
    peak = mi300x.peak_flops_per_s("f32")
    assert peak.flops_per_s == 1.634e14 and "ROCm" in peak.source
    assert mi300x.peak_flops_per_s("bf16").flops_per_s == 1.3074e15


def test_trace_peak_feeds_the_derived_rates() -> None:
    from profan.trace.profile import DeviceInfo

    device = DeviceInfo(kind="TPU", type_string="TPU v6 Lite", count=4, peak_flops_per_s=918e12)
    chip = chip_for_device(device)
    peak = chip.peak_flops_per_s("f32", "HIGHEST")
    assert peak.flops_per_s == pytest.approx(918e12 / 6)
    assert peak.source.startswith("the trace's own peak peak_flops.bf16")


def _gemm_precision(line_config: dict) -> tuple[list[str], str | None]:
    gemm = line_config.get("gemm_backend_config", {})
    precision = gemm.get("precision_config", {})
    return precision.get("operand_precision", []), precision.get("algorithm")


@pytest.mark.parametrize("name", gpu_fixtures("gpu_kernels"))
def test_every_library_call_of_the_gpu_fixture_runs_below_its_precision_aware_peak(
    name: str,
) -> None:
    """Real: measured FLOP/s of each cuBLAS/cuDNN call (meta.json's hand-worked FLOPs over the
    trace's mean duration) stays below the peak for its dtype and precision."""
    folder = FIXTURES_DIR / name
    meta = json.loads((folder / "meta.json").read_text())
    truth = {program["module_name"]: program["truth"] for program in meta["programs"]}
    profile = profan.load(str(folder / "trace"))
    chip: Chip = chip_for_device(profile.device)
    assert chip.name == gpu_chip(name)
    modules = {
        path.name.split(".")[1]: parse_file(path)
        for path in (folder / "hlo").glob("*after_optimizations.txt")
    }
    durations = profile.ops.groupby(["module", "op_name"]).duration_s.mean()
    checked: dict[str, tuple[float, float, float]] = {}
    for (module_name, op_name), seconds in durations.items():
        module = modules.get(module_name)
        instruction = module.entry.get(op_name) if module else None
        if instruction is None or instruction.opcode != "custom-call":
            continue
        target = instruction.attributes.get("custom_call_target", "").strip('"')
        facts = truth[module_name]
        if "fmha" in target:
            flops = facts["backward_full"] if "Backward" in target else facts["forward_causal_half"]
            if module_name == "jit_attention_cudnn_grad" and "Backward" not in target:
                flops = facts["forward_full"]
        else:
            flops = facts.get("flops_valid_taps", facts.get("flops"))
        if flops is None:
            continue  # a call the program's truth has no figure for (jit_attention_xla's gemm)
        config = backend_config(instruction) or {}
        precision, algorithm = _gemm_precision(config)
        operand = module.entry.get(instruction.operands[0].name.lstrip("%"))
        dtype = operand.shape.dtype if operand is not None else instruction.shape.dtype
        peak = chip.peak_flops_per_s(dtype, precision or None, algorithm=algorithm)
        achieved = flops / seconds
        checked[module_name] = (achieved, peak.flops_per_s, chip.peak_flops["f32"])
        assert achieved <= peak.flops_per_s, (module_name, target, achieved, peak)
    expected = {
        "jit_matmul_f32", "jit_matmul_f32_highest", "jit_matmul_bf16", "jit_matmul_fp8",
        "jit_matmul_f64", "jit_matmul_c64", "jit_conv_bf16", "jit_attention_cudnn",
        "jit_attention_cudnn_grad", "jit_matmul_bf16_bias_gelu",
    }  # fmt: skip
    assert expected <= set(checked)
    # Without the TF32 rule these two would run at 4x and 2.4x the FP32 peak: impossible.
    for name, factor in (("jit_matmul_f32", 3.0), ("jit_matmul_c64", 2.0)):
        achieved, _, f32 = checked[name]
        divisor = 4 if name.endswith("c64") else 1
        assert achieved > factor * f32 / divisor
    # HIGHEST stays on the FP32 units: below the FP32 peak.
    assert checked["jit_matmul_f32_highest"][0] < chip.peak_flops["f32"]
    # fp8 ran faster than the bf16 peak allows: the fp8 rate is needed.
    assert checked["jit_matmul_fp8"][0] > chip.peak_flops["bf16"]

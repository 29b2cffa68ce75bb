"""The compute term of matrix math uses the peak its operand dtype and precision select
(``Chip.peak_flops_per_s``): the GPU fixtures' library calls (recorded on an H100 and on an H200,
the same peaks), and XLA-printed dot lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import profan
from profan.chips import get_chip
from profan.cost import estimate
from profan.hlo.parser import parse_module
from profan.roofline import Score, op_times, score
from tests.conftest import FIXTURES_DIR, gpu_chip, gpu_fixtures


@pytest.fixture(scope="module", params=gpu_fixtures("gpu_kernels"))
def kernels_folder(request: pytest.FixtureRequest) -> Path:
    return FIXTURES_DIR / request.param


@pytest.fixture(scope="module")
def gpu_kernels(kernels_folder: Path) -> Score:
    folder = kernels_folder
    result = score(profan.load(str(folder / "trace"), hlo=str(folder / "hlo")))
    assert result.chip.name == gpu_chip(folder.name)
    return result


# Which rate each library matmul of the fixture runs at, by XLA's rules on NVIDIA: f32 at DEFAULT
# precision as TF32 on tensor cores, at HIGHEST as true f32; c64 as TF32 with a complex FMA
# counting 4 real ones; bf16, fp8 and f64 at their own rates.
EXPECTED_PEAKS = {
    "jit_matmul_f32": "tf32",
    "jit_matmul_f32_highest": "f32",
    "jit_matmul_bf16": "bf16",
    "jit_matmul_fp8": "fp8",
    "jit_matmul_f64": "f64",
    "jit_matmul_c64": "tf32/4",
}


def test_library_matmuls_run_at_their_precisions_peak(gpu_kernels: Score) -> None:
    chip = gpu_kernels.chip
    for module, label in EXPECTED_PEAKS.items():
        rows = [op for op in gpu_kernels.ops if op.module == module]
        row = next(op for op in rows if op.opcode == "custom-call") if len(rows) > 1 else rows[0]
        assert row.peak == label, module
        rate, _, divisor = label.partition("/")
        peak = chip.peak_flops[rate] / int(divisor or 1)  # one device per H100 / H200
        assert row.t_compute_s == pytest.approx(row.flops / peak, rel=1e-12), module


def test_no_gpu_kernel_beats_its_roofline(gpu_kernels: Score) -> None:
    # the f32 DEFAULT gemm was at 406% of the f32 (non-tensor-core) peak: it ran as TF32
    efficiency = [op.efficiency for op in gpu_kernels.ops if op.efficiency is not None]
    assert len(efficiency) > 10 and all(value <= 1.0 for value in efficiency)


def _dot_module(precision: str) -> str:
    attribute = f", operand_precision={{{precision},{precision}}}" if precision else ""
    return (
        "HloModule synthetic_dot\n\n"
        "ENTRY %main (a: f32[1024,512], b: f32[512,256]) -> f32[1024,256] {\n"
        "  %a = f32[1024,512]{1,0} parameter(0)\n"
        "  %b = f32[512,256]{1,0} parameter(1)\n"
        "  ROOT %dot = f32[1024,256]{1,0} dot(%a, %b), lhs_contracting_dims={1}, "
        f"rhs_contracting_dims={{0}}{attribute}\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("chip_name", "precision", "label", "rate", "divisor"),
    [
        ("tpu-v5e", "", "bf16", "bf16", 1),  # DEFAULT: one bf16 pass on the MXU
        ("tpu-v5e", "high", "bf16/3", "bf16", 3),
        ("tpu-v5e", "highest", "bf16/6", "bf16", 6),
        ("h100", "default", "tf32", "tf32", 1),
        ("h100", "highest", "f32", "f32", 1),
    ],
)
def test_synthetic_f32_dot_peak_follows_operand_precision(
    chip_name: str, precision: str, label: str, rate: str, divisor: int
) -> None:
    module = parse_module(_dot_module(precision))
    dot = module.entry.root
    cost = estimate(dot, module)
    assert cost.matrix_math and cost.flops == 2 * 1024 * 256 * 512
    assert cost.precision == ((precision.upper(),) * 2 if precision else ())
    chip = get_chip(chip_name)
    times = op_times(cost, chip)
    assert times.peak == label
    per_device = chip.peak_flops[rate] / divisor / chip.devices_per_chip
    assert times.t_compute_s == pytest.approx(cost.flops / per_device, rel=1e-12)


def test_elementwise_math_keeps_its_dtype_rate() -> None:
    module = parse_module(
        "HloModule synthetic_add\n\nENTRY %main (a: f32[4096]) -> f32[4096] {\n"
        "  %a = f32[4096]{0} parameter(0)\n"
        "  ROOT %add = f32[4096]{0} add(%a, %a)\n}\n"
    )
    cost = estimate(module.entry.root, module)
    h100 = get_chip("h100")
    times = op_times(cost, h100)
    assert not cost.matrix_math and times.peak == "f32"
    assert times.t_compute_s == pytest.approx(4096 / h100.peak_flops["f32"])


def test_gpu_ffts_count_5_n_log2_n_as_the_fixture_truth_says(
    gpu_kernels: Score, kernels_folder: Path
) -> None:
    # meta.json truth: 256 transforms of 4,096 points (1-D and 64x64) = 62,914,560 FLOPs; the real
    # transform half that.  (XLA's cost_analysis says 100,663,296 and 301,989,888: another
    # formula, which grows with the number of dims; profan follows the FFT literature.)
    truth = {
        p["module_name"]: p["truth"]
        for p in json.loads((kernels_folder / "meta.json").read_text())["programs"]
        if "fft" in p["name"]
    }
    ffts = [op for op in gpu_kernels.ops if op.opcode == "fft"]
    ops = {op.module: op for op in ffts}
    assert len(ops) == len(ffts) and set(ops) == set(truth)
    for module, facts in truth.items():
        row = ops[module]
        expected = facts.get("flops") or facts["flops_complex_equivalent"] / 2
        assert row.flops == expected * row.occurrences, module

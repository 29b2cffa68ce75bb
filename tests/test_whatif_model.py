"""The carry-over model: its parameters re-fitted from the H100 -> H200 pairs only, the other
direction as the check; and MODEL.md section 7 through the projection's own functions."""

from __future__ import annotations

import pytest

from profan.chips import get_chip
from profan.whatif import scaling
from profan.whatif.carry import Sustained, carry_over
from profan.whatif.fit import fit_carry_over, loss, pairs
from tests.test_whatif_chip import CHIP, _report

GROUPS = ("gpu_kernels", "gpu_transformer", "gpu_transformer_nocb")


def _pairs(src: str, tgt: str) -> list:
    out = []
    for group in GROUPS:
        source = _report(group + src)
        out += pairs(source, _report(group + src, CHIP[tgt]), _report(group + tgt))
    return out


def test_parameters_are_the_fit_of_one_direction() -> None:
    model = carry_over()
    fit = fit_carry_over(_pairs("", "_h200"))
    h200 = model.sustained("h200")
    assert (fit.fixed_s, fit.knee) == pytest.approx((model.fixed_s, model.knee))
    assert (fit.compute, fit.hbm) == pytest.approx((h200.compute, h200.hbm))
    assert fit.rms_log <= model.op_residual
    # the grid's numpy arithmetic is project_execution's: the loss recomputed one pair at a time
    again = loss(_pairs("", "_h200"), fit.fixed_s, fit.knee, Sustained(), h200)
    assert again[0] == pytest.approx(fit.mean_abs_log, rel=1e-9)
    # an op at its roofline gains the spec sheet's HBM ratio (4.8/3.35 = 1.43) within 2%
    assert 1.40 < fit.hbm * 4.8 / 3.35 < 1.45


def test_other_direction_holds() -> None:
    """H200 -> H100, never fitted: the model's loss there is no worse than in the fit direction,
    and beats spec-sheet scaling and the model without the knee (3 parameters, refitted)."""
    model = carry_over()
    back = _pairs("_h200", "")
    h200, h100 = model.sustained("h200"), model.sustained("h100")
    mean_abs, rms = loss(back, model.fixed_s, model.knee, h200, h100)
    spec, _ = loss(back, 0.0, 0.0, Sustained(), Sustained())
    no_knee, _ = loss(back, 1.5e-6, 0.0, Sustained(1.025, 0.93), h100)  # 2903f03's parameters
    assert rms <= model.op_residual
    assert mean_abs <= fit_carry_over(_pairs("", "_h200")).mean_abs_log
    assert mean_abs < no_knee < spec


def test_model_section_7() -> None:
    v5p = get_chip("tpu-v5p")
    peak = v5p.peak_flops["bf16"]
    per_token = scaling.training_flops_per_token(70e9)
    assert per_token == pytest.approx(4.2e11)
    assert scaling.seconds_per_token(per_token, peak) == pytest.approx(1e-3, rel=0.1)
    run = scaling.run_seconds(15e12, per_token, 8960, peak, 0.4)
    assert run == pytest.approx(3.8e6, rel=0.02) and run / 86400 == pytest.approx(44, abs=1)
    one_chip = scaling.run_seconds(15e12, per_token, 1, peak, 1.0) / (365 * 86400)
    assert one_chip == pytest.approx(435, rel=0.01)
    ici = v5p.ici_link_bytes_per_s_bi
    assert scaling.comm_bound_tokens_per_chip(peak, ici) == pytest.approx(2550, rel=0.01)
    assert scaling.comm_bound_tokens_per_chip(peak, ici, axes=3) == pytest.approx(850, rel=0.01)
    assert scaling.is_comm_bound(4.19e6, 8960, peak, ici, axes=3)
    assert not scaling.is_comm_bound(4.19e6, 1000, peak, ici, axes=3)
    assert scaling.best_fsdp_degree(4.19e6, 8960, 28672) == pytest.approx(1618, rel=0.01)

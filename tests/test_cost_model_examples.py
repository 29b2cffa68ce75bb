"""MODEL.md section 5b's worked examples (and section 1's critical intensities) as tests."""

from __future__ import annotations

import pytest

from profan.chips import get_chip
from profan.cost import estimate
from profan.cost.bytes import array_bytes, padded_dims
from profan.hlo.model import Layout, Shape
from profan.hlo.parser import parse_instruction
from profan.roofline.interconnect import collective_time


def test_matmul_95_6_ms_on_eight_tpu_v2_cores() -> None:
    # 4-way DP x 2-way MP matmul, global [32*1024, 8192] x [8192, 32768], 8 TPU v2 cores
    dot = parse_instruction(
        "%dot = bf16[32768,32768]{1,0} dot(bf16[32768,8192]{1,0} %x, bf16[8192,32768]{1,0} %w), "
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    )
    cost = estimate(dot)
    assert cost.flops == 2 * 32 * 1024 * 8192 * 32768
    assert cost.dtype == "bf16"
    core = get_chip("tpu-v2")
    seconds = cost.flops / (core.device_peak_flops("bf16") * 8)
    assert seconds == pytest.approx(95.6e-3, rel=0.005)  # measured 96 ms: at the roofline


def test_reduce_scatter_1_1_ms_on_tpu_v2() -> None:
    # a ReduceScatter of a 134 MB shard on a TPU v2 4x2, over one hop (an axis of 2)
    timing = collective_time("reduce-scatter", 134_000_000, 2, get_chip("tpu-v2"))
    assert timing.t_s == pytest.approx(1.1e-3, rel=0.02)  # measured 1.13 ms
    assert not timing.latency_bound


def _all_gather_y(e: int, f: int, *, axis_with_wraparound: bool) -> float:
    # AllGather_Y([E_Y, F]) on TPU v5e, mesh {X: 8, Y: 4}, bf16: V = E x F x 2 bytes
    v5e = get_chip("tpu-v5e")
    full_bytes = e * f * 2
    # Y is 4 long: v5e has no wraparound there; a 16-long axis would have it.
    axis = 16 if axis_with_wraparound else 4
    return collective_time("all-gather", full_bytes, 4, v5e, axis_sizes=(axis,)).t_s


def test_all_gather_377_us_with_a_full_ring() -> None:
    # MODEL.md rounds V = 2048 x 8192 x 2 = 33.55 MB up to "34 MB": 373 us exactly, 377 us there
    assert _all_gather_y(2048, 8192, axis_with_wraparound=True) == pytest.approx(377e-6, rel=0.02)


def test_all_gather_560_us_without_wraparound() -> None:
    # 3 hops of an 8.4 MB shard at 4.5e10 B/s (a real profile showed 680 us)
    assert _all_gather_y(2048, 8192, axis_with_wraparound=False) == pytest.approx(560e-6, rel=0.01)


def test_small_all_gather_is_latency_bound_at_3_us() -> None:
    v5e = get_chip("tpu-v5e")
    timing = collective_time("all-gather", 256 * 256 * 2, 4, v5e)  # 32 kB shards
    assert timing.latency_bound
    assert timing.t_s == pytest.approx(3e-6, rel=0.01)  # measured 8 us


def test_padding_3x5_to_4x6() -> None:
    shape = Shape("f32", (3, 5), layout=Layout((1, 0), tiles=((2, 2),)))
    assert padded_dims(shape) == (4, 6)
    assert array_bytes(shape) == 4 * 6 * 4


def test_critical_batch_sizes() -> None:
    # A bf16 [B,D]x[D,F] matmul is compute-bound once B exceeds peak / HBM bandwidth.
    assert get_chip("tpu-v5e").critical_intensity_bf16 == pytest.approx(240, rel=0.02)
    assert get_chip("h100").critical_intensity_bf16 == pytest.approx(300, rel=0.02)


def test_latency_threshold_45_kb_on_v5e() -> None:
    # MODEL.md 4: a buffer under ~W_uni x 1 us (45 kB on v5e) is latency-bound
    v5e = get_chip("tpu-v5e")
    assert v5e.ici_link_bytes_per_s_uni * v5e.ici_hop_latency_s == pytest.approx(45e3)


def test_wraparound_rules_per_chip() -> None:
    # MODEL.md 4: v5e/v6e wrap only axes of 16; v4/v5p axes that are whole 4x4x4 cubes
    v5e, v5p = get_chip("tpu-v5e"), get_chip("tpu-v5p")
    assert v5e.has_wraparound(16) and not v5e.has_wraparound(8)
    assert v5p.has_wraparound(8, slice_devices=512) and not v5p.has_wraparound(8, slice_devices=32)
    assert not v5p.has_wraparound(6)
    full = collective_time("all-gather", 10**8, 8, v5p, slice_devices=512)
    partial = collective_time("all-gather", 10**8, 8, v5p, slice_devices=32)
    # without the wraparound only one direction is usable: about twice as slow
    assert partial.t_s == pytest.approx(full.t_s * 2 * 7 / 8)

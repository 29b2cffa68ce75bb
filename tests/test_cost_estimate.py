"""Per-instruction costs: dots, convolutions, elementwise, reductions, fusions, custom calls."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profan.chips import catalogue
from profan.cost import axis_decomposition, estimate
from profan.cost.collectives import KINDS
from profan.hlo.model import Instruction, Layout, Operand, Shape
from profan.hlo.parser import parse_instruction, parse_module
from profan.roofline.interconnect import collective_time, latency_floor_s


def _shape(dims: list[int], dtype: str = "f32") -> Shape:
    return Shape(dtype, tuple(dims), layout=Layout(tuple(range(len(dims) - 1, -1, -1))))


@settings(max_examples=60, deadline=None)
@given(
    batch=st.lists(st.integers(1, 6), max_size=2),
    lhs_free=st.lists(st.integers(1, 9), max_size=2),
    rhs_free=st.lists(st.integers(1, 9), max_size=2),
    contracting=st.lists(st.integers(1, 9), min_size=1, max_size=2),
    data=st.data(),
)
def test_dot_flops_equal_the_einsum_formula(batch, lhs_free, rhs_free, contracting, data) -> None:
    # lhs dims: batch, then contracting and free dims in a random order; same for rhs
    lhs_roles = [("c", i) for i in range(len(contracting))] + [
        ("f", i) for i in range(len(lhs_free))
    ]
    rhs_roles = [("c", i) for i in range(len(contracting))] + [
        ("f", i) for i in range(len(rhs_free))
    ]
    lhs_roles = [("b", i) for i in range(len(batch))] + data.draw(st.permutations(lhs_roles))
    rhs_roles = [("b", i) for i in range(len(batch))] + data.draw(st.permutations(rhs_roles))
    sizes = {"b": batch, "c": contracting}
    lhs_dims = [({**sizes, "f": lhs_free})[r][i] for r, i in lhs_roles]
    rhs_dims = [({**sizes, "f": rhs_free})[r][i] for r, i in rhs_roles]

    def where(roles, role):
        return [roles.index((role, i)) for i in range(len(sizes[role]))]

    out_dims = batch + lhs_free + rhs_free
    dot = Instruction(
        name="dot",
        opcode="dot",
        shape=_shape(out_dims),
        operands=[Operand("a", _shape(lhs_dims)), Operand("b", _shape(rhs_dims))],
        attributes={
            "lhs_batch_dims": "{" + ",".join(map(str, where(lhs_roles, "b"))) + "}",
            "rhs_batch_dims": "{" + ",".join(map(str, where(rhs_roles, "b"))) + "}",
            "lhs_contracting_dims": "{" + ",".join(map(str, where(lhs_roles, "c"))) + "}",
            "rhs_contracting_dims": "{" + ",".join(map(str, where(rhs_roles, "c"))) + "}",
        },
    )
    expected = 2 * math.prod(batch) * math.prod(lhs_free) * math.prod(rhs_free)
    expected *= math.prod(contracting)
    assert estimate(dot).flops == expected


@settings(max_examples=80, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    full_bytes=st.integers(1, 10**10),
    group=st.integers(2, 256),
    chip_name=st.sampled_from(sorted(catalogue())),
    crosses=st.booleans(),
)
def test_collective_time_never_below_latency_floor(kind, full_bytes, group, chip_name, crosses):
    chip = catalogue()[chip_name]
    timing = collective_time(kind, full_bytes, group, chip, crosses_hosts=crosses)
    assert timing.t_s >= timing.t_latency_s >= chip.ici_hop_latency_s
    assert timing.t_s >= latency_floor_s(kind, group, chip) or crosses


def test_convolution_counts_only_valid_taps() -> None:
    # 3x3 conv, pad 1: border outputs see fewer taps.  Per axis of 4: taps 3+4+... valid = 10
    conv = parse_instruction(
        "%c = f32[1,4,4,8]{3,2,1,0} convolution(f32[1,4,4,2]{3,2,1,0} %x, "
        "f32[3,3,2,8]{3,2,1,0} %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"
    )
    valid_per_axis = 3 * 4 - 2  # 4 outputs x 3 taps minus the two that fall on padding
    assert estimate(conv).flops == 2 * 2 * 8 * 1 * valid_per_axis**2


def test_grouped_convolution_divides_input_features() -> None:
    conv = parse_instruction(
        "%c = f32[2,8,16]{2,1,0} convolution(f32[2,8,16]{2,1,0} %x, f32[1,4,16]{2,1,0} %k), "
        "window={size=1}, dim_labels=b0f_0io->b0f, feature_group_count=4"
    )
    assert estimate(conv).flops == 2 * (16 // 4) * 16 * 2 * 8


def test_elementwise_and_transcendentals_are_separate() -> None:
    exp = parse_instruction("%e = f32[10,10]{1,0} exponential(f32[10,10]{1,0} %x)")
    add = parse_instruction("%a = f32[10,10]{1,0} add(f32[10,10]{1,0} %x, f32[10,10]{1,0} %y)")
    assert (estimate(exp).flops, estimate(exp).transcendentals) == (0, 100)
    assert (estimate(add).flops, estimate(add).transcendentals) == (100, 0)
    assert estimate(add).hbm_bytes == 3 * 400


SYNTHETIC_MODULE = """HloModule synthetic_fusions, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_slice (p0: f32[100,64], p1: f32[64]) -> f32[64] {
  %p0 = f32[100,64]{1,0} parameter(0)
  %p1 = f32[64]{0} parameter(1)
  %sl = f32[1,64]{1,0} slice(%p0), slice={[3:4], [0:64]}
  %bc = f32[64]{0} bitcast(%sl)
  %m = f32[64]{0} multiply(%bc, %p1)
  ROOT %t = f32[64]{0} tanh(%m)
}

%all-reduce-scatter.1 (x: bf16[1024]) -> bf16[128] {
  %x = bf16[1024]{0} parameter(0)
  ROOT %rs = bf16[128]{0} reduce-scatter(%x), replica_groups=[1,8]<=[8], dimensions={0},
    to_apply=%add
}

ENTRY %main (x: f32[100,64], y: f32[64], z: bf16[1024]) -> (f32[64], f32[], bf16[128]) {
  %x = f32[100,64]{1,0} parameter(0)
  %y = f32[64]{0} parameter(1)
  %z = bf16[1024]{0} parameter(2)
  %f = f32[64]{0} fusion(%x, %y), kind=kLoop, calls=%fused_slice
  %zero = f32[] constant(0)
  %r = f32[] reduce(%x, %zero), dimensions={0,1}, to_apply=%add
  %frs = bf16[128]{0} fusion(%z), kind=kCustom, calls=%all-reduce-scatter.1
  %cc = f32[64]{0} custom-call(%y), custom_call_target="my_mystery_kernel"
  ROOT %out = (f32[64]{0}, f32[], bf16[128]{0}) tuple(%f, %r, %frs)
}
"""


def test_fusion_flops_sum_the_body_and_bytes_stop_at_the_boundary() -> None:
    module = parse_module(SYNTHETIC_MODULE)
    fusion = module.entry.get("f")
    cost = estimate(fusion, module)
    assert (cost.flops, cost.transcendentals) == (64, 64)  # multiply; tanh
    # reads only the sliced row of p0 (XLA's rule), all of p1; writes the output
    assert cost.hbm_bytes_read == 64 * 4 + 64 * 4
    assert cost.hbm_bytes_written == 64 * 4


def test_reduce_counts_reducer_applications() -> None:
    module = parse_module(SYNTHETIC_MODULE)
    assert estimate(module.entry.get("r"), module).flops == 100 * 64 - 1


def test_fused_collective_is_recognised() -> None:
    module = parse_module(SYNTHETIC_MODULE)
    cost = estimate(module.entry.get("frs"), module)
    assert cost.collective is not None and cost.collective.kind == "reduce-scatter"
    assert cost.collective.group_size == 8 and cost.collective.full_bytes == 2048
    assert cost.ici_bytes == pytest.approx(2048 * 7 / 8)


def test_unknown_custom_call_is_flagged_not_guessed() -> None:
    module = parse_module(SYNTHETIC_MODULE)
    cost = estimate(module.entry.get("cc"), module)
    assert cost.flops is None and cost.unknown
    assert cost.hbm_bytes == 2 * 64 * 4


def test_pasted_fusion_line_has_unknown_flops() -> None:
    line = parse_instruction("%f = f32[8]{0} fusion(f32[8]{0} %x), kind=kLoop, calls=%body")
    cost = estimate(line)
    assert cost.flops is None and cost.hbm_bytes == 64


def test_cublas_gemm_custom_call_is_a_matmul() -> None:
    gemm = parse_instruction(
        "%g = (bf16[128,256]{1,0}, s8[4194304]{0}) custom-call(bf16[128,64]{1,0} %a, "
        'bf16[64,256]{1,0} %b), custom_call_target="__cublas$gemm", backend_config='
        '{"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],'
        '"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}'
    )
    cost = estimate(gemm)
    assert cost.flops == 2 * 128 * 256 * 64 and not cost.unknown


@pytest.mark.parametrize(
    ("group", "axes"),
    [([0, 16, 32, 48, 64, 80, 96, 112], (8,)), ([0, 1, 4, 5], (2, 2)), ([0, 1, 2, 3], (4,)),
     ([0, 3, 7], (3,))],
)  # fmt: skip
def test_axis_decomposition(group: list[int], axes: tuple[int, ...]) -> None:
    assert axis_decomposition(group) == axes


def test_gemm_without_dimension_numbers_uses_unambiguous_shapes() -> None:
    # as in XLA's own GPU scheduling tests: no backend config, plain [M,K] x [K,N]
    gemm = parse_instruction(
        "%g = (f32[64,32]{1,0}, s8[1024]{0}) custom-call(f32[64,16]{1,0} %a, f32[16,32]{1,0} %b), "
        'custom_call_target="__cublas$gemm"'
    )
    assert estimate(gemm).flops == 2 * 64 * 32 * 16
    # shapes that admit another reading stay unknown
    odd = parse_instruction(
        "%g = f32[64,64]{1,0} custom-call(f32[64,16]{1,0} %a, f32[64,16]{1,0} %b), "
        'custom_call_target="__cublas$gemm"'
    )
    assert estimate(odd).flops is None and estimate(odd).unknown


def test_annotation_custom_calls_cost_nothing() -> None:
    mark = parse_instruction(
        '%s = f32[8,8]{1,0} custom-call(f32[8,8]{1,0} %x), custom_call_target="Sharding"'
    )
    cost = estimate(mark)
    assert (cost.flops, cost.hbm_bytes, cost.unknown) == (0, 0, False)


SYNTHETIC_ASYNC_MODULE = """HloModule synthetic_async, num_partitions=8

%wrapped (p: f32[64,128]) -> f32[512,128] {
  %p = f32[64,128]{1,0} parameter(0)
  ROOT %ag = f32[512,128]{1,0} all-gather(%p), replica_groups=[1,8]<=[8], dimensions={0}
}

ENTRY %main (x: f32[64,128]) -> f32[512,128] {
  %x = f32[64,128]{1,0} parameter(0)
  %s = ((f32[64,128]{1,0}), f32[512,128]{1,0}) async-start(%x), calls=%wrapped
  ROOT %d = f32[512,128]{1,0} async-done(%s)
}
"""


def test_async_wrapped_collective_is_timed_on_the_done() -> None:
    from profan.roofline import score_module

    module = parse_module(SYNTHETIC_ASYNC_MODULE)
    start = estimate(module.entry.get("s"), module)
    done = estimate(module.entry.get("d"), module)
    assert (start.async_role, done.async_role) == ("start", "done")
    for cost in (start, done):
        assert cost.collective is not None and cost.collective.kind == "all-gather"
        assert cost.collective.full_bytes == 512 * 128 * 4 and cost.collective.group_size == 8
    ops = {op.name: op for op in score_module(module, "tpu-v5e")}
    assert ops["s"].bound_by == "async-start" and ops["s"].roofline_s == 0
    assert ops["d"].bound_by == "ici" and ops["d"].t_ici_s > 0


def test_bitcast_convert_counts_like_xla() -> None:
    # XLA's cost analysis counts bitcast-convert as an elementwise op (a jax.random.normal
    # program's module total only matches with it: 376,973 FLOPs)
    op = parse_instruction("%b = f32[64,64]{1,0} bitcast-convert(u32[64,64]{1,0} %x)")
    assert estimate(op).flops == 64 * 64


def test_tuple_results_are_charged_their_arrays_but_tuple_its_pointers() -> None:
    sort = parse_instruction(
        "%s = (f32[1000]{0}, s32[1000]{0}) sort(f32[1000]{0} %k, s32[1000]{0} %v), "
        "dimensions={0}, to_apply=%lt"
    )
    assert estimate(sort).hbm_bytes_written == 8000
    tup = parse_instruction(
        "%t = (f32[1000]{0}, s32[1000]{0}) tuple(f32[1000]{0} %a, s32[1000]{0} %b)"
    )
    assert (estimate(tup).hbm_bytes_read, estimate(tup).hbm_bytes_written) == (0, 16)


SYNTHETIC_SCATTER_MODULE = """HloModule synthetic_scatter

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_scatter (p0: f32[1000,16], p1: s32[10,1], p2: f32[10,16]) -> f32[1000,16] {
  %p0 = f32[1000,16]{1,0} parameter(0)
  %p1 = s32[10,1]{1,0} parameter(1)
  %p2 = f32[10,16]{1,0} parameter(2)
  ROOT %sc = f32[1000,16]{1,0} scatter(%p0, %p1, %p2), update_window_dims={1},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      to_apply=%add
}

ENTRY %main (x: f32[1000,16], i: s32[10,1], u: f32[10,16]) -> f32[1000,16] {
  %x = f32[1000,16]{1,0} parameter(0)
  %i = s32[10,1]{1,0} parameter(1)
  %u = f32[10,16]{1,0} parameter(2)
  ROOT %f = f32[1000,16]{1,0} fusion(%x, %i, %u), kind=kLoop, calls=%fused_scatter
}
"""


def test_in_place_scatter_fusion_charges_only_touched_rows_to_the_roofline() -> None:
    module = parse_module(SYNTHETIC_SCATTER_MODULE)
    cost = estimate(module.entry.get("f"), module)
    buffer, indices, update = 1000 * 16 * 4, 10 * 4, 10 * 16 * 4
    # XLA's accounting (kept for parity): whole buffer read and written
    assert cost.hbm_bytes == buffer + indices + update + buffer
    assert cost.flops == 10 * 16  # the combiner once per update element
    # what the roofline uses: indices + updates read, touched rows read and written
    assert cost.roofline_hbm_bytes == indices + update + update + update


def test_xprof_line_with_elided_operands_reads_a_lower_bound() -> None:
    # The line as XProf shows it (operands elided): FLOPs unknown without the fused body, and
    # bytes read cover only the operands shown, so they must be marked as a lower bound.
    line = (
        "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(...), kind=kCustom, "
        "calls=%all-reduce-scatter.3"
    )
    elided = estimate(parse_instruction(line))
    assert elided.flops is None
    assert elided.hbm_bytes_read_is_lower_bound
    assert any("lower bound" in note for note in elided.derivation)

    shown = estimate(parse_instruction(line.replace("(...)", "(bf16[32,32,8192]{2,1,0} %p0)")))
    assert not shown.hbm_bytes_read_is_lower_bound
    assert shown.hbm_bytes_read == 32 * 32 * 8192 * 2


@pytest.mark.parametrize(
    ("line", "flops"),
    [
        # 256 complex transforms of 4,096 points: 256 x 5 x 4096 x 12
        (
            "%f = c64[256,4096]{1,0} fft(c64[256,4096]{1,0} %x), fft_type=FFT, fft_length={4096}",
            256 * 5 * 4096 * 12,
        ),
        # 2-D: one transform of 64 x 64 = 4,096 points per image
        (
            "%f = c64[256,64,64]{2,1,0} fft(c64[256,64,64]{2,1,0} %x), fft_type=IFFT, "
            "fft_length={64,64}",
            256 * 5 * 4096 * 12,
        ),
        # real input: half a complex transform of the same length
        (
            "%f = c64[256,2049]{1,0} fft(f32[256,4096]{1,0} %x), fft_type=RFFT, fft_length={4096}",
            256 * 2.5 * 4096 * 12,
        ),
        # real output: the points are the output's last dim
        (
            "%f = f32[8,30]{1,0} fft(c64[8,16]{1,0} %x), fft_type=IRFFT, fft_length={30}",
            8 * 2.5 * 30 * math.log2(30),
        ),
        # a one-point transform is a copy
        ("%f = c64[8,1]{1,0} fft(c64[8,1]{1,0} %x), fft_type=FFT, fft_length={1}", 0),
    ],
)
def test_synthetic_fft_counts_5_n_log2_n_per_complex_transform(line: str, flops: float) -> None:
    cost = estimate(parse_instruction(line))
    assert cost.flops == pytest.approx(flops, rel=1e-12)
    assert cost.flops_source == "hlo"

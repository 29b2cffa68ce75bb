# ruff: noqa: E501  (the HLO below is verbatim compiler output; its lines stay as XLA printed them)
"""Module totals against XLA's ``cost_analysis()`` on small real programs, op kinds the fixtures lack.

Each entry is what jax 0.10.2 on CPU printed for ``jax.jit(f).lower(*args).compile()``:
``as_text()`` (with ``metadata={...}`` and the stack-frame tables removed to keep this file
small; neither changes a cost) and ``cost_analysis()``.  ``f`` is the JAX source named in each
entry.  Convolutions (strided, grouped, dilated), scatter, gather, sort (one and two operands),
cumsum (reduce-window), max-pool, while, conditional, softmax, dynamic-(update-)slice, bf16 and
batched matmuls: profan must agree with XLA within 1% on FLOPs and transcendentals and 10% on
bytes; it agrees exactly on all of them (checked to 1e-6 below).
"""

from __future__ import annotations

import pytest

from profan.cost import module_totals
from profan.hlo.parser import parse_module

# name -> (JAX source, HLO text, XLA cost_analysis())
PROGRAMS: dict[str, tuple[str, str, dict[str, float]]] = {
    "conv": (
        "lambda x, k: lax.conv_general_dilated(x, k, (2,2), 'SAME', dimension_numbers=('NHWC','HWIO','NHWC'))  with  jnp.ones((4,32,32,8)), jnp.ones((3,3,8,16))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[4,32,32,8]{3,2,1,0}, f32[3,3,8,16]{3,2,1,0})->f32[4,16,16,16]{3,2,1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

ENTRY %main.1 (x.1: f32[4,32,32,8], k.1: f32[3,3,8,16]) -> f32[4,16,16,16] {
  %x.1 = f32[4,32,32,8]{3,2,1,0} parameter(0)
  %k.1 = f32[3,3,8,16]{3,2,1,0} parameter(1)
  ROOT %conv_general_dilated.1 = f32[4,16,16,16]{3,2,1,0} convolution(%x.1, %k.1), window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
}
""",
        {"bytes accessed": 201216.0, "flops": 2262016.0},
    ),
    "conv_grouped": (
        "lambda x, k: lax.conv_general_dilated(x, k, (1,1), 'VALID', feature_group_count=4, dimension_numbers=('NHWC','HWIO','NHWC'))  with  jnp.ones((2,16,16,8)), jnp.ones((3,3,2,16))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[2,16,16,8]{3,2,1,0}, f32[3,3,2,16]{3,2,1,0})->f32[2,14,14,16]{3,2,1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

ENTRY %main.1 (x.1: f32[2,16,16,8], k.1: f32[3,3,2,16]) -> f32[2,14,14,16] {
  %x.1 = f32[2,16,16,8]{3,2,1,0} parameter(0)
  %k.1 = f32[3,3,2,16]{3,2,1,0} parameter(1)
  ROOT %conv_general_dilated.1 = f32[2,14,14,16]{3,2,1,0} convolution(%x.1, %k.1), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=4
}
""",
        {"bytes accessed": 42624.0, "flops": 225792.0},
    ),
    "conv_dilated": (
        "lambda x, k: lax.conv_general_dilated(x, k, (1,1)  with  (2,2),(2,2)], lhs_dilation=(2,2), rhs_dilation=(2,2)), [jnp.ones((2,4,9,9)), jnp.ones((8,4,3,3))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[2,4,9,9]{3,2,1,0}, f32[8,4,3,3]{3,2,1,0})->f32[2,8,17,17]{3,2,1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0.1: f32[2,17,17,8]) -> f32[2,8,17,17] {
  %param_0.1 = f32[2,17,17,8]{3,2,1,0} parameter(0)
  %transpose.3 = f32[2,8,17,17]{1,3,2,0} transpose(%param_0.1), dimensions={0,3,1,2}
  ROOT %copy.3 = f32[2,8,17,17]{3,2,1,0} copy(%transpose.3)
}

%fused_computation.1 (param_0.3: f32[8,4,3,3]) -> f32[3,3,4,8] {
  %param_0.3 = f32[8,4,3,3]{3,2,1,0} parameter(0)
  %transpose.4 = f32[3,3,4,8]{1,0,2,3} transpose(%param_0.3), dimensions={2,3,1,0}
  ROOT %copy.4 = f32[3,3,4,8]{3,2,1,0} copy(%transpose.4)
}

%fused_computation.2 (param_0.5: f32[2,4,9,9]) -> f32[2,9,9,4] {
  %param_0.5 = f32[2,4,9,9]{3,2,1,0} parameter(0)
  %transpose.5 = f32[2,9,9,4]{2,1,3,0} transpose(%param_0.5), dimensions={0,2,3,1}
  ROOT %copy.5 = f32[2,9,9,4]{3,2,1,0} copy(%transpose.5)
}

ENTRY %main.1 (x.1: f32[2,4,9,9], k.1: f32[8,4,3,3]) -> f32[2,8,17,17] {
  %x.1 = f32[2,4,9,9]{3,2,1,0} parameter(0)
  %k.1 = f32[8,4,3,3]{3,2,1,0} parameter(1)
  %transpose_copy_fusion.2 = f32[2,9,9,4]{3,2,1,0} fusion(%x.1), kind=kLoop, calls=%fused_computation.2
  %transpose_copy_fusion.1 = f32[3,3,4,8]{3,2,1,0} fusion(%k.1), kind=kLoop, calls=%fused_computation.1
  %convolution-base-dilated-window-dilated = f32[2,17,17,8]{3,2,1,0} convolution(%transpose_copy_fusion.2, %transpose_copy_fusion.1), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  ROOT %transpose_copy_fusion = f32[2,8,17,17]{3,2,1,0} fusion(%convolution-base-dilated-window-dilated), kind=kLoop, calls=%fused_computation
}
""",
        {"bytes accessed": 66720.0, "flops": 80000.0},
    ),
    "scatter": (
        "scatter",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[100,16]{1,0}, s32[10]{0}, f32[10,16]{1,0})->f32[100,16]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0.2: s32[10]) -> s32[10,1] {
  %param_0.2 = s32[10]{0} parameter(0)
  %constant.1 = s32[] constant(0)
  %broadcast.1 = s32[10]{0} broadcast(%constant.1), dimensions={}
  %lt.0 = pred[10]{0} compare(%param_0.2, %broadcast.1), direction=LT
  %constant.0 = s32[] constant(100)
  %broadcast.0 = s32[10]{0} broadcast(%constant.0), dimensions={}
  %add.0 = s32[10]{0} add(%param_0.2, %broadcast.0)
  %select_n.0 = s32[10]{0} select(%lt.0, %add.0, %param_0.2)
  ROOT %bitcast.2 = s32[10,1]{1,0} bitcast(%select_n.0)
}

%region_0.1 (scatter-add.2: f32[], scatter-add.3: f32[]) -> f32[] {
  %scatter-add.2 = f32[] parameter(0)
  %scatter-add.3 = f32[] parameter(1)
  ROOT %add.2 = f32[] add(%scatter-add.2, %scatter-add.3)
}

%wrapped_scatter_computation (param_0.3: f32[100,16], param_1.4: s32[10,1], param_2.3: f32[10,1,16]) -> f32[100,16] {
  %param_0.3 = f32[100,16]{1,0} parameter(0)
  %param_1.4 = s32[10,1]{1,0} parameter(1)
  %param_2.3 = f32[10,1,16]{2,1,0} parameter(2)
  ROOT %scatter-add.0 = f32[100,16]{1,0} scatter(%param_0.3, %param_1.4, %param_2.3), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%region_0.1
}

ENTRY %main.2 (x.1: f32[100,16], i.1: s32[10], u.1: f32[10,16]) -> f32[100,16] {
  %x.1 = f32[100,16]{1,0} parameter(0)
  %i.1 = s32[10]{0} parameter(1)
  %u.1 = f32[10,16]{1,0} parameter(2)
  %copy.1 = f32[100,16]{1,0} copy(%x.1)
  %select_bitcast_fusion = s32[10,1]{1,0} fusion(%i.1), kind=kLoop, calls=%fused_computation
  %bitcast.1 = f32[10,1,16]{2,1,0} bitcast(%u.1)
  ROOT %wrapped_scatter = f32[100,16]{1,0} fusion(%copy.1, %select_bitcast_fusion, %bitcast.1), kind=kLoop, calls=%wrapped_scatter_computation
}
""",
        {"flops": 190.0, "bytes accessed": 26360.0},
    ),
    "gather": (
        "gather",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[100,16]{1,0}, s32[10]{0})->f32[10,16]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0.2: f32[100,16], param_1.5: s32[10]) -> f32[10,16] {
  %param_0.2 = f32[100,16]{1,0} parameter(0)
  %param_1.5 = s32[10]{0} parameter(1)
  %constant.2 = s32[] constant(0)
  %broadcast.6 = s32[10]{0} broadcast(%constant.2), dimensions={}
  %lt.0 = pred[10]{0} compare(%param_1.5, %broadcast.6), direction=LT
  %constant.1 = s32[] constant(100)
  %broadcast.5 = s32[10]{0} broadcast(%constant.1), dimensions={}
  %add.0 = s32[10]{0} add(%param_1.5, %broadcast.5)
  %select_n.0 = s32[10]{0} select(%lt.0, %add.0, %param_1.5)
  %bitcast.3 = s32[10,1]{1,0} bitcast(%select_n.0)
  %gather.2 = f32[10,1,16]{2,1,0} gather(%param_0.2, %bitcast.3), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}
  %constant.0 = f32[] constant(2)
  %broadcast.4 = f32[10,1,16]{2,1,0} broadcast(%constant.0), dimensions={}
  %mul.1 = f32[10,1,16]{2,1,0} multiply(%gather.2, %broadcast.4)
  ROOT %bitcast.2 = f32[10,16]{1,0} bitcast(%mul.1)
}

ENTRY %main.1 (x.1: f32[100,16], i.1: s32[10]) -> f32[10,16] {
  %x.1 = f32[100,16]{1,0} parameter(0)
  %i.1 = s32[10]{0} parameter(1)
  ROOT %multiply_bitcast_fusion = f32[10,16]{1,0} fusion(%x.1, %i.1), kind=kLoop, calls=%fused_computation
}
""",
        {"bytes accessed": 7080.0, "flops": 190.0},
    ),
    "sort": (
        "lambda x: jnp.sort(x, axis=-1)  with  jnp.ones((8,1000))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[8,1000]{1,0})->f32[8,1000]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%region_0.1 (sort.2: f32[], sort.3: f32[]) -> pred[] {
  %sort.2 = f32[] parameter(0)
  %sort.3 = f32[] parameter(1)
  %constant.2 = f32[] constant(nan)
  %constant.3 = f32[] constant(0)
  %constant = s32[] constant(0)
  %constant.4 = s32[] constant(2147483647)
  %ne.2 = pred[] compare(%sort.2, %sort.2), direction=NE
  %ne.3 = pred[] compare(%sort.3, %sort.3), direction=NE
  %eq.2 = pred[] compare(%sort.2, %constant.3), direction=EQ
  %eq.3 = pred[] compare(%sort.3, %constant.3), direction=EQ
  %select_n.4 = f32[] select(%eq.2, %constant.3, %sort.2)
  %select_n.6 = f32[] select(%eq.3, %constant.3, %sort.3)
  %select_n.5 = f32[] select(%ne.2, %constant.2, %select_n.4)
  %select_n.7 = f32[] select(%ne.3, %constant.2, %select_n.6)
  %bitcast = s32[] bitcast(%select_n.5)
  %bitcast.1 = s32[] bitcast(%select_n.7)
  %xor = s32[] xor(%constant.4, %bitcast)
  %compare = pred[] compare(%bitcast, %constant), direction=LT
  %xor.1 = s32[] xor(%constant.4, %bitcast.1)
  %compare.1 = pred[] compare(%bitcast.1, %constant), direction=LT
  %select = s32[] select(%compare, %xor, %bitcast)
  %select.1 = s32[] select(%compare.1, %xor.1, %bitcast.1)
  ROOT %lt_to.1 = pred[] compare(%select, %select.1), direction=LT
}

ENTRY %main.3 (x.1: f32[8,1000]) -> f32[8,1000] {
  %x.1 = f32[8,1000]{1,0} parameter(0)
  ROOT %sort.0 = f32[8,1000]{1,0} sort(%x.1), dimensions={1}, is_stable=true, to_apply=%region_0.1
}
""",
        {"flops": 104000.0, "bytes accessed": 64000.0},
    ),
    "argsort": (
        "lambda x: jnp.argsort(x)  with  jnp.ones((1000,))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[1000]{0})->s32[1000]{0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%region_0.1 (sort.4: f32[], sort.5: f32[], sort.6: s32[], sort.7: s32[]) -> pred[] {
  %sort.4 = f32[] parameter(0)
  %sort.5 = f32[] parameter(1)
  %sort.6 = s32[] parameter(2)
  %sort.7 = s32[] parameter(3)
  %constant.2 = f32[] constant(nan)
  %constant.3 = f32[] constant(0)
  %constant = s32[] constant(0)
  %constant.4 = s32[] constant(2147483647)
  %ne.2 = pred[] compare(%sort.4, %sort.4), direction=NE
  %ne.3 = pred[] compare(%sort.5, %sort.5), direction=NE
  %eq.2 = pred[] compare(%sort.4, %constant.3), direction=EQ
  %eq.3 = pred[] compare(%sort.5, %constant.3), direction=EQ
  %select_n.4 = f32[] select(%eq.2, %constant.3, %sort.4)
  %select_n.6 = f32[] select(%eq.3, %constant.3, %sort.5)
  %select_n.5 = f32[] select(%ne.2, %constant.2, %select_n.4)
  %select_n.7 = f32[] select(%ne.3, %constant.2, %select_n.6)
  %bitcast = s32[] bitcast(%select_n.5)
  %bitcast.1 = s32[] bitcast(%select_n.7)
  %xor = s32[] xor(%constant.4, %bitcast)
  %compare = pred[] compare(%bitcast, %constant), direction=LT
  %xor.1 = s32[] xor(%constant.4, %bitcast.1)
  %compare.1 = pred[] compare(%bitcast.1, %constant), direction=LT
  %select = s32[] select(%compare, %xor, %bitcast)
  %select.1 = s32[] select(%compare.1, %xor.1, %bitcast.1)
  ROOT %lt_to.1 = pred[] compare(%select, %select.1), direction=LT
}

%wrapped_iota_computation () -> s32[1000] {
  ROOT %iota.2 = s32[1000]{0} iota(), iota_dimension=0
}

ENTRY %main.3 (x.1: f32[1000]) -> s32[1000] {
  %x.1 = f32[1000]{0} parameter(0)
  %wrapped_iota = s32[1000]{0} fusion(), kind=kLoop, calls=%wrapped_iota_computation
  %sort.0 = (f32[1000]{0}, s32[1000]{0}) sort(%x.1, %wrapped_iota), dimensions={0}, is_stable=true, to_apply=%region_0.1
  ROOT %sort.1 = s32[1000]{0} get-tuple-element(%sort.0), index=1
}
""",
        {"bytes accessed": 20000.0, "flops": 10000.0},
    ),
    "cumsum": (
        "lambda x: jnp.cumsum(x, axis=1)  with  jnp.ones((16,64))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[16,64]{1,0})->f32[16,64]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0.1: f32[16,4,16], param_1.2: f32[16,5]) -> f32[16,64] {
  %param_0.1 = f32[16,4,16]{2,1,0} parameter(0)
  %param_1.2 = f32[16,5]{1,0} parameter(1)
  %slice.2 = f32[16,4]{1,0} slice(%param_1.2), slice={[0:16], [0:4]}
  %broadcast.1 = f32[16,4,16]{2,1,0} broadcast(%slice.2), dimensions={0,1}
  %reduce_window_sum.10 = f32[16,4,16]{2,1,0} add(%param_0.1, %broadcast.1)
  ROOT %bitcast.3 = f32[16,64]{1,0} bitcast(%reduce_window_sum.10)
}

%fused_computation.1 (param_0.3: f32[16,4,16]) -> f32[16,4] {
  %param_0.3 = f32[16,4,16]{2,1,0} parameter(0)
  %slice.3 = f32[16,4,1]{2,1,0} slice(%param_0.3), slice={[0:16], [0:4], [15:16]}
  ROOT %bitcast.4 = f32[16,4]{1,0} bitcast(%slice.3)
}

%region_0.1 (reduce_window_sum.3: f32[], reduce_window_sum.4: f32[]) -> f32[] {
  %reduce_window_sum.3 = f32[] parameter(0)
  %reduce_window_sum.4 = f32[] parameter(1)
  ROOT %reduce_window_sum.5 = f32[] add(%reduce_window_sum.3, %reduce_window_sum.4)
}

%wrapped_reduce-window_computation (param_0.4: f32[16,4,16], param_1.3: f32[]) -> f32[16,4,16] {
  %param_0.4 = f32[16,4,16]{2,1,0} parameter(0)
  %param_1.3 = f32[] parameter(1)
  ROOT %reduce-window.2 = f32[16,4,16]{2,1,0} reduce-window(%param_0.4, %param_1.3), window={size=1x1x16 pad=0_0x0_0x15_0}, to_apply=%region_0.1
}

%region_0.1.clone (reduce_window_sum.6: f32[], reduce_window_sum.8: f32[]) -> f32[] {
  %reduce_window_sum.6 = f32[] parameter(0)
  %reduce_window_sum.8 = f32[] parameter(1)
  ROOT %reduce_window_sum.9 = f32[] add(%reduce_window_sum.6, %reduce_window_sum.8)
}

%wrapped_reduce-window_computation.1 (param_0.5: f32[16,4], param_1.4: f32[]) -> f32[16,5] {
  %param_0.5 = f32[16,4]{1,0} parameter(0)
  %param_1.4 = f32[] parameter(1)
  ROOT %reduce-window.3 = f32[16,5]{1,0} reduce-window(%param_0.5, %param_1.4), window={size=1x4 pad=0_0x4_0}, to_apply=%region_0.1.clone
}

ENTRY %main.4 (x.1: f32[16,64]) -> f32[16,64] {
  %x.1 = f32[16,64]{1,0} parameter(0)
  %constant.2 = f32[] constant(0)
  %bitcast = f32[16,4,16]{2,1,0} bitcast(%x.1)
  %wrapped_reduce-window = f32[16,4,16]{2,1,0} fusion(%bitcast, %constant.2), kind=kLoop, calls=%wrapped_reduce-window_computation
  %slice_bitcast_fusion = f32[16,4]{1,0} fusion(%wrapped_reduce-window), kind=kLoop, calls=%fused_computation.1
  %wrapped_reduce-window.1 = f32[16,5]{1,0} fusion(%slice_bitcast_fusion, %constant.2), kind=kLoop, calls=%wrapped_reduce-window_computation.1
  ROOT %add_bitcast_fusion = f32[16,64]{1,0} fusion(%wrapped_reduce-window, %wrapped_reduce-window.1), kind=kLoop, calls=%fused_computation
}
""",
        {"flops": 16624.0, "bytes accessed": 17736.0},
    ),
    "maxpool": (
        "lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1,3,3,1), (1,2,2,1), 'SAME')  with  jnp.ones((2,16,16,4))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[2,16,16,4]{3,2,1,0})->f32[2,8,8,4]{3,2,1,0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%region_0.1 (reduce_window_max.3: f32[], reduce_window_max.4: f32[]) -> f32[] {
  %reduce_window_max.3 = f32[] parameter(0)
  %reduce_window_max.4 = f32[] parameter(1)
  ROOT %reduce_window_max.5 = f32[] maximum(%reduce_window_max.3, %reduce_window_max.4)
}

%wrapped_reduce-window_computation (param_0: f32[2,16,16,4], param_1: f32[]) -> f32[2,8,8,4] {
  %param_0 = f32[2,16,16,4]{3,2,1,0} parameter(0)
  %param_1 = f32[] parameter(1)
  ROOT %reduce_window_max.0 = f32[2,8,8,4]{3,2,1,0} reduce-window(%param_0, %param_1), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=%region_0.1
}

ENTRY %main.2 (x.1: f32[2,16,16,4]) -> f32[2,8,8,4] {
  %x.1 = f32[2,16,16,4]{3,2,1,0} parameter(0)
  %constant.1 = f32[] constant(-inf)
  ROOT %wrapped_reduce-window = f32[2,8,8,4]{3,2,1,0} fusion(%x.1, %constant.1), kind=kLoop, calls=%wrapped_reduce-window_computation
}
""",
        {"flops": 4096.0, "bytes accessed": 10244.0},
    ),
    "while": (
        "lambda x: lax.fori_loop(0, 10, lambda i, y: jnp.tanh(y @ y), x)  with  jnp.ones((64,64))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0: f32[64,64]) -> f32[64,64] {
  %param_0 = f32[64,64]{1,0} parameter(0)
  ROOT %dot_general.2 = f32[64,64]{1,0} dot(%param_0, %param_0), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%wrapped_add_computation (param_0.1: s32[], param_1: s32[]) -> s32[] {
  %param_0.1 = s32[] parameter(0)
  %param_1 = s32[] parameter(1)
  ROOT %add.0 = s32[] add(%param_0.1, %param_1)
}

%wrapped_tanh_computation (param_0.2: f32[64,64]) -> f32[64,64] {
  %param_0.2 = f32[64,64]{1,0} parameter(0)
  ROOT %tanh.2 = f32[64,64]{1,0} tanh(%param_0.2)
}

%region_0.2 (arg_tuple.1: (s32[], f32[64,64])) -> (s32[], f32[64,64]) {
  %arg_tuple.1 = (s32[], f32[64,64]{1,0}) parameter(0)
  %constant.2 = s32[] constant(1)
  %get-tuple-element.5 = f32[64,64]{1,0} get-tuple-element(%arg_tuple.1), index=1
  %get-tuple-element.4 = s32[] get-tuple-element(%arg_tuple.1), index=0
  %ynn_fusion = f32[64,64]{1,0} fusion(%get-tuple-element.5), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %wrapped_add = s32[] fusion(%get-tuple-element.4, %constant.2), kind=kLoop, calls=%wrapped_add_computation
  %wrapped_tanh = f32[64,64]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%wrapped_tanh_computation
  ROOT %tuple.3 = (s32[], f32[64,64]{1,0}) tuple(%wrapped_add, %wrapped_tanh)
}

%wrapped_compare_computation (param_0.3: s32[], param_1.1: s32[]) -> pred[] {
  %param_0.3 = s32[] parameter(0)
  %param_1.1 = s32[] parameter(1)
  ROOT %lt.0 = pred[] compare(%param_0.3, %param_1.1), direction=LT
}

%region_1.3 (arg_tuple.3: (s32[], f32[64,64])) -> pred[] {
  %arg_tuple.3 = (s32[], f32[64,64]{1,0}) parameter(0)
  %constant.4 = s32[] constant(10)
  %get-tuple-element.6 = s32[] get-tuple-element(%arg_tuple.3), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.6, %constant.4), kind=kLoop, calls=%wrapped_compare_computation
}

ENTRY %main.4 (x.1: f32[64,64]) -> f32[64,64] {
  %x.1 = f32[64,64]{1,0} parameter(0)
  %constant.5 = s32[] constant(0)
  %copy.6 = f32[64,64]{1,0} copy(%x.1)
  %copy.7 = s32[] copy(%constant.5)
  %tuple = (s32[], f32[64,64]{1,0}) tuple(%copy.7, %copy.6)
  %while.5 = (s32[], f32[64,64]{1,0}) while(%tuple), condition=%region_1.3, body=%region_0.2, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"10"}}
  ROOT %while.7 = f32[64,64]{1,0} get-tuple-element(%while.5), index=1
}
""",
        {"transcendentals": 4096.0, "bytes accessed": 98365.0, "flops": 524290.0},
    ),
    "cond": (
        "lambda p, x: lax.cond(p, lambda x: jnp.exp(x) @ x, lambda x: x + 1, x)  with  True, jnp.ones((32,32))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(pred[], f32[32,32]{1,0})->f32[32,32]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation.1 (param_0.1: f32[32,32]) -> f32[32,32] {
  %param_0.1 = f32[32,32]{1,0} parameter(0)
  %constant.0 = f32[] constant(1)
  %broadcast.0 = f32[32,32]{1,0} broadcast(%constant.0), dimensions={}
  ROOT %add.0 = f32[32,32]{1,0} add(%param_0.1, %broadcast.0)
}

%region_0.1 (x.0: (f32[32,32])) -> (f32[32,32]) {
  %x.0 = (f32[32,32]{1,0}) parameter(0)
  %get-tuple-element = f32[32,32]{1,0} get-tuple-element(%x.0), index=0
  %broadcast_add_fusion = f32[32,32]{1,0} fusion(%get-tuple-element), kind=kLoop, calls=%fused_computation.1
  ROOT %tuple.4 = (f32[32,32]{1,0}) tuple(%broadcast_add_fusion)
}

%fused_computation (param_0: f32[32,32], param_1: f32[32,32]) -> f32[32,32] {
  %param_0 = f32[32,32]{1,0} parameter(0)
  %param_1 = f32[32,32]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[32,32]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%wrapped_exponential_computation (param_0.3: f32[32,32]) -> f32[32,32] {
  %param_0.3 = f32[32,32]{1,0} parameter(0)
  ROOT %exp.0 = f32[32,32]{1,0} exponential(%param_0.3)
}

%region_1.2 (x.1: (f32[32,32])) -> (f32[32,32]) {
  %x.1 = (f32[32,32]{1,0}) parameter(0)
  %get-tuple-element.1 = f32[32,32]{1,0} get-tuple-element(%x.1), index=0
  %wrapped_exponential = f32[32,32]{1,0} fusion(%get-tuple-element.1), kind=kLoop, calls=%wrapped_exponential_computation
  %ynn_fusion = f32[32,32]{1,0} fusion(%wrapped_exponential, %get-tuple-element.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  ROOT %tuple.5 = (f32[32,32]{1,0}) tuple(%ynn_fusion)
}

%wrapped_convert_computation (param_0.2: pred[]) -> s32[] {
  %param_0.2 = pred[] parameter(0)
  ROOT %convert_element_type.0 = s32[] convert(%param_0.2)
}

ENTRY %main.3 (p.1: pred[], x.5: f32[32,32]) -> f32[32,32] {
  %p.1 = pred[] parameter(0)
  %x.5 = f32[32,32]{1,0} parameter(1)
  %wrapped_convert = s32[] fusion(%p.1), kind=kLoop, calls=%wrapped_convert_computation
  %tuple.2 = (f32[32,32]{1,0}) tuple(%x.5)
  %cond.1.clone = (f32[32,32]{1,0}) conditional(%wrapped_convert, %tuple.2, %tuple.2), branch_computations={%region_0.1, %region_1.2}
  ROOT %get-tuple-element.2 = f32[32,32]{1,0} get-tuple-element(%cond.1.clone), index=0
}
""",
        {"transcendentals": 1024.0, "bytes accessed": 20501.0, "flops": 65537.0},
    ),
    "softmax": (
        "lambda x: jax.nn.softmax(x @ x.T, axis=-1)  with  jnp.ones((128,64))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[128,64]{1,0})->f32[128,128]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true}, allow_spmd_sharding_propagation_to_output={true}

%region_1.2 (reduce_sum.3: f32[], reduce_sum.4: f32[]) -> f32[] {
  %reduce_sum.3 = f32[] parameter(0)
  %reduce_sum.4 = f32[] parameter(1)
  ROOT %reduce_sum.5 = f32[] add(%reduce_sum.3, %reduce_sum.4)
}

%fused_computation (param_0: f32[128,128]) -> f32[128] {
  %param_0 = f32[128,128]{1,0} parameter(0)
  %constant.1 = f32[] constant(0)
  ROOT %reduce_sum.0 = f32[128]{0} reduce(%param_0, %constant.1), dimensions={1}, to_apply=%region_1.2
}

%region_0.1 (reduce_max.3: f32[], reduce_max.4: f32[]) -> f32[] {
  %reduce_max.3 = f32[] parameter(0)
  %reduce_max.4 = f32[] parameter(1)
  ROOT %reduce_max.5 = f32[] maximum(%reduce_max.3, %reduce_max.4)
}

%fused_computation.1 (param_0.2: f32[128,64]) -> f32[128,128] {
  %param_0.2 = f32[128,64]{1,0} parameter(0)
  %dot_general.0 = f32[128,128]{1,0} dot(%param_0.2, %param_0.2), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %constant.2 = f32[] constant(-inf)
  %reduce_max.0 = f32[128]{0} reduce(%dot_general.0, %constant.2), dimensions={1}, to_apply=%region_0.1
  %sub.0 = f32[128,128]{1,0} broadcast(%reduce_max.0), dimensions={0}
  %sub.1 = f32[128,128]{1,0} subtract(%dot_general.0, %sub.0)
  ROOT %exp.0 = f32[128,128]{1,0} exponential(%sub.1)
}

%fused_computation.2 (param_0.3: f32[128,128], param_1.3: f32[128]) -> f32[128,128] {
  %param_0.3 = f32[128,128]{1,0} parameter(0)
  %param_1.3 = f32[128]{0} parameter(1)
  %broadcast.3 = f32[128,128]{1,0} broadcast(%param_1.3), dimensions={0}
  ROOT %multiply.1 = f32[128,128]{1,0} multiply(%param_0.3, %broadcast.3)
}

%fused_computation.3 (param_0.5: f32[128]) -> f32[128] {
  %constant.6 = f32[] constant(1)
  %broadcast.4 = f32[128]{0} broadcast(%constant.6), dimensions={}
  %param_0.5 = f32[128]{0} parameter(0)
  ROOT %divide.1 = f32[128]{0} divide(%broadcast.4, %param_0.5)
}

ENTRY %main.3 (x.1: f32[128,64]) -> f32[128,128] {
  %x.1 = f32[128,64]{1,0} parameter(0)
  %ynn_fusion.1 = f32[128,128]{1,0} fusion(%x.1), kind=kCustom, calls=%fused_computation.1, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %ynn_fusion = f32[128]{0} fusion(%ynn_fusion.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %broadcast_divide_fusion = f32[128]{0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_computation.3
  ROOT %broadcast_multiply_fusion = f32[128,128]{1,0} fusion(%ynn_fusion.1, %broadcast_divide_fusion), kind=kLoop, calls=%fused_computation.2
}
""",
        {"flops": 2162560.0, "bytes accessed": 296960.0, "transcendentals": 16384.0},
    ),
    "dus": (
        "lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 0))  with  jnp.ones((64,64)), jnp.ones((4,64)), 3",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[64,64]{1,0}, f32[4,64]{1,0}, s32[])->f32[64,64]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0: f32[64,64], param_1: f32[4,64], param_2.2: s32[]) -> f32[64,64] {
  %param_0 = f32[64,64]{1,0} parameter(0)
  %param_1 = f32[4,64]{1,0} parameter(1)
  %param_2.2 = s32[] parameter(2)
  %constant.1 = s32[] constant(0)
  %lt.0 = pred[] compare(%param_2.2, %constant.1), direction=LT
  %constant.0 = s32[] constant(64)
  %add.0 = s32[] add(%param_2.2, %constant.0)
  %select_n.0 = s32[] select(%lt.0, %add.0, %param_2.2)
  ROOT %dynamic_update_slice.0 = f32[64,64]{1,0} dynamic-update-slice(%param_0, %param_1, %select_n.0, %constant.1)
}

ENTRY %main.1 (x.1: f32[64,64], u.1: f32[4,64], i.1: s32[]) -> f32[64,64] {
  %x.1 = f32[64,64]{1,0} parameter(0)
  %u.1 = f32[4,64]{1,0} parameter(1)
  %i.1 = s32[] parameter(2)
  %copy.1 = f32[64,64]{1,0} copy(%x.1)
  ROOT %select_dynamic-update-slice_fusion = f32[64,64]{1,0} fusion(%copy.1, %u.1, %i.1), kind=kLoop, calls=%fused_computation
}
""",
        {"flops": 3.0, "bytes accessed": 34820.0},
    ),
    "dslice": (
        "lambda x, i: lax.dynamic_slice(x, (i, 0), (4, 64)) * 3  with  jnp.ones((64,64)), 3",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[64,64]{1,0}, s32[])->f32[4,64]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0.1: f32[64,64], param_1.4: s32[]) -> f32[4,64] {
  %param_0.1 = f32[64,64]{1,0} parameter(0)
  %param_1.4 = s32[] parameter(1)
  %constant.2 = s32[] constant(0)
  %lt.0 = pred[] compare(%param_1.4, %constant.2), direction=LT
  %constant.1 = s32[] constant(64)
  %add.0 = s32[] add(%param_1.4, %constant.1)
  %select_n.0 = s32[] select(%lt.0, %add.0, %param_1.4)
  %dynamic_slice.0 = f32[4,64]{1,0} dynamic-slice(%param_0.1, %select_n.0, %constant.2), dynamic_slice_sizes={4,64}
  %constant.0 = f32[] constant(3)
  %mul.1 = f32[4,64]{1,0} broadcast(%constant.0), dimensions={}
  ROOT %mul.0 = f32[4,64]{1,0} multiply(%dynamic_slice.0, %mul.1)
}

ENTRY %main.1 (x.1: f32[64,64], i.1: s32[]) -> f32[4,64] {
  %x.1 = f32[64,64]{1,0} parameter(0)
  %i.1 = s32[] parameter(1)
  ROOT %broadcast_multiply_fusion = f32[4,64]{1,0} fusion(%x.1, %i.1), kind=kLoop, calls=%fused_computation
}
""",
        {"flops": 259.0, "bytes accessed": 2052.0},
    ),
    "bf16mm": (
        "lambda a, b: (a @ b).astype(jnp.float32)  with  jnp.ones((128,256), jnp.bfloat16), jnp.ones((256,64), jnp.bfloat16)",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(bf16[128,256]{1,0}, bf16[256,64]{1,0})->f32[128,64]{1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0: f32[128,256], param_1: f32[256,64]) -> f32[128,64] {
  %param_0 = f32[128,256]{1,0} parameter(0)
  %param_1 = f32[256,64]{1,0} parameter(1)
  ROOT %dot_general.0 = f32[128,64]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%wrapped_convert_computation (param_0.1: bf16[128,256]) -> f32[128,256] {
  %param_0.1 = bf16[128,256]{1,0} parameter(0)
  ROOT %convert.3 = f32[128,256]{1,0} convert(%param_0.1)
}

%wrapped_convert_computation.1 (param_0.2: bf16[256,64]) -> f32[256,64] {
  %param_0.2 = bf16[256,64]{1,0} parameter(0)
  ROOT %convert.4 = f32[256,64]{1,0} convert(%param_0.2)
}

ENTRY %main.1 (a.1: bf16[128,256], b.1: bf16[256,64]) -> f32[128,64] {
  %a.1 = bf16[128,256]{1,0} parameter(0)
  %b.1 = bf16[256,64]{1,0} parameter(1)
  %wrapped_convert = f32[128,256]{1,0} fusion(%a.1), kind=kLoop, calls=%wrapped_convert_computation
  %wrapped_convert.1 = f32[256,64]{1,0} fusion(%b.1), kind=kLoop, calls=%wrapped_convert_computation.1
  ROOT %ynn_fusion = f32[128,64]{1,0} fusion(%wrapped_convert, %wrapped_convert.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
}
""",
        {"bytes accessed": 524288.0, "flops": 4243456.0},
    ),
    "batched": (
        "lambda a, b: jnp.einsum('bij,bjk->bik', a, b)  with  jnp.ones((4,32,16)), jnp.ones((4,16,8))",
        """HloModule jit__lambda, is_scheduled=true, entry_computation_layout={(f32[4,32,16]{2,1,0}, f32[4,16,8]{2,1,0})->f32[4,32,8]{2,1,0}}, allow_spmd_sharding_propagation_to_parameters={true,true}, allow_spmd_sharding_propagation_to_output={true}

%fused_computation (param_0: f32[4,32,16], param_1: f32[4,16,8]) -> f32[4,32,8] {
  %param_0 = f32[4,32,16]{2,1,0} parameter(0)
  %param_1 = f32[4,16,8]{2,1,0} parameter(1)
  ROOT %dot_general.0 = f32[4,32,8]{2,1,0} dot(%param_0, %param_1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}

ENTRY %main.1 (a.1: f32[4,32,16], b.1: f32[4,16,8]) -> f32[4,32,8] {
  %a.1 = f32[4,32,16]{2,1,0} parameter(0)
  %b.1 = f32[4,16,8]{2,1,0} parameter(1)
  ROOT %ynn_fusion = f32[4,32,8]{2,1,0} fusion(%a.1, %b.1), kind=kCustom, calls=%fused_computation, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
}
""",
        {"bytes accessed": 14336.0, "flops": 32768.0},
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_totals_match_xla(name: str) -> None:
    _, text, xla = PROGRAMS[name]
    ours = module_totals(parse_module(text))
    assert ours.flops == pytest.approx(xla.get("flops", 0.0), rel=0.01)
    assert ours.transcendentals == pytest.approx(xla.get("transcendentals", 0.0), rel=0.01)
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=0.10)
    # exact agreement: profan mirrors XLA's rules (a drift here flags a rule change)
    assert ours.bytes_accessed == pytest.approx(xla["bytes accessed"], rel=1e-6)
    assert ours.flops == pytest.approx(xla.get("flops", 0.0), rel=1e-6)
    assert not ours.unknown_ops

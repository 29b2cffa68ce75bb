"""Layers under ``jax.lax.scan``: the matmul sits in a while body, fed by the loop tuple.

The module below is real XLA output (jax/jaxlib 0.10.2, CPU, 8 virtual devices) of::

    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import numpy as np
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
    def forward(ws, x):
        def layer(h, w):
            return jnp.maximum(h @ w, 0), None
        h, _ = jax.lax.scan(layer, x, ws)
        return h
    w_sharding = NamedSharding(mesh, P(None, None, "model"))
    x_sharding = NamedSharding(mesh, P("data", None))
    f = jax.jit(forward, in_shardings=(w_sharding, x_sharding))
    shapes = [(3, 64, 64), (32, 64)]
    args = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]
    open("/tmp/scan.hlo", "w").write(f.lower(*args).compile().as_text())
"""

from __future__ import annotations

from profan.hlo.parser import parse_module
from profan.sharding import describe

SCAN_HLO = r"""HloModule jit_forward, is_scheduled=true, entry_computation_layout={(f32[3,64,32]{2,1,0}, f32[8,64]{1,0})->f32[8,32]{1,0}}, allow_spmd_sharding_propagation_to_parameters={false,false}, allow_spmd_sharding_propagation_to_output={true}, num_partitions=8

FileNames
1 "/tmp/gen_scan.py"

FunctionNames
1 "<module>"
2 "forward"
3 "forward.<locals>.layer"

FileLocations
1 {file_name_id=1 function_name_id=1 line=14 end_line=14 column=33 end_column=33}
2 {file_name_id=1 function_name_id=2 line=10 end_line=10 column=11 end_column=11}
3 {file_name_id=1 function_name_id=3 line=9 end_line=9 column=27 end_column=27}
4 {file_name_id=1 function_name_id=3 line=9 end_line=9 column=15 end_column=15}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=2 parent_frame_id=3}
4 {file_location_id=2 parent_frame_id=4}
5 {file_location_id=2 parent_frame_id=5}
6 {file_location_id=3 parent_frame_id=5}
7 {file_location_id=4 parent_frame_id=5}


%fused_computation (param_0: f32[8,64], param_1: f32[64,32]) -> f32[8,32] {
  %param_0 = f32[8,64]{1,0} parameter(0)
  %param_1 = f32[64,32]{1,0} parameter(1)
  ROOT %dot.1 = f32[8,32]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(forward)/while/body/closed_call/dot_general" stack_frame_id=6}
}

%fused_computation.1 (param_0.1: f32[8,32]) -> f32[8,32] {
  %param_0.1 = f32[8,32]{1,0} parameter(0)
  %constant.7.clone.1 = f32[] constant(0)
  %max.9 = f32[8,32]{1,0} broadcast(%constant.7.clone.1), dimensions={}, metadata={op_name="jit(forward)/while/body/closed_call/max" stack_frame_id=7}
  ROOT %max.8 = f32[8,32]{1,0} maximum(%param_0.1, %max.9), metadata={op_name="jit(forward)/while/body/closed_call/max" stack_frame_id=7}
}

%fused_computation.2 (param_0.3: f32[3,64,32], param_1.3: s32[]) -> f32[64,32] {
  %param_0.3 = f32[3,64,32]{2,1,0} parameter(0)
  %param_1.3 = s32[] parameter(1)
  %constant.26 = s32[] constant(0), metadata={op_name="jit(forward)/while/body/jit(dynamic_index_in_dim)/dynamic_slice" stack_frame_id=5}
  %dynamic-slice.10 = f32[1,64,32]{2,1,0} dynamic-slice(%param_0.3, %param_1.3, %constant.26, %constant.26), dynamic_slice_sizes={1,64,32}, metadata={op_name="jit(forward)/while/body/jit(dynamic_index_in_dim)/dynamic_slice" stack_frame_id=5}
  ROOT %bitcast.2 = f32[64,32]{1,0} bitcast(%dynamic-slice.10), metadata={op_name="jit(forward)/while/body/jit(dynamic_index_in_dim)/dynamic_slice" stack_frame_id=5}
}

%wrapped_add_computation (param_0.5: s32[], param_1.6: s32[]) -> s32[] {
  %param_0.5 = s32[] parameter(0)
  %param_1.6 = s32[] parameter(1)
  ROOT %add.3 = s32[] add(%param_0.5, %param_1.6), metadata={op_name="jit(forward)/while/body/add" stack_frame_id=4}
}

%wrapped_copy_computation (param_0.6: f32[8,32]) -> f32[8,32] {
  %param_0.6 = f32[8,32]{1,0} parameter(0)
  ROOT %copy.2 = f32[8,32]{0,1} copy(%param_0.6)
}

%wrapped_copy_computation.1 (param_0.7: f32[8,64]) -> f32[8,64] {
  %param_0.7 = f32[8,64]{0,1} parameter(0)
  ROOT %copy.3 = f32[8,64]{1,0} copy(%param_0.7), metadata={op_name="jit(forward)/while/body/closed_call/dot_general" stack_frame_id=6}
}

%region_0.1_spmd (param: (s32[], f32[8,32], f32[3,64,32])) -> (s32[], f32[8,32], f32[3,64,32]) {
  %param = (s32[], f32[8,32]{1,0}, f32[3,64,32]{2,1,0}) parameter(0)
  %constant.4.clone = s32[] constant(1)
  %get-tuple-element.26 = f32[3,64,32]{2,1,0} get-tuple-element(%param), index=2
  %get-tuple-element.22 = f32[8,32]{1,0} get-tuple-element(%param), index=1
  %get-tuple-element.21 = s32[] get-tuple-element(%param), index=0
  %wrapped_copy = f32[8,32]{0,1} fusion(%get-tuple-element.22), kind=kLoop, calls=%wrapped_copy_computation
  %copy.6 = s32[] copy(%get-tuple-element.21)
  %all-gather = f32[8,64]{0,1} all-gather(%wrapped_copy), channel_id=1, replica_groups=mesh['axis_0'=4,'axis_1'=2] {'axis_1'}, dimensions={1}, use_global_device_ids=true, metadata={op_name="jit(forward)/while/body/closed_call/dot_general" stack_frame_id=6}
  %dynamic-slice_bitcast_fusion = f32[64,32]{1,0} fusion(%get-tuple-element.26, %copy.6), kind=kLoop, calls=%fused_computation.2, metadata={op_name="jit(forward)/while/body/jit(dynamic_index_in_dim)/dynamic_slice" stack_frame_id=5}
  %wrapped_add = s32[] fusion(%copy.6, %constant.4.clone), kind=kLoop, calls=%wrapped_add_computation, metadata={op_name="jit(forward)/while/body/add" stack_frame_id=4}
  %wrapped_copy.1 = f32[8,64]{1,0} fusion(%all-gather), kind=kLoop, calls=%wrapped_copy_computation.1, metadata={op_name="jit(forward)/while/body/closed_call/dot_general" stack_frame_id=6}
  %ynn_fusion = f32[8,32]{1,0} fusion(%wrapped_copy.1, %dynamic-slice_bitcast_fusion), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(forward)/while/body/closed_call/dot_general" stack_frame_id=6}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %broadcast_maximum_fusion = f32[8,32]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_computation.1, metadata={op_name="jit(forward)/while/body/closed_call/max" stack_frame_id=7}
  ROOT %tuple.7 = (s32[], f32[8,32]{1,0}, f32[3,64,32]{2,1,0}) tuple(%wrapped_add, %broadcast_maximum_fusion, %get-tuple-element.26)
}

%wrapped_compare_computation (param_0.8: s32[], param_1.7: s32[]) -> pred[] {
  %param_0.8 = s32[] parameter(0)
  %param_1.7 = s32[] parameter(1)
  ROOT %lt.3 = pred[] compare(%param_0.8, %param_1.7), direction=LT, metadata={op_name="jit(forward)/while/cond/lt" stack_frame_id=4}
}

%region_1.2_spmd (param.1: (s32[], f32[8,32], f32[3,64,32])) -> pred[] {
  %param.1 = (s32[], f32[8,32]{1,0}, f32[3,64,32]{2,1,0}) parameter(0)
  %constant.10.clone = s32[] constant(3)
  %get-tuple-element.16 = s32[] get-tuple-element(%param.1), index=0
  ROOT %wrapped_compare = pred[] fusion(%get-tuple-element.16, %constant.10.clone), kind=kLoop, calls=%wrapped_compare_computation, metadata={op_name="jit(forward)/while/cond/lt" stack_frame_id=4}
}

%fused_computation.3 (param_0.4: f32[8,64], param_1.5: s32[8], param_2.4: u32[]) -> f32[8,32] {
  %param_0.4 = f32[8,64]{1,0} parameter(0)
  %constant.11.clone.1 = s32[] constant(0)
  %param_1.5 = s32[8]{0} parameter(1)
  %param_2.4 = u32[] parameter(2)
  %dynamic-slice.12 = s32[1]{0} dynamic-slice(%param_1.5, %param_2.4), dynamic_slice_sizes={1}, metadata={op_name="jit(forward)/while" stack_frame_id=3}
  %bitcast.3 = s32[] bitcast(%dynamic-slice.12), metadata={op_name="jit(forward)/while" stack_frame_id=3}
  ROOT %dynamic-slice.11 = f32[8,32]{1,0} dynamic-slice(%param_0.4, %constant.11.clone.1, %bitcast.3), dynamic_slice_sizes={8,32}, metadata={op_name="jit(forward)/while" stack_frame_id=3}
}

ENTRY %main.3_spmd (param.3: f32[3,64,32], param.2: f32[8,64]) -> f32[8,32] {
  %partition-id.2 = u32[] partition-id()
  %constant.11.clone = s32[] constant(0)
  %param.2 = f32[8,64]{1,0} parameter(1), sharding={devices=[4,1,2]<=[8] last_tile_dim_replicate}, metadata={op_name="x"}
  %param.3 = f32[3,64,32]{2,1,0} parameter(0), sharding={devices=[1,1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}, metadata={op_name="ws"}
  %constant.22 = s32[8]{0} constant({0, 32, 0, 32, 0, 32, 0, 32}), metadata={op_name="jit(forward)/while" stack_frame_id=3}
  %copy.10 = s32[] copy(%constant.11.clone)
  %bitcast_dynamic-slice_fusion = f32[8,32]{1,0} fusion(%param.2, %constant.22, %partition-id.2), kind=kLoop, calls=%fused_computation.3, metadata={op_name="jit(forward)/while" stack_frame_id=3}
  %tuple.5 = (s32[], f32[8,32]{1,0}, f32[3,64,32]{2,1,0}) tuple(%copy.10, %bitcast_dynamic-slice_fusion, %param.3)
  %while.8 = (s32[], f32[8,32]{1,0}, f32[3,64,32]{2,1,0}) while(%tuple.5), condition=%region_1.2_spmd, body=%region_0.1_spmd, metadata={op_name="jit(forward)/while" stack_frame_id=3}, backend_config={"dynamic_variables":[],"known_induction_variable":{"tuple_index":"0"},"known_init_step":{"init":"0","step":"1"},"known_trip_count":{"n":"3"}}
  ROOT %get-tuple-element.17 = f32[8,32]{1,0} get-tuple-element(%while.8), index=1, metadata={op_name="jit(forward)/while" stack_frame_id=3}
}

"""  # noqa: E501


def test_matmul_in_while_body_gets_global_shapes() -> None:
    report = describe(parse_module(SCAN_HLO))
    assert report.mesh.shape == {"axis0": 4, "axis1": 2}
    (matmul,) = report.matmuls
    # h [32, 64] (batch split 4 ways on data) @ w [64, 64] (columns split 2 ways on model).
    assert matmul.local_lhs == [8, 64] and matmul.local_rhs == [64, 32]
    assert matmul.global_lhs == [32, 64] and matmul.global_rhs == [64, 64]
    assert matmul.global_out == [32, 64]
    labels = {(s.strategy, tuple(s.axes)) for s in report.strategies}
    assert ("data parallel", ("axis0",)) in labels
    assert ("tensor parallel (column split)", ("axis1",)) in labels
    # The activation gathered over model between layers is not mistaken for an FSDP weight.
    assert not any(strategy.startswith("FSDP") for strategy, _ in labels)

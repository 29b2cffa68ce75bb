"""An FSDP/ZeRO-3 training step as XLA:CPU compiled it: weights gathered before use.

The module below is real XLA output (jax/jaxlib 0.10.2, CPU, 8 virtual devices), printed by
``jax.jit(step).lower(...).compile().as_text()`` for this program::

    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import numpy as np
    mesh = Mesh(np.array(jax.devices()).reshape(8), ("fsdp",))
    def loss(w1, w2, x):
        h = jnp.maximum(x @ w1, 0)
        return jnp.mean((h @ w2) ** 2)
    def step(w1, w2, x):
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2, x)
        return w1 - 0.01 * g1, w2 - 0.01 * g2
    ws = NamedSharding(mesh, P("fsdp", None))
    xs = NamedSharding(mesh, P("fsdp", None))
    f = jax.jit(step, in_shardings=(ws, ws, xs), out_shardings=(ws, ws))
    shapes = [(64, 128), (128, 64), (32, 64)]
    args = [jax.ShapeDtypeStruct(shape, jnp.float32) for shape in shapes]
    c = f.lower(*args).compile()  # equivalent to the generating script's one-liner
    open('/tmp/fsdp.hlo','w').write(c.as_text())

Both weights are sharded on dim 0 over the single ``fsdp`` axis and so is the batch.
"""

from __future__ import annotations

from profan.hlo.parser import parse_module
from profan.sharding import describe

FSDP_STEP_HLO = r"""HloModule jit_step, is_scheduled=true, entry_computation_layout={(f32[8,128]{1,0}, f32[16,64]{1,0}, f32[4,64]{1,0})->(f32[8,128]{1,0}, f32[16,64]{1,0})}, allow_spmd_sharding_propagation_to_parameters={false,false,false}, allow_spmd_sharding_propagation_to_output={false,false}, num_partitions=8

FileNames
1 "/tmp/gen_fsdp.py"

FunctionNames
1 "<module>"
2 "step"
3 "loss"

FileLocations
1 {file_name_id=1 function_name_id=1 line=16 end_line=16 column=4 end_column=4}
2 {file_name_id=1 function_name_id=2 line=11 end_line=11 column=13 end_column=13}
3 {file_name_id=1 function_name_id=3 line=8 end_line=8 column=20 end_column=20}
4 {file_name_id=1 function_name_id=3 line=8 end_line=8 column=8 end_column=8}
5 {file_name_id=1 function_name_id=3 line=9 end_line=9 column=21 end_column=21}
6 {file_name_id=1 function_name_id=3 line=9 end_line=9 column=20 end_column=20}
7 {file_name_id=1 function_name_id=3 line=9 end_line=9 column=11 end_column=11}
8 {file_name_id=1 function_name_id=2 line=12 end_line=12 column=16 end_column=16}
9 {file_name_id=1 function_name_id=2 line=12 end_line=12 column=11 end_column=11}
10 {file_name_id=1 function_name_id=2 line=12 end_line=12 column=32 end_column=32}
11 {file_name_id=1 function_name_id=2 line=12 end_line=12 column=27 end_column=27}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=3 parent_frame_id=3}
4 {file_location_id=4 parent_frame_id=3}
5 {file_location_id=5 parent_frame_id=3}
6 {file_location_id=6 parent_frame_id=3}
7 {file_location_id=7 parent_frame_id=3}
8 {file_location_id=8 parent_frame_id=2}
9 {file_location_id=9 parent_frame_id=2}
10 {file_location_id=10 parent_frame_id=2}
11 {file_location_id=11 parent_frame_id=2}


%add.clone (x.3: f32[], y.1: f32[]) -> f32[] {
  %x.3 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%x.3, %y.1)
}

%fused_computation (param_0: f32[32,64], param_1: f32[16,64]) -> f32[32,16] {
  %param_0 = f32[32,64]{1,0} parameter(0)
  %param_1 = f32[16,64]{1,0} parameter(1)
  ROOT %dot.6 = f32[32,16]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={1}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
}

%fused_computation.1 (param_0.1: f32[4,128], param_1.1: f32[128,64]) -> f32[4,64] {
  %param_0.1 = f32[4,128]{1,0} parameter(0)
  %param_1.1 = f32[128,64]{1,0} parameter(1)
  ROOT %dot.7 = f32[4,64]{1,0} dot(%param_0.1, %param_1.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=5}
}

%fused_computation.2 (param_0.2: f32[4,64], param_1.2: f32[64,128]) -> f32[4,128] {
  %param_0.2 = f32[4,64]{1,0} parameter(0)
  %param_1.2 = f32[64,128]{1,0} parameter(1)
  ROOT %dot.8 = f32[4,128]{1,0} dot(%param_0.2, %param_1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=3}
}

%fused_computation.3 (param_0.3: f32[16,64], param_1.8: f32[64,128], param_2.3: u32[]) -> f32[16,64] {
  %param_0.3 = f32[16,64]{1,0} parameter(0)
  %param_1.8 = f32[64,128]{1,0} parameter(1)
  %constant.42 = s32[] constant(0), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %param_2.3 = u32[] parameter(2)
  %convert.1 = s32[] convert(%param_2.3), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %constant.41 = s32[] constant(16), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %multiply.8 = s32[] multiply(%convert.1, %constant.41), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %dynamic-slice.7 = f32[64,16]{1,0} dynamic-slice(%param_1.8, %constant.42, %multiply.8), dynamic_slice_sizes={64,16}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %constant.2.clone.1 = f32[] constant(0.01)
  %broadcast.10 = f32[64,16]{1,0} broadcast(%constant.2.clone.1), dimensions={}, metadata={op_name="jit(step)/mul" stack_frame_id=10}
  %mul.22 = f32[64,16]{1,0} multiply(%dynamic-slice.7, %broadcast.10), metadata={op_name="jit(step)/mul" stack_frame_id=10}
  %transpose.12 = f32[16,64]{0,1} transpose(%mul.22), dimensions={1,0}, metadata={op_name="jit(step)/mul" stack_frame_id=10}
  %copy.6 = f32[16,64]{1,0} copy(%transpose.12), metadata={op_name="jit(step)/mul" stack_frame_id=10}
  ROOT %sub.8 = f32[16,64]{1,0} subtract(%param_0.3, %copy.6), metadata={op_name="jit(step)/sub" stack_frame_id=11}
}

%fused_computation.4 (param_0.4: f32[8,128], param_1.10: f32[8,128]) -> f32[8,128] {
  %param_0.4 = f32[8,128]{1,0} parameter(0)
  %param_1.10 = f32[8,128]{1,0} parameter(1)
  %constant.2.clone.2 = f32[] constant(0.01)
  %mul.24 = f32[8,128]{1,0} broadcast(%constant.2.clone.2), dimensions={}, metadata={op_name="jit(step)/mul" stack_frame_id=8}
  %mul.23 = f32[8,128]{1,0} multiply(%param_1.10, %mul.24), metadata={op_name="jit(step)/mul" stack_frame_id=8}
  ROOT %sub.9 = f32[8,128]{1,0} subtract(%param_0.4, %mul.23), metadata={op_name="jit(step)/sub" stack_frame_id=9}
}

%fused_computation.5 (param_0.6: f32[4,1,16], param_1.17: f32[4,1,16], param_2.7: f32[4,1,16], param_3.3: f32[4,1,16], param_4.4: f32[4,1,16], param_5.2: f32[4,1,16], param_6.1: f32[4,1,16], param_7.1: f32[4,1,16], param_8.1: f32[32,16]) -> f32[32,16] {
  %param_8.1 = f32[32,16]{1,0} parameter(8)
  %copy.9 = f32[32,16]{0,1} copy(%param_8.1), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %param_0.6 = f32[4,1,16]{2,1,0} parameter(0)
  %param_1.17 = f32[4,1,16]{2,1,0} parameter(1)
  %param_2.7 = f32[4,1,16]{2,1,0} parameter(2)
  %param_3.3 = f32[4,1,16]{2,1,0} parameter(3)
  %param_4.4 = f32[4,1,16]{2,1,0} parameter(4)
  %param_5.2 = f32[4,1,16]{2,1,0} parameter(5)
  %param_6.1 = f32[4,1,16]{2,1,0} parameter(6)
  %param_7.1 = f32[4,1,16]{2,1,0} parameter(7)
  %concatenate.2 = f32[4,8,16]{2,1,0} concatenate(%param_0.6, %param_1.17, %param_2.7, %param_3.3, %param_4.4, /*index=5*/%param_5.2, %param_6.1, %param_7.1), dimensions={1}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %transpose.13 = f32[8,4,16]{2,0,1} transpose(%concatenate.2), dimensions={1,0,2}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %copy.8 = f32[8,4,16]{2,1,0} copy(%transpose.13), metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %copy.7 = f32[8,4,16]{1,0,2} copy(%copy.8), metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast.4 = f32[32,16]{0,1} bitcast(%copy.7), metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  ROOT %mul.25 = f32[32,16]{0,1} multiply(%copy.9, %bitcast.4), metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.6 (param_0.8: f32[4,128]) -> f32[4,1,16] {
  %param_0.8 = f32[4,128]{1,0} parameter(0)
  %bitcast.5 = f32[4,8,16]{2,1,0} bitcast(%param_0.8), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.16 = f32[4,1,16]{2,1,0} slice(%bitcast.5), slice={[0:4], [7:8], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.7 (param_0.10: f32[4,128]) -> f32[4,1,16] {
  %param_0.10 = f32[4,128]{1,0} parameter(0)
  %bitcast.6 = f32[4,8,16]{2,1,0} bitcast(%param_0.10), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.17 = f32[4,1,16]{2,1,0} slice(%bitcast.6), slice={[0:4], [6:7], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.8 (param_0.12: f32[4,128]) -> f32[4,1,16] {
  %param_0.12 = f32[4,128]{1,0} parameter(0)
  %bitcast.7 = f32[4,8,16]{2,1,0} bitcast(%param_0.12), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.18 = f32[4,1,16]{2,1,0} slice(%bitcast.7), slice={[0:4], [5:6], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.9 (param_0.14: f32[4,128]) -> f32[4,1,16] {
  %param_0.14 = f32[4,128]{1,0} parameter(0)
  %bitcast.8 = f32[4,8,16]{2,1,0} bitcast(%param_0.14), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.19 = f32[4,1,16]{2,1,0} slice(%bitcast.8), slice={[0:4], [4:5], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.10 (param_0.16: f32[4,128]) -> f32[4,1,16] {
  %param_0.16 = f32[4,128]{1,0} parameter(0)
  %bitcast.9 = f32[4,8,16]{2,1,0} bitcast(%param_0.16), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.20 = f32[4,1,16]{2,1,0} slice(%bitcast.9), slice={[0:4], [3:4], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.11 (param_0.18: f32[4,128]) -> f32[4,1,16] {
  %param_0.18 = f32[4,128]{1,0} parameter(0)
  %bitcast.10 = f32[4,8,16]{2,1,0} bitcast(%param_0.18), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.21 = f32[4,1,16]{2,1,0} slice(%bitcast.10), slice={[0:4], [2:3], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.12 (param_0.20: f32[4,128]) -> f32[4,1,16] {
  %param_0.20 = f32[4,128]{1,0} parameter(0)
  %bitcast.11 = f32[4,8,16]{2,1,0} bitcast(%param_0.20), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.22 = f32[4,1,16]{2,1,0} slice(%bitcast.11), slice={[0:4], [1:2], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.13 (param_0.22: f32[4,128]) -> f32[4,1,16] {
  %param_0.22 = f32[4,128]{1,0} parameter(0)
  %bitcast.12 = f32[4,8,16]{2,1,0} bitcast(%param_0.22), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  ROOT %slice.23 = f32[4,1,16]{2,1,0} slice(%bitcast.12), slice={[0:4], [0:1], [0:16]}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
}

%fused_computation.14 (param_0.26: f32[4,128]) -> f32[4,128] {
  %param_0.26 = f32[4,128]{1,0} parameter(0)
  %constant.5.clone.1 = f32[] constant(0)
  %broadcast.12 = f32[4,128]{1,0} broadcast(%constant.5.clone.1), dimensions={}, metadata={op_name="broadcast.3"}
  %max.3 = f32[4,128]{1,0} maximum(%param_0.26, %broadcast.12), metadata={op_name="jit(step)/jvp()/max" stack_frame_id=4}
  %eq.7 = pred[4,128]{1,0} compare(%param_0.26, %max.3), direction=EQ, metadata={op_name="jit(step)/jvp()/eq" stack_frame_id=4}
  %constant.1.clone.1 = f32[] constant(1)
  %broadcast.11 = f32[4,128]{1,0} broadcast(%constant.1.clone.1), dimensions={}, metadata={op_name="broadcast.2"}
  %select_n.7 = f32[4,128]{1,0} select(%eq.7, %broadcast.11, %broadcast.12), metadata={op_name="jit(step)/jvp()/select_n" stack_frame_id=4}
  %eq.6 = pred[4,128]{1,0} compare(%broadcast.12, %max.3), direction=EQ, metadata={op_name="jit(step)/jvp()/eq" stack_frame_id=4}
  %constant.6.clone.1 = f32[] constant(2)
  %broadcast_in_dim.9 = f32[4,128]{1,0} broadcast(%constant.6.clone.1), dimensions={}, metadata={op_name="jit(step)/jvp()/broadcast_in_dim" stack_frame_id=4}
  %select_n.6 = f32[4,128]{1,0} select(%eq.6, %broadcast_in_dim.9, %broadcast.11), metadata={op_name="jit(step)/jvp()/select_n" stack_frame_id=4}
  ROOT %div.3 = f32[4,128]{1,0} divide(%select_n.7, %select_n.6), metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
}

%fused_computation.15 (param_0.27: f32[4,64]) -> f32[4,64] {
  %param_0.27 = f32[4,64]{1,0} parameter(0)
  %constant.43 = f32[] constant(0.0009765625)
  %broadcast.13 = f32[4,64]{1,0} broadcast(%constant.43), dimensions={}, metadata={op_name="jit(step)/transpose(jvp())/mul;jit(step)/transpose(jvp())/broadcast_in_dim"}
  ROOT %broadcast_in_dim.10 = f32[4,64]{1,0} multiply(%param_0.27, %broadcast.13), metadata={op_name="jit(step)/transpose(jvp())/mul;jit(step)/transpose(jvp())/broadcast_in_dim"}
}

%fused_computation.16 (param_0.28: f32[4,128]) -> f32[4,128] {
  %param_0.28 = f32[4,128]{1,0} parameter(0)
  %constant.5.clone.2 = f32[] constant(0)
  %broadcast.14 = f32[4,128]{1,0} broadcast(%constant.5.clone.2), dimensions={}, metadata={op_name="broadcast.3"}
  ROOT %max.4 = f32[4,128]{1,0} maximum(%param_0.28, %broadcast.14), metadata={op_name="jit(step)/jvp()/max" stack_frame_id=4}
}

%fused_computation.17 (param_0.32: f32[4,1,8], param_1.29: f32[4,1,8], param_2.14: f32[4,1,8], param_3.9: f32[4,1,8], param_4.5: f32[4,1,8], param_5.3: f32[4,1,8], param_6.2: f32[4,1,8], param_7.2: f32[4,1,8]) -> f32[32,8] {
  %param_0.32 = f32[4,1,8]{2,1,0} parameter(0)
  %param_1.29 = f32[4,1,8]{2,1,0} parameter(1)
  %param_2.14 = f32[4,1,8]{2,1,0} parameter(2)
  %param_3.9 = f32[4,1,8]{2,1,0} parameter(3)
  %param_4.5 = f32[4,1,8]{2,1,0} parameter(4)
  %param_5.3 = f32[4,1,8]{2,1,0} parameter(5)
  %param_6.2 = f32[4,1,8]{2,1,0} parameter(6)
  %param_7.2 = f32[4,1,8]{2,1,0} parameter(7)
  %concatenate.3 = f32[4,8,8]{2,1,0} concatenate(%param_0.32, %param_1.29, %param_2.14, %param_3.9, %param_4.5, /*index=5*/%param_5.3, %param_6.2, %param_7.2), dimensions={1}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %transpose.14 = f32[8,4,8]{2,0,1} transpose(%concatenate.3), dimensions={1,0,2}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %copy.10 = f32[8,4,8]{2,1,0} copy(%transpose.14), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  ROOT %bitcast.13 = f32[32,8]{1,0} bitcast(%copy.10), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.18 (param_0.34: f32[4,64]) -> f32[4,1,8] {
  %param_0.34 = f32[4,64]{1,0} parameter(0)
  %bitcast.14 = f32[4,8,8]{2,1,0} bitcast(%param_0.34), metadata={op_name="x"}
  ROOT %slice.24 = f32[4,1,8]{2,1,0} slice(%bitcast.14), slice={[0:4], [7:8], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.19 (param_0.36: f32[4,64]) -> f32[4,1,8] {
  %param_0.36 = f32[4,64]{1,0} parameter(0)
  %bitcast.15 = f32[4,8,8]{2,1,0} bitcast(%param_0.36), metadata={op_name="x"}
  ROOT %slice.25 = f32[4,1,8]{2,1,0} slice(%bitcast.15), slice={[0:4], [6:7], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.20 (param_0.38: f32[4,64]) -> f32[4,1,8] {
  %param_0.38 = f32[4,64]{1,0} parameter(0)
  %bitcast.16 = f32[4,8,8]{2,1,0} bitcast(%param_0.38), metadata={op_name="x"}
  ROOT %slice.26 = f32[4,1,8]{2,1,0} slice(%bitcast.16), slice={[0:4], [5:6], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.21 (param_0.40: f32[4,64]) -> f32[4,1,8] {
  %param_0.40 = f32[4,64]{1,0} parameter(0)
  %bitcast.17 = f32[4,8,8]{2,1,0} bitcast(%param_0.40), metadata={op_name="x"}
  ROOT %slice.27 = f32[4,1,8]{2,1,0} slice(%bitcast.17), slice={[0:4], [4:5], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.22 (param_0.42: f32[4,64]) -> f32[4,1,8] {
  %param_0.42 = f32[4,64]{1,0} parameter(0)
  %bitcast.18 = f32[4,8,8]{2,1,0} bitcast(%param_0.42), metadata={op_name="x"}
  ROOT %slice.28 = f32[4,1,8]{2,1,0} slice(%bitcast.18), slice={[0:4], [3:4], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.23 (param_0.44: f32[4,64]) -> f32[4,1,8] {
  %param_0.44 = f32[4,64]{1,0} parameter(0)
  %bitcast.19 = f32[4,8,8]{2,1,0} bitcast(%param_0.44), metadata={op_name="x"}
  ROOT %slice.29 = f32[4,1,8]{2,1,0} slice(%bitcast.19), slice={[0:4], [2:3], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.24 (param_0.46: f32[4,64]) -> f32[4,1,8] {
  %param_0.46 = f32[4,64]{1,0} parameter(0)
  %bitcast.20 = f32[4,8,8]{2,1,0} bitcast(%param_0.46), metadata={op_name="x"}
  ROOT %slice.30 = f32[4,1,8]{2,1,0} slice(%bitcast.20), slice={[0:4], [1:2], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%fused_computation.25 (param_0.48: f32[4,64]) -> f32[4,1,8] {
  %param_0.48 = f32[4,64]{1,0} parameter(0)
  %bitcast.21 = f32[4,8,8]{2,1,0} bitcast(%param_0.48), metadata={op_name="x"}
  ROOT %slice.31 = f32[4,1,8]{2,1,0} slice(%bitcast.21), slice={[0:4], [0:1], [0:8]}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

%wrapped_copy_computation (param_0.49: f32[32,128]) -> f32[32,128] {
  %param_0.49 = f32[32,128]{0,1} parameter(0)
  ROOT %copy.11 = f32[32,128]{1,0} copy(%param_0.49), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
}

ENTRY %main.0_spmd (param: f32[8,128], param.2: f32[16,64], param.1: f32[4,64]) -> (f32[8,128], f32[16,64]) {
  %param = f32[8,128]{1,0} parameter(0), sharding={devices=[8,1]<=[8]}, metadata={op_name="w1"}
  %param.1 = f32[4,64]{1,0} parameter(2), sharding={devices=[8,1]<=[8]}, metadata={op_name="x"}
  %param.2 = f32[16,64]{1,0} parameter(1), sharding={devices=[8,1]<=[8]}, metadata={op_name="w2"}
  %partition-id.1 = u32[] partition-id(), metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %all-gather = f32[64,128]{1,0} all-gather(%param), channel_id=1, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.15 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.25, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.8 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.18, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.9 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.19, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.10 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.20, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.11 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.21, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.12 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.22, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.13 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.23, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %bitcast_slice_fusion.14 = f32[4,1,8]{2,1,0} fusion(%param.1), kind=kLoop, calls=%fused_computation.24, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %all-gather.1 = f32[128,64]{1,0} all-gather(%param.2), channel_id=2, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=5}
  %ynn_fusion.2 = f32[4,128]{1,0} fusion(%param.1, %all-gather), kind=kCustom, calls=%fused_computation.2, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=3}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %all-to-all.3 = (f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}, /*index=5*/f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}, f32[4,1,8]{2,1,0}) all-to-all(%bitcast_slice_fusion.15, %bitcast_slice_fusion.14, %bitcast_slice_fusion.13, %bitcast_slice_fusion.12, %bitcast_slice_fusion.11, /*index=5*/%bitcast_slice_fusion.10, %bitcast_slice_fusion.9, %bitcast_slice_fusion.8), channel_id=6, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %broadcast_maximum_fusion = f32[4,128]{1,0} fusion(%ynn_fusion.2), kind=kLoop, calls=%fused_computation.16, metadata={op_name="jit(step)/jvp()/max" stack_frame_id=4}
  %select_divide_fusion = f32[4,128]{1,0} fusion(%ynn_fusion.2), kind=kLoop, calls=%fused_computation.14, metadata={op_name="jit(step)/jvp()/div" stack_frame_id=4}
  %get-tuple-element.8 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=0
  %get-tuple-element.9 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=1
  %get-tuple-element.10 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=2
  %get-tuple-element.11 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=3
  %get-tuple-element.12 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=4
  %get-tuple-element.13 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=5
  %get-tuple-element.14 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=6
  %get-tuple-element.15 = f32[4,1,8]{2,1,0} get-tuple-element(%all-to-all.3), index=7
  %ynn_fusion.1 = f32[4,64]{1,0} fusion(%broadcast_maximum_fusion, %all-gather.1), kind=kCustom, calls=%fused_computation.1, metadata={op_name="jit(step)/jvp()/dot_general" stack_frame_id=5}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %bitcast_slice_fusion.7 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.13, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.6, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.1 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.7, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.2 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.8, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.3 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.9, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.4 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.10, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.5 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.11, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %bitcast_slice_fusion.6 = f32[4,1,16]{2,1,0} fusion(%select_divide_fusion), kind=kLoop, calls=%fused_computation.12, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %copy_bitcast_fusion = f32[32,8]{1,0} fusion(%get-tuple-element.8, %get-tuple-element.9, %get-tuple-element.10, %get-tuple-element.11, %get-tuple-element.12, /*index=5*/%get-tuple-element.13, %get-tuple-element.14, %get-tuple-element.15), kind=kLoop, calls=%fused_computation.17, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %broadcast_multiply_fusion = f32[4,64]{1,0} fusion(%ynn_fusion.1), kind=kLoop, calls=%fused_computation.15, metadata={op_name="jit(step)/transpose(jvp())/mul;jit(step)/transpose(jvp())/broadcast_in_dim"}
  %all-to-all.2 = (f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}, /*index=5*/f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}, f32[4,1,16]{2,1,0}) all-to-all(%bitcast_slice_fusion.7, %bitcast_slice_fusion.6, %bitcast_slice_fusion.5, %bitcast_slice_fusion.4, %bitcast_slice_fusion.3, /*index=5*/%bitcast_slice_fusion.2, %bitcast_slice_fusion.1, %bitcast_slice_fusion), channel_id=4, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %all-gather.2 = f32[32,64]{1,0} all-gather(%broadcast_multiply_fusion), channel_id=3, replica_groups=mesh['axis_0'=8,'axis_1'=1] {'axis_0'}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %dot.4 = f32[64,128]{1,0} dot(%broadcast_multiply_fusion, %broadcast_maximum_fusion), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %get-tuple-element = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=0
  %get-tuple-element.1 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=1
  %get-tuple-element.2 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=2
  %get-tuple-element.3 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=3
  %get-tuple-element.4 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=4
  %get-tuple-element.5 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=5
  %get-tuple-element.6 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=6
  %get-tuple-element.7 = f32[4,1,16]{2,1,0} get-tuple-element(%all-to-all.2), index=7
  %ynn_fusion = f32[32,16]{1,0} fusion(%all-gather.2, %param.2), kind=kCustom, calls=%fused_computation, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}, backend_config={"fusion_config":{"kind":"__ynn_fusion"},"outer_dimension_partitions":[]}
  %all-reduce = f32[64,128]{1,0} all-reduce(%dot.4), channel_id=7, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, use_global_device_ids=true, to_apply=%add.clone, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=5}
  %bitcast_multiply_fusion = f32[32,16]{0,1} fusion(%get-tuple-element, %get-tuple-element.1, %get-tuple-element.2, %get-tuple-element.3, %get-tuple-element.4, /*index=5*/%get-tuple-element.5, %get-tuple-element.6, %get-tuple-element.7, %ynn_fusion), kind=kLoop, calls=%fused_computation.5, metadata={op_name="jit(step)/transpose(jvp())/mul" stack_frame_id=4}
  %copy_subtract_fusion = f32[16,64]{1,0} fusion(%param.2, %all-reduce, %partition-id.1), kind=kLoop, calls=%fused_computation.3, metadata={op_name="jit(step)/sub" stack_frame_id=11}
  %all-gather.3 = f32[32,128]{0,1} all-gather(%bitcast_multiply_fusion), channel_id=5, replica_groups=mesh['axis_0'=1,'axis_1'=8] {'axis_1'}, dimensions={1}, use_global_device_ids=true, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %wrapped_copy = f32[32,128]{1,0} fusion(%all-gather.3), kind=kLoop, calls=%wrapped_copy_computation, metadata={op_name="jit(step)/transpose(jvp())/dot_general" stack_frame_id=3}
  %dot.5 = f32[8,128]{1,0} dot(%copy_bitcast_fusion, %wrapped_copy), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/transpose" stack_frame_id=3}
  %multiply_subtract_fusion = f32[8,128]{1,0} fusion(%param, %dot.5), kind=kLoop, calls=%fused_computation.4, metadata={op_name="jit(step)/sub" stack_frame_id=9}
  ROOT %tuple.2 = (f32[8,128]{1,0}, f32[16,64]{1,0}) tuple(%multiply_subtract_fusion, %copy_subtract_fusion)
}

"""  # noqa: E501


def test_fsdp_weight_gathers_are_labelled() -> None:
    report = describe(parse_module(FSDP_STEP_HLO))
    assert report.mesh.shape == {"axis0": 8}
    labels = {s.strategy: s for s in report.strategies}
    fsdp = labels["FSDP/ZeRO"]
    assert fsdp.axes == ["axis0"]
    # Both weights (parameters 0 and 1, ``w1`` and ``w2``) are gathered before their matmul.
    assert any("param all-gathered" in e for e in fsdp.evidence)
    assert any("param.2 all-gathered" in e for e in fsdp.evidence)
    assert labels["data parallel"].axes == ["axis0"]
    # The batch axis is not reported as a second, model-parallel axis.
    assert "tensor parallel (column split)" not in labels


def test_fsdp_global_shapes() -> None:
    report = describe(parse_module(FSDP_STEP_HLO))
    by_name = {m.name: m for m in report.matmuls}
    forward1 = by_name["ynn_fusion.2"]  # x @ w1: batch split 8 ways, w1 gathered in full
    assert forward1.local_lhs == [4, 64] and forward1.global_lhs == [32, 64]
    assert forward1.global_rhs == [64, 128] and forward1.global_out == [32, 128]
    assert forward1.fed_by[0]["from_parameter"] == "param"
    gradient = by_name["dot.4"]  # h^T @ dy: contracts the split batch, all-reduced
    assert gradient.global_out == [64, 128] and gradient.partial_sum_axes == ["axis0"]

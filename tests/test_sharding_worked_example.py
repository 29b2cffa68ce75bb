"""MODEL.md §5b step 2 / issue 5's worked example, on HLO written the way XLA prints it.

A fusion computing ``bf16[8192] x bf16[4096,8192] -> bf16[4096]`` followed by an all-reduce over
``{{0,16,32,48,64,80,96,112},…}`` (128 devices: 16 groups of 8, stride 16) is an 8-way
model-parallel matmul whose global shapes are ``[8,8192] x [32768,8192] -> [8,32768]``.

Where the numbers come from, in an SPMD-partitioned module: the entry parameters keep the
``sharding=`` of their *global* arrays while their shapes are per-device.  The weight's sharding
splits its 32768 rows 8 ways along the stride-16 axis (the all-reduce's axis) → 4096 local rows.
The activation is ``[8,8192]`` split 8 ways on its batch dim along a second axis, so each device
holds ``[1,8192]``, which a bitcast squeezes to the ``[8192]`` the fusion reads: the batch of 8
is the size-1 dim that disappeared.  128 = 8 (model, stride 16) × 8 (batch, stride 2) × 2
(replicas, stride 1).  None of this is special-cased: it is the same propagation the fixture
programs go through.
"""

from __future__ import annotations

from profan.hlo.parser import parse_module
from profan.sharding import describe, infer_mesh


def _groups_stride(num_devices: int, stride: int, size: int) -> str:
    groups = []
    for base in range(num_devices):
        if (base // stride) % size == 0:
            groups.append([base + k * stride for k in range(size)])
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def synthetic_model_parallel_matvec(with_shardings: bool = True, local_k: int = 8192) -> str:
    x_sharding = (
        ", sharding={devices=[8,1,16]<=[8,8,2]T(1,0,2) last_tile_dim_replicate}"
        if with_shardings
        else ""
    )
    w_sharding = (
        ", sharding={devices=[8,1,16]<=[128] last_tile_dim_replicate}" if with_shardings else ""
    )
    groups = _groups_stride(128, 16, 8)
    return f"""HloModule synthetic_model_parallel_matvec, entry_computation_layout={{(bf16[1,{local_k}]{{1,0}}, bf16[4096,{local_k}]{{1,0}})->bf16[4096]{{0}}}}, num_partitions=128

%add.clone (x.1: bf16[], y.1: bf16[]) -> bf16[] {{
  %x.1 = bf16[] parameter(0)
  %y.1 = bf16[] parameter(1)
  ROOT %add.1 = bf16[] add(%x.1, %y.1)
}}

%fused_computation (param_0: bf16[{local_k}], param_1: bf16[4096,{local_k}]) -> bf16[4096] {{
  %param_0 = bf16[{local_k}]{{0}} parameter(0)
  %param_1 = bf16[4096,{local_k}]{{1,0}} parameter(1)
  ROOT %dot.1 = bf16[4096]{{0}} dot(%param_0, %param_1), lhs_contracting_dims={{0}}, rhs_contracting_dims={{1}}, metadata={{op_name="jit(decode)/layer_0/mlp/dot_general" source_file="model.py" source_line=42}}
}}

ENTRY %main.3_spmd (param.1: bf16[1,{local_k}], param.2: bf16[4096,{local_k}]) -> bf16[4096] {{
  %param.1 = bf16[1,{local_k}]{{1,0}} parameter(0){x_sharding}, metadata={{op_name="x"}}
  %param.2 = bf16[4096,{local_k}]{{1,0}} parameter(1){w_sharding}, metadata={{op_name="w"}}
  %bitcast.2 = bf16[{local_k}]{{0}} bitcast(%param.1)
  %fusion.1 = bf16[4096]{{0}} fusion(%bitcast.2, %param.2), kind=kOutput, calls=%fused_computation, metadata={{op_name="jit(decode)/layer_0/mlp/dot_general"}}
  ROOT %all-reduce.1 = bf16[4096]{{0}} all-reduce(%fusion.1), channel_id=1, replica_groups={groups}, use_global_device_ids=true, to_apply=%add.clone
}}
"""  # noqa: E501


def test_worked_example_global_shapes() -> None:
    module = parse_module(synthetic_model_parallel_matvec())
    report = describe(module)
    (matmul,) = report.matmuls
    assert matmul.name == "fusion.1" and matmul.dot == "dot.1"
    assert (matmul.local_lhs, matmul.local_rhs, matmul.local_out) == ([8192], [4096, 8192], [4096])
    assert matmul.global_lhs == [8, 8192]
    assert matmul.global_rhs == [32768, 8192]
    assert matmul.global_out == [8, 32768]
    # 64 distinct shards of work (8 batch × 8 model); the 2 replicas duplicate.
    assert matmul.global_flops == 64 * matmul.local_flops


def test_worked_example_mesh_and_axes() -> None:
    module = parse_module(synthetic_model_parallel_matvec())
    mesh = infer_mesh(module)
    assert [(a.size, a.stride) for a in mesh.axes] == [(8, 16), (8, 2), (2, 1)]
    (collective,) = mesh.collectives
    assert collective.group_size == 8 and collective.num_groups == 16
    model_axis = mesh.axes[0].name
    assert collective.axes == [model_axis]
    report = describe(module)
    (matmul,) = report.matmuls
    assert matmul.rhs_split == {0: [model_axis]}  # the weight's rows: 8-way model parallel
    assert matmul.lhs_split == {0: [mesh.axes[1].name]}  # the batch of 8
    labels = {(s.strategy, tuple(s.axes)) for s in report.strategies}
    assert ("tensor parallel (column split)", (model_axis,)) in labels
    assert ("data parallel", (mesh.axes[1].name,)) in labels
    assert any("all-reduce" in e for e in matmul.evidence)


def test_without_annotations_the_all_reduce_means_a_split_contraction() -> None:
    """No sharding= anywhere: the only evidence is the all-reduce of the result, which sums
    partial products, so the contracted dim is split along its axis (Megatron row split)."""
    module = parse_module(synthetic_model_parallel_matvec(with_shardings=False, local_k=1024))
    report = describe(module)
    mesh = report.mesh
    assert [(a.size, a.stride) for a in mesh.axes] == [(8, 16), (16, 1)]
    (matmul,) = report.matmuls
    assert matmul.global_lhs == [8192] and matmul.global_rhs == [4096, 8192]
    assert matmul.global_out == [4096]
    assert matmul.partial_sum_axes == [mesh.axes[0].name]
    labels = {s.strategy for s in report.strategies}
    assert "tensor parallel (row split)" in labels

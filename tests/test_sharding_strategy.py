"""Strategy labels around all-to-alls: expert parallelism needs evidence of experts.

An all-to-all also reshards activations (FSDP's weight gradient, sequence parallelism, the
shard_map programs of the fixtures), so it alone is labelled resharding; "expert parallel
(possible)" needs expert weights split along its axes (a batched matmul whose weight's batch
dim is split there, outside attention) or an op name that says experts.
"""

from __future__ import annotations

import json

import pytest

from profan.hlo.parser import parse_module
from profan.sharding import ShardingReport, describe
from tests.conftest import FIXTURES_DIR

EXPERT = "expert parallel (possible)"
RESHARDING = "resharding (all-to-all)"


def _fixture(relative: str) -> ShardingReport:
    path = next((FIXTURES_DIR / relative / "hlo").glob("*after_optimizations.txt"))
    return describe(parse_module(path.read_text(), file=str(path)))


@pytest.mark.parametrize(
    "relative", ["fsdp", "collectives", "all_to_all/all_to_all_rows", "all_to_all/all_to_all_2d"]
)
def test_fixture_all_to_alls_are_resharding_not_experts(relative: str) -> None:
    """No fixture program has experts; each all-to-all is named, as resharding, on its axes."""
    report = _fixture(relative)
    labels = {(s.strategy, tuple(s.axes)): s.evidence for s in report.strategies}
    assert not any(strategy == EXPERT for strategy, _ in labels)
    all_to_alls = [c for c in report.collectives if c.kind == "all-to-all" and c.axes]
    assert all_to_alls
    for collective in all_to_alls:
        evidence = labels[(RESHARDING, tuple(collective.axes))]
        assert any(why.startswith(f"{collective.name}: all-to-all over") for why in evidence)


def _synthetic_moe(weight_sharding: str, op_name: str = "jit(f)/ffn/dot_general") -> str:
    """Four experts on four devices: tokens [experts=4, capacity=8, d=16] split by expert, an
    all-to-all over the four devices, then each device's tokens times the expert weights
    [experts=4, d=16, f=32] (batched over the expert dim), and an all-to-all back."""
    return f"""HloModule synthetic_moe, num_partitions=4

ENTRY %main (tokens: f32[1,8,16], experts: f32[1,16,32]) -> f32[1,8,32] {{
  %tokens = f32[1,8,16]{{2,1,0}} parameter(0), sharding={{devices=[4,1,1]<=[4]}}
  %experts = f32[1,16,32]{{2,1,0}} parameter(1), sharding={weight_sharding}
  %dispatch = f32[1,8,16]{{2,1,0}} all-to-all(%tokens), channel_id=1, replica_groups={{{{0,1,2,3}}}}, dimensions={{1}}, metadata={{op_name="{op_name}"}}
  %expert_out = f32[1,8,32]{{2,1,0}} dot(%dispatch, %experts), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}, metadata={{op_name="jit(f)/ffn/dot_general"}}
  ROOT %combine = f32[1,8,32]{{2,1,0}} all-to-all(%expert_out), channel_id=2, replica_groups={{{{0,1,2,3}}}}, dimensions={{1}}
}}
"""  # noqa: E501


def _labels(text: str) -> dict[str, list[str]]:
    report = describe(parse_module(text))
    json.dumps(report.to_dict())
    return {s.strategy: s.evidence for s in report.strategies if s.axes == ["axis0"]}


def test_synthetic_expert_weights_split_along_the_all_to_all_axis() -> None:
    """The weight [4,16,32] is split 4 ways on its expert (batch) dim along the all-to-all's
    axis: expert parallel, with the matmul as evidence."""
    labels = _labels(_synthetic_moe("{devices=[4,1,1]<=[4]}"))
    assert EXPERT in labels
    assert any(why.startswith("expert_out: the weight's batch dim 0 (experts)") for why in
               labels[EXPERT])  # fmt: skip
    assert RESHARDING not in labels


def test_synthetic_replicated_weights_are_not_experts() -> None:
    """The same program with the weight replicated: nothing says experts; the all-to-alls are
    resharding."""
    labels = _labels(_synthetic_moe("{replicated}"))
    assert EXPERT not in labels
    assert len(labels[RESHARDING]) == 2  # dispatch and combine


def test_synthetic_op_name_that_says_experts() -> None:
    """Replicated weights, but the program names the all-to-all after its MoE block."""
    labels = _labels(_synthetic_moe("{replicated}", op_name="jit(f)/moe_block/all_to_all"))
    assert EXPERT in labels
    assert any("its op name says experts" in why for why in labels[EXPERT])

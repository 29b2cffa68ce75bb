"""A real context-parallel module from XLA's benchmarks: Llama 3 8B, sequence split 4 ways.

``xla/tools/benchmarks/hlo/llama3_8b_cp_bf16_1x4`` is an SPMD-partitioned training step whose
parameters carry their global shardings: the sequence (8192) is split over 4 devices and the
weights are gathered before use.  Nothing about it is known to profan except the module text.
"""

from __future__ import annotations

import pytest

from profan.hlo.parser import parse_module
from profan.sharding import describe

FILE = "xla__tools__benchmarks__hlo__hlo_llama3_8b_cp_bf16_1x4.hlo"


@pytest.fixture(scope="module")
def report(corpus_dir):
    return describe(parse_module((corpus_dir / "hlo" / "xla" / FILE).read_text(), file=FILE))


@pytest.mark.corpus
def test_mesh_is_one_axis_of_four(report) -> None:
    assert report.mesh.shape == {"axis0": 4}
    assert all(c.axes == ["axis0"] for c in report.collectives)


@pytest.mark.corpus
def test_sequence_dim_recovered(report) -> None:
    # Activations [batch 2, seq 2048, …] per device are [2, 8192, …] globally.
    split_sequence = [
        m for m in report.matmuls if m.local_lhs[:2] == [2, 2048] and m.global_lhs[:2] == [2, 8192]
    ]
    assert split_sequence
    assert all(m.lhs_split.get(1) == ["axis0"] for m in split_sequence)


@pytest.mark.corpus
def test_labels(report) -> None:
    labels = {s.strategy: s for s in report.strategies}
    assert labels["sequence/context parallel"].axes == ["axis0"]
    assert labels["FSDP/ZeRO"].axes == ["axis0"]
    # The batch of 2 is not split: no data-parallel claim, and no tensor-parallel one.
    assert "data parallel" not in labels
    assert not any(name.startswith("tensor parallel") for name in labels)

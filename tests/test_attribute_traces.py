"""Every op event of the corpus traces gets a category; print the shares (by count and time)."""

from __future__ import annotations

from collections import Counter

import pytest

import profan
from profan.attribute import CATEGORIES, classify_ops


def _shares(profile) -> tuple[Counter[str], dict[str, float]]:
    labels = classify_ops(profile)
    assert len(labels) == len(profile.ops)
    counts: Counter[str] = Counter(label.category for label in labels)
    seconds: dict[str, float] = {}
    for label, duration in zip(labels, profile.ops["duration_s"], strict=True):
        assert label.category in CATEGORIES and label.reason
        seconds[label.category] = seconds.get(label.category, 0.0) + float(duration)
    total_n = sum(counts.values())
    total_s = sum(seconds.values()) or 1.0
    by_time = sorted(seconds.items(), key=lambda kv: -kv[1])
    print("\nby count:", {k: f"{v / total_n:.1%}" for k, v in counts.most_common()})
    print("by time: ", {k: f"{v / total_s:.1%}" for k, v in by_time})
    return counts, seconds


@pytest.mark.corpus
def test_tpu_trace_ops_all_categorised(corpus_dir, private_cache) -> None:
    profile = profan.load(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"))
    counts, _ = _shares(profile)
    # The program offloads arrays to host memory and all-reduces: both must be recognised.
    assert counts["host"] > 0 and counts["collective"] > 0
    assert counts["other"] < len(profile.ops)


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["mi300x_jax_conv.xplane.pb", "mi300x_jax_conv_legacy.xplane.pb"])
def test_mi300x_trace_ops_all_categorised(corpus_dir, private_cache, name) -> None:
    profile = profan.load(str(corpus_dir / "traces" / name))
    counts, _ = _shares(profile)
    # A 3-D convolution program: the convolutions must come out as matmul-class work.
    assert counts["matmul"] > 0

"""infer_mesh on every corpus module with collectives: axes for each, or a stated reason."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from profan.errors import ProfanError
from profan.hlo.parser import parse_module
from profan.sharding import describe, infer_mesh


@pytest.mark.slow
@pytest.mark.corpus
def test_every_collective_gets_axes_or_a_reason(corpus_dir) -> None:
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    fitted = unfitted = modules = 0
    reasons: Counter[str] = Counter()
    for row in rows:
        text = (root / row["file"]).read_text(errors="replace")
        if "replica_groups=" not in text and "source_target_pairs=" not in text:
            continue
        try:
            module = parse_module(text, file=row["file"])
        except ProfanError:
            continue
        modules += 1
        mesh = infer_mesh(module)
        assert all(axis.size > 1 for axis in mesh.axes)
        for collective in mesh.collectives:
            if collective.axes is None:
                unfitted += 1
                assert collective.reason, collective
                reasons[collective.reason.split(":")[0]] += 1
            else:
                fitted += 1
                # The axes' sizes multiply to the group size.
                if collective.kind != "collective-permute" and collective.group_size:
                    assert mesh.size_of(collective.axes) == collective.group_size, collective
    print(
        f"\ncorpus: {modules} modules, {fitted + unfitted} collectives with device groups: "
        f"{fitted} got mesh axes, {unfitted} did not ({dict(reasons)})"
    )
    assert modules > 500
    assert fitted / (fitted + unfitted) > 0.98


@pytest.mark.slow
@pytest.mark.corpus
def test_describe_and_classify_never_crash_on_the_corpus(corpus_dir) -> None:
    """Every corpus module with matmuls, shardings or collectives: a JSON-able report."""
    from profan.attribute import CATEGORIES, classify

    root = corpus_dir / "hlo" / "xla"
    markers = ("dot(", "convolution(", "sharding=", "replica_groups", "source_target_pairs")
    described = matmuls = 0
    for path in sorted(root.glob("*.hlo")):
        text = path.read_text(errors="replace")
        if not any(marker in text for marker in markers):
            continue
        try:
            module = parse_module(text, file=path.name)
        except ProfanError:
            continue
        report = describe(module)
        json.dumps(report.to_dict())
        described += 1
        for matmul in report.matmuls:
            matmuls += 1
            # Global shapes are never smaller than local ones, and FLOPs scale with them.
            local = matmul.local_out
            assert all(
                g >= n for g, n in zip(matmul.global_out[-len(local) :], local, strict=False)
            )
            assert matmul.global_flops >= matmul.local_flops
        for instruction in module.instructions():
            assert classify(instruction, module).category in CATEGORIES
    print(f"\ndescribed {described} corpus modules, {matmuls} matmuls")
    assert described > 1000

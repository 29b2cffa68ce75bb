"""infer_mesh on every corpus module with collectives: axes for each, or a stated reason."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from profan.errors import ProfanError
from profan.hlo.parser import parse_module
from profan.sharding import infer_mesh


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

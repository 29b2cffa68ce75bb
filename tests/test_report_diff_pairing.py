"""``profan diff`` and ``profan check``'s baseline pair the ops of two compilations of one
program: ops of one scope and kind carry an ordinal in program order (``profan.report.keys``)
that shifts when the compiler's fusion plan changes, so within such a group they are paired by
shape (and source line) before order.

The real case: the same train step compiled for an H100 and for an H200
(``fixtures/gpu_transformer`` and ``fixtures/gpu_transformer_h200``): XLA's fusion plans differ,
and the scanned layer's dynamic-update-slice fusions (one scope, one kind, several shapes) come
in another order.
"""

from __future__ import annotations

from functools import cache

from profan.report.analysis.pipeline import report_for
from profan.report.check.diff import op_changes
from profan.report.keys import pair_keys
from profan.report.model import Report
from tests.conftest import FIXTURES_DIR


@cache
def _reports() -> tuple[Report, Report]:
    return (
        report_for(FIXTURES_DIR / "gpu_transformer"),
        report_for(FIXTURES_DIR / "gpu_transformer_h200"),
    )


def _ordinal(op: object) -> int:
    key = op.key  # type: ignore[attr-defined]
    return int(key.rsplit("#", 1)[1]) if "#" in key else 0


def test_diff_pairs_each_op_with_one_of_its_shape() -> None:
    a, b = _reports()
    shape_a = {op.label: op.shape for op in a.ops}
    shape_b = {op.label: op.shape for op in b.ops}
    paired = [c for c in op_changes(a, b) if c.name_a and c.name_b]
    assert len(paired) >= 100
    assert [(c.name_a, c.name_b) for c in paired if shape_a[c.name_a] != shape_b[c.name_b]] == []
    # every op of either report appears once
    assert sorted(c.name_a for c in op_changes(a, b) if c.name_a) == sorted(shape_a)
    assert sorted(c.name_b for c in op_changes(a, b) if c.name_b) == sorted(shape_b)


def test_the_scanned_layers_update_fusions_pair_by_shape() -> None:
    """The group the ordinals paired wrongly: its ordinals now differ between the two reports,
    and yet each op finds the op of its shape."""
    a, b = _reports()
    stem = "fusion:loop_dynamic_update_slice_fusion"
    group_a = [op for op in a.ops if op.key.split("#")[0].endswith(stem)]
    group_b = [op for op in b.ops if op.key.split("#")[0].endswith(stem)]
    by_order = sorted(group_a, key=_ordinal), sorted(group_b, key=_ordinal)
    assert any(x.shape != y.shape for x, y in zip(*by_order, strict=False)), (
        "the ordinals line up here: this test no longer covers a shifted group"
    )
    shape_b = {op.label: op.shape for op in group_b}
    labels_a = {op.label for op in group_a}
    pairs = [c for c in op_changes(a, b) if c.name_a in labels_a and c.name_b]
    assert len(pairs) == min(len(group_a), len(group_b))
    assert all(shape_b[c.name_b] == next(o.shape for o in group_a if o.label == c.name_a)
               for c in pairs)  # fmt: skip


def test_pair_keys_synthetic_corner_cases() -> None:
    """Synthetic (shapes made up): unique keys pair with their own; a group pairs by shape and
    source, then by shape, then by order; what is left over has no partner."""
    a = {
        "m|s|add": ("f32[8]", "x.py:1"),
        "m|s|fusion:f": ("f32[4]", "x.py:2"),
        "m|s|fusion:f#1": ("f32[8]", "x.py:3"),
        "m|s|fusion:f#2": ("bf16[2]", "x.py:4"),
        "m|gone|mul": ("f32[1]", None),
    }
    b = {
        "m|s|add": ("f32[9]", "x.py:1"),  # its shape changed: still the same op
        "m|s|fusion:f": ("f32[8]", "x.py:30"),
        "m|s|fusion:f#1": ("f32[4]", "x.py:20"),
        "m|s|fusion:f#2": ("f32[4]", "x.py:2"),
        "m|new|sub": ("f32[1]", None),
    }
    pairs = set(pair_keys(a, b))
    assert ("m|s|add", "m|s|add") in pairs
    assert ("m|s|fusion:f", "m|s|fusion:f#2") in pairs  # shape and source
    assert ("m|s|fusion:f#1", "m|s|fusion:f") in pairs  # shape
    assert ("m|s|fusion:f#2", "m|s|fusion:f#1") in pairs  # order, of what is left
    assert ("m|gone|mul", None) in pairs and (None, "m|new|sub") in pairs
    assert len(pairs) == 6


def test_check_against_a_json_report_pairs_as_diff_does() -> None:
    """``profan check --baseline REPORT.json`` compares each op with the op ``profan diff`` pairs
    it with (``keys.pair_ops``), not with the op that happens to carry its key (it did)."""
    import dataclasses

    from profan.report.check.budget import Budget
    from profan.report.check.regressions import against
    from profan.report.keys import check_id, pair_ops

    a, b = _reports()
    stem = "fusion:loop_dynamic_update_slice_fusion"
    in_group = [op for op in b.ops if op.key.split("#")[0].endswith(stem)]
    # each op of the group 10x the time of the one before; its partner in the baseline the same
    # time as it: paired, nothing in the group grew; paired by key, some op grew 10x
    times = {op.key: 10.0**n for n, op in enumerate(in_group)}
    ops = [dataclasses.replace(op, measured_s=times.get(op.key, op.measured_s)) for op in b.ops]
    now = dataclasses.replace(b, ops=ops)
    pairs = [(op, before) for op, before in pair_ops(now.ops, a.ops) if op and before]
    partner_time = {before.key: times[op.key] for op, before in pairs if op.key in times}
    assert any(op.key != before.key for op, before in pairs if op.key in times), (
        "the ordinals line up here: this test no longer covers a shifted group"
    )
    baseline = dataclasses.replace(
        a,
        ops=[
            dataclasses.replace(op, measured_s=partner_time.get(op.key, op.measured_s))
            for op in a.ops
        ],
    )
    budget = Budget(op_min_time_share=0.0, op_time_tolerance=0.5)
    failed = {r.name for r in against(now, baseline, budget) if not r.passed}
    assert not {f"baseline.op:{check_id(op.key, op.name)}" for op in in_group} & failed

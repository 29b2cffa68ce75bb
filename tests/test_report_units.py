"""Pure pieces of the report: interval overlap, stable op keys, name wrapping, budget files,
JUnit XML and GitHub annotations."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from profan.errors import ConfigError
from profan.report import keys
from profan.report.analysis import timeline
from profan.report.check import budget, results
from profan.report.format import wrap_name


def test_union_and_overlap_small_case() -> None:
    u = timeline.union(np.array([0.0, 1.0, 5.0]), np.array([2.0, 3.0, 6.0]))
    assert list(u.starts) == [0.0, 5.0] and list(u.ends) == [3.0, 6.0]
    assert u.total == 4.0
    assert list(timeline.overlap(u, np.array([2.5, 3.0, -1.0]), np.array([5.5, 4.0, 10.0]))) == [
        1.0,
        0.0,
        4.0,
    ]
    assert [(g.start_s, g.duration_s) for g in timeline.gaps(u, 0)] == [(3.0, 2.0)]


@given(
    st.lists(st.tuples(st.integers(0, 200), st.integers(1, 30)), min_size=1, max_size=25),
    st.tuples(st.integers(0, 230), st.integers(0, 60)),
)
def test_overlap_matches_brute_force(
    intervals: list[tuple[int, int]], probe: tuple[int, int]
) -> None:
    starts = np.array([s for s, _ in intervals], dtype=float)
    ends = starts + np.array([d for _, d in intervals], dtype=float)
    covered = np.zeros(300, dtype=bool)
    for s, e in zip(starts.astype(int), ends.astype(int), strict=True):
        covered[s:e] = True
    u = timeline.union(starts, ends)
    assert u.total == covered.sum()
    a, b = probe[0], probe[0] + probe[1]
    assert timeline.overlap(u, np.array([a]), np.array([b]))[0] == covered[a:b].sum()


def test_keys_ignore_numeric_suffixes() -> None:
    assert keys.base_name("fusion.123") == "fusion"
    assert keys.base_name("jit_train_step(12345)") == "jit_train_step"
    assert keys.base_name("all-gather.7") == "all-gather"
    a = keys.assign_keys(
        [
            ("jit_f.1", "jit(f)/dot_general", "dot", "dot.5"),
            ("jit_f.1", "jit(f)/dot_general", "dot", "dot.9"),
        ]
    )
    b = keys.assign_keys(
        [
            ("jit_f.4", "jit(f)/dot_general", "dot", "dot.17"),
            ("jit_f.4", "jit(f)/dot_general", "dot", "dot.18"),
        ]
    )
    assert a == b == ["jit_f|jit(f)/dot_general|dot", "jit_f|jit(f)/dot_general|dot#1"]
    # without metadata the name stem stands in for the scope
    assert keys.assign_keys([("m", None, "fusion", "loop_add_fusion.3")]) == [
        "m|loop_add_fusion|fusion:loop_add_fusion"
    ]


def test_wrap_name_keeps_every_character() -> None:
    name = "dynamic-update-slice.loop_fusion.input_reduce_fusion.clone.1234"
    lines = wrap_name(name, 20)
    assert "".join(lines) == name
    assert all(len(line) <= 20 for line in lines)
    assert wrap_name("x" * 45, 20) == ["x" * 20, "x" * 20, "x" * 5]


def test_budget_file_parsed(tmp_path: Path) -> None:
    path = tmp_path / "profan.toml"
    path.write_text(
        "[budget]\nstep_time_s = 0.01\nmfu_min = 0.2\n"
        '[[budget.ops]]\nmatch = "*dot*"\nmax_time_s = 0.001\n'
        "[baseline]\nstep_time_tolerance = 0.05\nnew_collectives = false\n"
        "[rules]\nefficiency_below = 0.2\n"
    )
    b = budget.load_budget(path)
    assert b.step_time_s == 0.01 and b.mfu_min == 0.2
    assert b.ops[0].match == "*dot*" and b.ops[0].max_time_s == 0.001
    assert b.step_time_tolerance == 0.05 and b.new_collectives is False
    assert b.rules.efficiency_below == 0.2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[budget]\nstep_time = 1\n",
            "budget: unknown field 'step_time' (allowed: step_time_s, mfu_min, exposed_comm_s, "
            "exposed_comm_share, max_suspicious, ops",
        ),
        ("[budget]\nstep_time_s = 'fast'\n", "budget.step_time_s: must be a number, got a string"),
        ("[budget]\nstep_time_s = -1\n", "budget.step_time_s: must be a number >= 0"),
        (
            "[budget]\nmax_suspicious = 1.5\n",
            "budget.max_suspicious: must be a whole number, got a number",
        ),
        ("[budget\n", ": not valid TOML: Expected ']'"),
        ("[[budget.ops]]\nmax_time_s = 1\n", "budget.ops[0]: lacks the field 'match'"),
        (
            '[[budget.ops]]\nmatch = "a"\n[[budget.ops]]\nmatch = 3\n',
            "budget.ops[1].match: must be a string, got a whole number",
        ),
        ("[baseline]\nnew_collectives = 1\n", "baseline.new_collectives: must be true or false"),
        (
            "[baseline]\ntime_gate = 'on'\n",
            "baseline.time_gate: 'on' is not allowed (allowed: auto, true, false)",
        ),
        ("[rules]\nnope = 1\n", "rules: unknown field 'nope' (allowed: min_time_share,"),
        ("[rules]\ndisabled = 'idle-gaps'\n", "rules.disabled: must be a list, got a string"),
        ("[budgets]\n", ": unknown table 'budgets' (allowed: budget, baseline, rules, tool)"),
    ],
)
def test_bad_budget_files(tmp_path: Path, text: str, message: str) -> None:
    """Each message names the file, the key, and what the key allows."""
    path = tmp_path / "profan.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        budget.load_budget(path)
    assert str(error.value).startswith(f"{path}:")  # then ": " or the line:column of a syntax error
    assert message in str(error.value)


def test_budget_from_a_mapping_equals_the_file(tmp_path: Path) -> None:
    text = (
        '[budget]\nstep_time_s = 0.05\n[[budget.ops]]\nmatch = "*dot*"\nmin_efficiency = 0.3\n'
        "[baseline]\ntime_gate = false\ntime_noise_factor = 2\n[rules]\nefficiency-below = 0.2\n"
    )
    path = tmp_path / "profan.toml"
    path.write_text(text)
    mapping = {
        "budget": {"step_time_s": 0.05, "ops": [{"match": "*dot*", "min_efficiency": 0.3}]},
        "baseline": {"time_gate": False, "time_noise_factor": 2},
        "rules": {"efficiency-below": 0.2},
    }
    from_file = budget.load_budget(path)
    assert budget.budget_from_mapping(mapping, where="dict") == from_file
    assert from_file.time_gate is False and from_file.time_noise_factor == 2.0
    assert from_file.time_tolerance_min == 0.02  # default
    assert from_file.rules.efficiency_below == 0.2  # a-b spells a_b
    assert from_file.ops == (budget.OpBudget(match="*dot*", min_efficiency=0.3),)
    with pytest.raises(ConfigError, match=r"^dict: budget: unknown field 'mfu'"):
        budget.budget_from_mapping({"budget": {"mfu": 1}}, where="dict")


def test_missing_budget_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read the budget: No such file"):
        budget.load_budget(tmp_path / "nope.toml")


def test_junit_and_github_output() -> None:
    rows = [
        results.CheckResult("step_time", True, "fine"),
        results.CheckResult(
            "baseline.new_collective:x", False, "new all-gather, 5% slower", "model.py:42"
        ),
        results.CheckResult("mfu", False, "MFU 1%\nlow"),
    ]
    root = ET.fromstring(results.junit_xml(rows))
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    failures = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failures == ["baseline.new_collective:x", "mfu"]
    lines = results.github_annotations(rows).splitlines()
    assert lines[0] == (
        "::error file=model.py,line=42,title=baseline.new_collective%3Ax::"
        "new all-gather, 5% slower".replace("5% ", "5%25 ")
    )
    assert lines[1] == "::error title=mfu::MFU 1%25%0Alow"


def test_largest_gaps_are_the_largest() -> None:
    starts = np.array([0.0, 2.0, 10.0, 11.0, 30.0])
    u = timeline.union(starts, starts + 1.0)
    every = sorted((g.duration_s for g in timeline.gaps(u, 0)), reverse=True)
    top = [g.duration_s for g in timeline.gaps(u, 0, largest=2)]
    assert every == [18.0, 7.0, 1.0]  # [10,11) and [11,12) touch: no gap between them
    assert top == [18.0, 7.0]


def test_json_report_version_checked() -> None:
    from profan.report.model import Report

    with pytest.raises(ConfigError, match="schema_version 4 is not supported"):
        Report.from_dict({"schema_version": 4})
    with pytest.raises(ConfigError, match="no schema_version"):
        Report.from_dict({"ops": []})
    with pytest.raises(ConfigError, match="malformed"):
        Report.from_dict({"schema_version": 1, "ops": []})


def test_a_schema_1_report_still_reads_back(fixtures_dir: Path) -> None:
    """Baselines written by schema 1 (before steps[].measured_s and the time splits changed
    meaning, and before label/sources existed) still load: labels default to names."""
    from profan.report.analysis.build import build_report
    from profan.report.analysis.pipeline import analyse
    from profan.report.model import Report

    data = build_report(analyse(fixtures_dir / "matmul")).to_dict()
    data["schema_version"] = 1
    for op in data["ops"]:
        for name in ("label", "flops_source", "bytes_source", "peak", "note"):
            op.pop(name, None)
    old = Report.from_dict(data)
    assert old.schema_version == 1
    assert [op.label for op in old.ops] == [op["name"] for op in data["ops"]]
    assert old.to_dict()["schema_version"] == 1

"""Findings carry what fixing them would save, are listed by it, and stay silent under their
rules' floors (issue 28).  On the transformer fixture the exposed all-reduces lead and the 19
undonated parameters (256 B to 65 kB each, of a 64 GB device) are under the memory floor."""

from __future__ import annotations

from pathlib import Path

import pytest

from profan.hlo.parser import parse_module
from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.check.budget import Budget, evaluate
from profan.report.model import ChipSection, Device, OpEntry, Report, Summary
from profan.report.render import markdown, terminal
from profan.report.render.html.header import _cards
from profan.report.render.html.sections import findings_html
from profan.report.rules import catalogue as rules
from profan.report.rules.catalogue import OpContext
from profan.report.rules.config import RuleConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def transformer(fixtures_dir: Path) -> Report:
    return build_report(analyse(fixtures_dir / "transformer"))


def test_savings_come_from_the_ops_and_the_devices_time(transformer: Report) -> None:
    s = transformer.summary
    device_time = s.busy_span_s * s.device_count  # the share's denominator, from the summary
    by_key = {op.key: op for op in transformer.ops}
    exposed = [f for f in transformer.findings if f.rule == "exposed-collective"]
    far = [f for f in transformer.findings if f.rule == "far-from-roofline"]
    assert exposed and far
    for f in exposed:
        op = by_key[f.op]
        assert f.saving_s == pytest.approx(op.exposed_s)
        assert f.saving_share == pytest.approx(op.exposed_s / device_time)
    for f in far:
        op = by_key[f.op]
        assert f.saving_s == pytest.approx(op.measured_s - op.roofline_s)
    for f in transformer.findings:  # each says how its saving was estimated, or that it can't
        assert f.saving_from
        assert (f.saving_s is None) == (f.rule == "cost-unknown") or f.saving_bytes is not None


def test_findings_are_ranked_and_the_exposed_all_reduces_lead(transformer: Report) -> None:
    shares = [f.saving_share for f in transformer.findings if f.saving_share is not None]
    assert shares == sorted(shares, reverse=True)
    # the heaviest exposed collective, read off the op table, not off the findings
    worst = max(
        (op for op in transformer.ops if op.category == "collective"),
        key=lambda op: op.exposed_s or 0.0,
    )
    first = transformer.findings[0]
    assert first.rule == "exposed-collective" and first.op == worst.key
    # every list and the findings card lead with it
    text = terminal.render(transformer, width=200)
    section = text[text.index("Suspicious (") :].splitlines()
    assert section[1].strip().startswith(worst.label)
    assert "exposed-collective" in section[2]
    md = markdown.render(transformer)
    md_section = md[md.index("## Suspicious ops") :]
    assert md_section.index(f"`{worst.label}`") < md_section.index("**profile**")
    page = findings_html(transformer)
    assert page.index(worst.label) < page.index("<b>profile</b>")
    (card,) = [c for c in _cards(transformer) if "card-title'>findings<" in c]
    detail = card.split("card-detail'>")[1]
    assert detail.startswith("exposed-collective ×") and worst.label in detail


def test_no_finding_under_its_floor(transformer: Report) -> None:
    config = RuleConfig()
    for f in transformer.findings:
        if f.saving_share is not None:
            assert f.saving_share >= config.min_saving_share, f
        if f.saving_bytes is not None and f.rule != "near-capacity":
            assert f.saving_bytes >= config.min_saving_bytes, f
    # the undonated parameters, from the memory section: every one is under 1 MiB ...
    undonated = [item for entry in transformer.memory for item in entry.undonated]
    assert len(undonated) == 19
    assert all(item.size_bytes < config.min_saving_bytes for item in undonated)
    assert not [f for f in transformer.findings if f.rule == "undonated-input"]
    # ... and max_suspicious counts only what is reported
    count = len(transformer.findings)
    (result,) = evaluate(transformer, Budget(max_suspicious=count))
    assert result.passed and f"{count} suspicious" in result.message


def test_lowered_floors_bring_the_small_savings_back(fixtures_dir: Path) -> None:
    lowered = RuleConfig(min_saving_bytes=0, min_saving_memory_share=0, min_saving_share=0)
    report = build_report(analyse(fixtures_dir / "transformer"), lowered)
    found = [f for f in report.findings if f.rule == "undonated-input"]
    assert len(found) == 19
    capacity = report.chip.hbm_capacity_bytes
    for f in found:
        assert f.saving_memory_share == pytest.approx(f.saving_bytes / capacity)
    # ranked after every time saving
    kinds = ["time" if f.saving_share is not None else "other" for f in report.findings]
    assert kinds == sorted(kinds, key=lambda k: k != "time")


def _unknown(instruction, module, opcode: str) -> OpContext:
    entry = OpEntry(
        key=f"m|{instruction.name}",
        module="m",
        name=instruction.name,
        opcode=opcode,
        category="other",
        occurrences=1,
        measured_s=1.0,
        flops=0.0,
        hbm_bytes=0.0,
        ici_bytes=0.0,
        t_compute_s=0.0,
        t_hbm_s=0.0,
        t_ici_s=0.0,
        roofline_s=0.0,
        bound_by="unknown",
        efficiency=None,
        flops_source="unknown",
        bytes_source="unknown",
    )
    return OpContext(entry, instruction, module)


def _empty_report() -> Report:
    return Report(
        device=Device(kind="GPU"), chip=ChipSection(), steps=[], summary=Summary(), ops=[]
    )


def test_cost_unknown_advice_is_shaped_to_the_op(fixtures_dir: Path) -> None:
    path = next(
        (fixtures_dir / "gpu_kernels/hlo").glob("*jit_attention_cudnn*after_optimizations.txt")
    )
    module = parse_module(path.read_text(), file=str(path))
    instructions = list(module.instructions())
    call = next(i for i in instructions if i.opcode == "custom-call")
    gte = next(i for i in instructions if i.opcode == "get-tuple-element")
    fusion = next(i for i in instructions if i.opcode == "fusion")
    ops = [_unknown(call, module, "custom-call"), _unknown(gte, module, "get-tuple-element"),
           _unknown(fusion, module, "fusion")]  # fmt: skip
    found = {f.name: f for f in rules.cost_unknown(_empty_report(), ops, RuleConfig())}
    assert "targets = [" in found[call.name].look_at and "--kernels" in found[call.name].look_at
    for name in (gte.name, fusion.name):
        assert "targets = [" not in found[name].look_at and "model =" not in found[name].look_at
        assert "report it" in found[name].look_at
    assert "get-tuple-element" in found[gte.name].look_at
    assert "fused computation" in found[fusion.name].look_at

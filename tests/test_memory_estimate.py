"""The static estimate from HLO text (``profan memory DUMP.txt``) against XLA's memory analysis.

Arguments, outputs and donation must equal the compiler's totals on every fixture dump (CPU
programs, the compiled-only groups, the GPU programs); temporaries are an estimate, compared
with XLA's figure in docs/memory.md.  Also the heap-simulator replay on hand-made logs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from profan.hlo import parse_file
from profan.hlo.parser import parse_module
from profan.memory.estimate import ESTIMATE_NOTE, allocation_bytes, estimate
from profan.memory.heap import ALLOC, FREE, SHARE_WITH, HeapEvent, replay
from tests.conftest import FIXTURES_DIR
from tests.test_hlo_verify import VERIFIER_REJECTS


def _dumps() -> list[tuple[str, Path, dict[str, Any]]]:
    """(label, HLO dump, XLA's memory analysis) of every fixture program that has both."""
    cases = []
    for meta_path in sorted(FIXTURES_DIR.glob("*/meta.json")):
        folder = meta_path.parent
        meta = json.loads(meta_path.read_text())
        oracle = folder / "memory_analysis.json"
        if oracle.exists():
            cases.append(
                (folder.name, folder / meta["hlo_files"][0]["file"], json.loads(oracle.read_text()))
            )
        for program in meta.get("programs", []):
            if program.get("memory_analysis") and program.get("hlo_files"):
                dump = folder / program["hlo_files"][0]
                cases.append((f"{folder.name}/{program['name']}", dump, program["memory_analysis"]))
    for group in ("xla_programs", "all_to_all"):
        for name, oracle in json.loads(
            (FIXTURES_DIR / group / "memory_analysis.json").read_text()
        ).items():
            meta = json.loads((FIXTURES_DIR / group / name / "meta.json").read_text())
            cases.append(
                (
                    f"{group}/{name}",
                    FIXTURES_DIR / group / name / meta["hlo_files"][0]["file"],
                    oracle,
                )
            )
    return cases


CASES = _dumps()


def test_every_fixture_program_is_covered() -> None:
    # 7 traced CPU programs + 16 xla_programs + 2 all_to_all + 19 GPU programs on each of the
    # H100 and the H200 + the 7 CPU programs of state_steps.
    assert len(CASES) == 7 + 16 + 2 + 2 * 19 + 7


@pytest.mark.parametrize(("label", "dump", "oracle"), CASES, ids=[c[0] for c in CASES])
def test_estimate_arguments_outputs_and_donation_are_exact(
    label: str, dump: Path, oracle: dict[str, Any]
) -> None:
    memory = estimate(parse_file(dump))
    assert memory.source == "estimate" and ESTIMATE_NOTE in memory.notes
    assert memory.argument_bytes == oracle["argument_size_in_bytes"]
    assert memory.output_bytes == oracle["output_size_in_bytes"]
    assert memory.alias_bytes == oracle["alias_size_in_bytes"]
    assert memory.temp_bytes >= 0
    # What the estimate lists at its peak adds up to its peak.
    listed = sum(b.size_bytes for b in memory.live_at_peak)
    nested = memory.peak_bytes - listed
    assert nested >= 0
    assert nested == 0 or any("called computations" in n for n in memory.notes)


def test_estimate_within_a_factor_of_two_of_xla_temporaries_on_the_big_programs() -> None:
    """Not a promise (the estimate ignores sharing and fragmentation), but a regression net: on
    the programs with over 1 MB of temporaries the estimate stays within 0.5x-2x of XLA's."""
    checked = 0
    for label, dump, oracle in CASES:
        if oracle["temp_size_in_bytes"] < 1 << 20:
            continue
        ratio = estimate(parse_file(dump)).temp_bytes / oracle["temp_size_in_bytes"]
        assert 0.5 <= ratio <= 2.0, (label, ratio)
        checked += 1
    assert checked >= 10


def test_synthetic_estimate_by_hand() -> None:
    """A hand-written scheduled module: p0 f32[256] (1 KiB) donated to output 0; a = p0 + p0
    (1 KiB temporary), b = a * a (1 KiB, output 1) ; the root tuple's index table is 16 bytes."""
    module = parse_module(
        "HloModule synthetic, is_scheduled=true, "
        "input_output_alias={ {0}: (0, {}, may-alias) }\n\n"
        "ENTRY %main (p0: f32[256]) -> (f32[256], f32[256]) {\n"
        "  %p0 = f32[256]{0} parameter(0)\n"
        "  %a = f32[256]{0} add(f32[256]{0} %p0, f32[256]{0} %p0)\n"
        "  %b = f32[256]{0} multiply(f32[256]{0} %a, f32[256]{0} %a)\n"
        "  %c = f32[256]{0} add(f32[256]{0} %p0, f32[256]{0} %b)\n"
        "  ROOT %t = (f32[256]{0}, f32[256]{0}) tuple(f32[256]{0} %c, f32[256]{0} %b)\n"
        "}\n"
    )
    memory = estimate(module)
    assert memory.argument_bytes == 1024
    assert memory.alias_bytes == 1024
    assert memory.output_bytes == 1024 + 1024 + 16  # c, b and the tuple's two pointers
    assert memory.temp_bytes == 1024  # only a: b and c reach the root
    assert memory.peak_instruction == "a"
    assert memory.peak_bytes == 1024 + (1024 + 1024 + 16) - 1024 + 1024


def test_synthetic_unscheduled_module_says_so() -> None:
    module = parse_module(
        "HloModule u\n\nENTRY %e (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4] parameter(0)\n}\n"
    )
    memory = estimate(module)
    assert any("not scheduled" in note for note in memory.notes)
    assert memory.argument_bytes == memory.output_bytes == 16


def test_allocation_bytes_counts_tuple_index_tables() -> None:
    module = parse_module(
        "HloModule t, is_scheduled=true\n\nENTRY %e (p: (f32[2], (s8[3], pred[])) ) -> f32[2] {\n"
        "  %p = (f32[2], (s8[3], pred[])) parameter(0)\n"
        "  ROOT %g = f32[2] get-tuple-element(%p), index=0\n}\n"
    )
    shape = module.entry.params[0].shape
    # outer table 2x8 + f32[2] 8 + inner table 2x8 + s8[3] 3 + pred[] 1
    assert allocation_bytes(shape) == 16 + 8 + 16 + 3 + 1


def test_synthetic_heap_replay_by_hand() -> None:
    """a (100 B) placed, b (50 B) placed, a freed, c placed in b's memory (SHARE_WITH), b freed
    (c keeps the memory alive), d (70 B) placed, c freed, d freed.
    Heap after each event: 100, 150, 50, 50, 50, 120, 70, 0; peak 150 at event 1 with a and b."""
    sizes = {1: 100, 2: 50, 3: 50, 4: 70}
    events = [
        HeapEvent(ALLOC, 1, "main", "a"),
        HeapEvent(ALLOC, 2, "main", "b"),
        HeapEvent(FREE, 1, "main", "a"),
        HeapEvent(SHARE_WITH, 3, "main", "c", canonical_id=2),
        HeapEvent(FREE, 2, "main", "b"),
        HeapEvent(ALLOC, 4, "main", "d"),
        HeapEvent(FREE, 3, "main", "c"),
        HeapEvent(FREE, 4, "main", "d"),
    ]
    result = replay(events, sizes)
    assert result.heap_after == [100, 150, 50, 50, 50, 120, 70, 0]
    assert (result.peak_bytes, result.peak_position, result.live_at_peak) == (150, 1, [1, 2])
    assert not result.problems


def test_synthetic_heap_replay_reports_bad_logs() -> None:
    result = replay([HeapEvent(FREE, 1, "m", "x"), HeapEvent(ALLOC, 9, "m", "y")], {1: 8})
    assert result.peak_bytes == 0
    assert len(result.problems) == 2  # freed before placed, unknown buffer


@pytest.mark.corpus
def test_estimate_on_every_corpus_module_xla_accepts(corpus_dir: Path) -> None:
    """4,457 modules from XLA's tests and benchmarks (most unscheduled, some with shapes left
    out; less the 3 XLA's shape inference refuses, which profan refuses too): the estimate
    never fails, never goes negative, and what it lists at the peak adds up to the peak (less
    only the temporaries of called computations, which it says)."""
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    checked = 0
    for row in rows:
        if not row.get("xla_parses") or row["file"] in VERIFIER_REJECTS:
            continue  # (VERIFIER_REJECTS: XLA's shape inference refuses them, as profan does)
        memory = estimate(parse_file(root / row["file"]))
        assert min(memory.argument_bytes, memory.output_bytes, memory.temp_bytes) >= 0
        listed = sum(b.size_bytes for b in memory.live_at_peak)
        assert listed <= memory.peak_bytes, row["file"]
        if listed < memory.peak_bytes:
            assert any("called computations" in n for n in memory.notes), row["file"]
        checked += 1
    assert checked == 4457 - len(VERIFIER_REJECTS)

"""Loops in compile-time scoring: every corpus while loop runs its body as often as XLA recorded
(its ``known_trip_count``, JSON quoted or bare), its condition once more."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from profan.hlo.model import Instruction
from profan.hlo.parser import parse_module
from profan.hlo.views import called_computations
from profan.roofline import score_module
from tests.test_hlo_verify import VERIFIER_REJECTS


def _recorded_trip_count(instruction: Instruction) -> int | None:
    """``known_trip_count.n`` read with Python's own string-literal and JSON readers."""
    text = instruction.attributes.get("backend_config")
    if not text:
        return None
    if text.startswith('"'):
        text = ast.literal_eval(text)
    try:
        return int(json.loads(text)["known_trip_count"]["n"])
    except (ValueError, KeyError, TypeError):
        return None


def _corpus_modules(corpus_dir: Path) -> list[Path]:
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    # (but the few XLA's shape inference refuses, as profan's verifier does: VERIFIER_REJECTS)
    return [
        root / row["file"]
        for row in rows
        if row.get("xla_parses") and row["file"] not in VERIFIER_REJECTS
    ]


def test_every_corpus_loop_body_runs_its_recorded_trip_count(corpus_dir: Path) -> None:
    """Ops of an entry-level loop's body run trip-count times per program run, its condition's
    once more (the last test fails); a loop without a recorded count is counted once, inexact."""
    loops = counted = 0
    for path in _corpus_modules(corpus_dir):
        text = path.read_text()
        if " while(" not in text:
            continue
        module = parse_module(text, file=str(path))
        callers: dict[str, int] = {}
        for instruction in module.instructions():
            for name in called_computations(instruction):
                callers[name] = callers.get(name, 0) + 1
        table = None
        for instruction in module.entry.instructions:
            if instruction.opcode != "while":
                continue
            body = instruction.attributes["body"].lstrip("%")
            condition = instruction.attributes["condition"].lstrip("%")
            if callers[body] > 1 or callers[condition] > 1 or body == condition:
                continue  # shared computations add up the counts of all their callers
            loops += 1
            table = score_module(module, "h100") if table is None else table
            trips = _recorded_trip_count(instruction)
            counted += trips is not None
            for name, expected in ((body, trips or 1), (condition, (trips or 0) + 1)):
                rows = [op for op in table if op.computation == name]
                assert {op.occurrences for op in rows} <= {expected}, f"{path.name}: {name}"
                assert {op.occurrences_exact for op in rows} <= {trips is not None}, path.name
    assert loops > 300 and counted > 20


def test_quoted_backend_config_trip_count_multiplies_the_body(corpus_dir: Path) -> None:
    # XLA's collective pipeliner test prints the config as a quoted string: 25 iterations.
    path = corpus_dir / "hlo" / "xla" / "xla__service__collective_pipeliner_test__39.hlo"
    module = parse_module(path.read_text(), file=str(path))
    (loop,) = [i for i in module.instructions() if i.opcode == "while"]
    assert loop.attributes["backend_config"].startswith('"')
    assert _recorded_trip_count(loop) == 25
    table = score_module(module, "h100")
    body = loop.attributes["body"].lstrip("%")
    in_body = [op for op in table if op.computation == body]
    assert len(in_body) > 0 and {op.occurrences for op in in_body} == {25}

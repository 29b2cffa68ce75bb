"""Shared test fixtures: where the repository, its fixtures and the external corpus live, and a
private cache directory for every test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_ROOT / "fixtures"
# External material lives beside the checkout (../shared/corpus), never inside it.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"
# The GPU groups were recorded on an H100 (fixtures/<group>) and the same programs again on an
# H200 (fixtures/<group>_h200): the folder's suffix -> the chip (fixtures/README.md, GPU groups).
GPU_CHIPS = {"": "h100", "_h200": "h200"}


def gpu_fixtures(group: str) -> list[str]:
    """The folders of one GPU group (``gpu_kernels``, ``gpu_transformer``, …), one per chip."""
    return [group + suffix for suffix in GPU_CHIPS]


def gpu_chip(folder: str) -> str:
    """The chip a GPU fixture folder was recorded on."""
    for suffix, chip in GPU_CHIPS.items():
        if suffix and folder.endswith(suffix):
            return chip
    return GPU_CHIPS[""]


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """profan's caches (parsed HLO, converted HloProtos) go to one temporary directory for the
    whole session, never into the user's cache; subprocesses inherit it through the
    environment.  Session-scoped so module- and session-scoped fixtures that load traces are
    covered too.  A test that needs a cache of its own sets ``PROFAN_CACHE_DIR`` again."""
    cache = tmp_path_factory.mktemp("profan-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROFAN_CACHE_DIR", str(cache))
        yield cache


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that reads the external corpus carries the ``corpus`` mark (so ``-m "not
    corpus"`` runs exactly the tests that need nothing outside the repository)."""
    for item in items:
        if "corpus_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES_DIR


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS_DIR.is_dir():
        pytest.skip(f"external corpus not found at {CORPUS_DIR} (conformance tests need it)")
    return CORPUS_DIR


@dataclass
class HloCorpusOutcome:
    """One module of the HLO corpus (``hlo/xla``): its MANIFEST row and what ``parse_module``
    made of it (the module, or the error it raised)."""

    row: dict
    module: Any = None
    error: Exception | None = None


@pytest.fixture(scope="session")
def hlo_corpus_outcomes(corpus_dir: Path) -> list[HloCorpusOutcome]:
    """Every corpus module parsed once per session (about 10 s): the conformance and the
    verifier tests read the same outcomes."""
    import json

    from profan.hlo import parse_module

    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    found: list[HloCorpusOutcome] = []
    for row in rows:
        text = (root / row["file"]).read_text(encoding="utf-8", errors="replace")
        try:
            found.append(HloCorpusOutcome(row, module=parse_module(text, file=row["file"])))
        except Exception as error:
            found.append(HloCorpusOutcome(row, error=error))
    return found

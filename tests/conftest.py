"""Shared test fixtures: where the repository, its fixtures and the external corpus live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES_DIR = REPO_ROOT / "fixtures"
# External material lives beside the checkout (../shared/corpus), never inside it.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"


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

"""The module caches are reused for unchanged input and never outlive a change to profan's code."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import profan
import profan.cache
from profan.hlo.model import Module


def _trace(fixtures_dir: Path) -> Path:
    return fixtures_dir / "matmul" / "trace"


def test_converted_hloprotos_are_cached_and_keyed_by_code(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(tmp_path))
    fresh = profan.load(str(_trace(fixtures_dir)))
    entries = sorted((tmp_path / "hloproto").glob("*.pickle"))
    assert entries, "loading a trace with embedded HloProtos should fill the cache"

    # Plant a recognisable module in every entry: a second load must serve it from the cache...
    for entry in entries:
        entry.write_bytes(pickle.dumps(Module(name="planted")))
    cached = profan.load(str(_trace(fixtures_dir)))
    assert {m.name for m in cached.modules.values()} == {"planted"}

    # ...but once profan's model/converter code differs, the entries must not be used.
    monkeypatch.setattr(profan.cache, "_CODE_HASH", "another-build-of-profan")
    rebuilt = profan.load(str(_trace(fixtures_dir)))
    assert {m.name for m in rebuilt.modules.values()} == {m.name for m in fresh.modules.values()}
    assert "planted" not in {m.name for m in rebuilt.modules.values()}


def test_parse_cache_key_changes_with_code(monkeypatch: pytest.MonkeyPatch) -> None:
    key = profan.cache.cache_key(b"HloModule m")
    monkeypatch.setattr(profan.cache, "_CODE_HASH", "another-build-of-profan")
    assert profan.cache.cache_key(b"HloModule m") != key

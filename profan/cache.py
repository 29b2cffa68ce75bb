"""Cache of built HLO modules, so a repeated load of unchanged input is near-instant.

Entries live under ``profan.paths.cache_dir(kind)`` (never beside the input): ``hlo`` for parsed
text, ``hloproto`` for HloProtos converted from traces.  Each is keyed by the input's content hash,
profan's version and a hash of the grammar and of the code that defines and builds the model, and
holds a pickled ``Module``.  A damaged or unreadable entry is only a cache miss.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable
from pathlib import Path

from profan.errors import HloSyntaxError
from profan.hlo.model import Module
from profan.version import __version__

_PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


_CODE_HASH: str | None = None


def _code_hash() -> str:
    """Grammar hash plus a hash of the code that builds and defines the model, so a cached
    module never outlives a change to either (even within one profan version)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        from profan.hlo.parser import grammar_hash

        digest = hashlib.sha256(grammar_hash().encode())
        package = Path(__file__).parent
        sources = [
            *sorted(package.joinpath("hlo").glob("*.py")),
            package / "trace" / "hloproto.py",
            package / "trace" / "hloattrs.py",  # the attribute texts hloproto builds with
        ]
        for source in sources:
            digest.update(source.read_bytes())
        _CODE_HASH = digest.hexdigest()[:16]
    return _CODE_HASH


def cache_key(data: bytes) -> str:
    """Content hash + profan version + grammar/code hash: any change gives a new key."""
    digest = hashlib.sha256(data).hexdigest()[:32]
    return f"{digest}-{__version__}-{_code_hash()}"


def _read_text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise HloSyntaxError(
            f"not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})",
            file=str(path),
            line=line,
        ) from None


def cached_module(kind: str, data: bytes, build: Callable[[], Module]) -> Module:
    """The module ``build()`` makes from ``data``, reused from the ``kind`` cache when present."""
    from profan.paths import cache_dir

    try:
        entry = cache_dir(kind) / f"{cache_key(data)}.pickle"
    except OSError:  # no writable cache directory: build without one
        return build()
    try:
        with entry.open("rb") as handle:
            module = pickle.load(handle)
        if isinstance(module, Module):
            return module
    except FileNotFoundError:
        pass
    except Exception:  # a damaged cache entry is only a cache miss
        pass
    module = build()
    _write_atomically(entry, module)
    return module


def cached_parse_file(path: str | os.PathLike[str], *, use_cache: bool = True) -> Module:
    """Parse ``path``; reuse the pickled model when the same text was parsed before."""
    from profan.hlo.parser import parse_module

    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as error:
        raise HloSyntaxError(f"cannot read the file: {error.strerror}", file=str(file)) from None

    def build() -> Module:
        return parse_module(_read_text(file, data), file=str(file))

    return cached_module("hlo", data, build) if use_cache else build()


def _write_atomically(entry: Path, module: Module) -> None:
    try:
        handle, temporary = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as stream:
            pickle.dump(module, stream, protocol=_PICKLE_PROTOCOL)
        os.replace(temporary, entry)
    except OSError:
        pass  # a read-only cache only costs speed

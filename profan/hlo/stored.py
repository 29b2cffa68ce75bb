"""Cache of built HLO modules, so a repeated load of unchanged input skips the parse.

Entries live in the store (``profan.cache.store``) under ``hlo`` (parsed text) and ``hloproto``
(HloProtos converted from traces).  Each holds the ``Module`` as msgpack, field by field, read
back by ``msgspec`` into the model's own dataclasses (types checked; memoised views are left
out and rebuilt on use): data, never code.  The key is the input's content hash, profan's
version and a hash of the grammar and of the code that defines and builds the model
(``profan/hlo``, this codec among them; the HloProto converter), narrower than the whole
package on purpose: a change elsewhere in profan does not re-parse 50,000-line modules.  A
damaged, foreign or undecodable entry is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from profan.cache.keys import digest, sources_digest
from profan.cache.store import read_entry, write_entry
from profan.errors import HloSyntaxError
from profan.hlo.model import Module
from profan.paths import PACKAGE_DIR, grammar_path
from profan.version import __version__

_MODULE_DECODER = msgspec.msgpack.Decoder(Module)

_CODE_HASH: str | None = None


def _code_hash() -> str:
    """A hash of the grammar and of the code that builds and defines the model
    (``profan.cache.keys.sources_digest``), so a cached module never outlives a change to
    either (even within one profan version)."""
    global _CODE_HASH
    if _CODE_HASH is None:
        code = [
            *sorted(PACKAGE_DIR.joinpath("hlo").rglob("*.py")),
            PACKAGE_DIR / "trace" / "hloproto.py",
            PACKAGE_DIR / "trace" / "hloattrs.py",  # the attribute texts hloproto builds with
        ]
        grammars = sorted(grammar_path("hlo.lark").parent.glob("*.lark"))
        named = [(path.relative_to(PACKAGE_DIR).as_posix(), path) for path in code]
        _CODE_HASH = sources_digest("hlo-code", named + [(path.name, path) for path in grammars])
    return _CODE_HASH


def cache_key(data: bytes) -> str:
    """Content hash + profan version + grammar/code hash: any change gives a new key."""
    content = hashlib.sha256(data).hexdigest()[:32]
    return digest(["module", __version__, _code_hash(), content])


def encode_module(module: Module) -> bytes:
    """A module as msgpack (what ``decode_module`` reads back)."""
    return bytes(encoded_module(module))


# The modules encoded last, by identity, with their msgpack: a module built on a cold read is
# written twice, to the module cache and inside the loaded profile, and encoded once (~50 ms on
# the benchmark's 3,000-instruction module).  Modules are not changed once built.
_ENCODED: list[tuple[Module, msgspec.Raw]] = []
_ENCODED_KEPT = 8


def encoded_module(module: Module) -> msgspec.Raw:
    """``module`` as msgpack, ready to be embedded in an entry's meta: by msgspec itself (10x
    faster) while no memo is set, as when the module was just built, else by ``module_fields``
    (memos are left out: a name index would write its computations twice)."""
    for known, raw in _ENCODED:
        if known is module:
            return raw
    if not module.has_memos():  # msgspec writes the memo fields too, at their defaults
        raw = msgspec.Raw(_MODULE_ENCODER.encode(module))
    else:
        raw = msgspec.Raw(msgspec.msgpack.encode(module_fields(module)))
    _ENCODED.insert(0, (module, raw))
    del _ENCODED[_ENCODED_KEPT:]
    return raw


_MODULE_ENCODER = msgspec.msgpack.Encoder()


def module_fields(module: Module) -> dict[str, Any]:
    """The module as plain dicts, lists and scalars: every dataclass by its public fields.  The
    private ones are memos (a name index, decoded metadata and backend configs) that the model
    rebuilds on use; msgspec would write them too, and the index twice over."""
    frozen: dict[int, Any] = {}  # shapes and layouts are shared between instructions

    def plain(value: Any) -> Any:
        names = _PUBLIC_FIELDS.get(type(value))
        if names is None:
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                names = _public_fields(type(value))
            elif isinstance(value, list | tuple):
                return [plain(item) for item in value]
            elif isinstance(value, dict):
                return {key: plain(item) for key, item in value.items()}
            else:
                return value
        if names[0]:  # frozen: convert each distinct object once
            found = frozen.get(id(value))
            if found is None:
                found = frozen[id(value)] = {n: plain(getattr(value, n)) for n in names[1]}
            return found
        return {name: plain(getattr(value, name)) for name in names[1]}

    fields: dict[str, Any] = plain(module)
    return fields


_PUBLIC_FIELDS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _public_fields(cls: type) -> tuple[bool, tuple[str, ...]]:
    names = tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
    found = _PUBLIC_FIELDS[cls] = (cls.__dataclass_params__.frozen, names)  # type: ignore[attr-defined]
    return found


def decode_module(data: bytes | memoryview | msgspec.Raw) -> Module:
    """A module from ``encode_module``'s bytes (``msgspec.DecodeError`` when they are not)."""
    return _MODULE_DECODER.decode(data)


def cached_module(kind: str, data: bytes, build: Callable[[], Module]) -> Module:
    """The module ``build()`` makes from ``data``, reused from the ``kind`` cache when present."""
    key = cache_key(data)
    found = read_entry(kind, key)
    if found is not None:
        try:
            return decode_module(found[0])
        except (msgspec.DecodeError, ValueError, TypeError):
            pass  # a damaged or foreign entry is only a miss
    module = build()
    write_entry(kind, key, encoded_module(module))
    return module


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


def cached_parse_file(path: str | os.PathLike[str], *, use_cache: bool = True) -> Module:
    """Parse ``path``; reuse the stored model when the same text was parsed before."""
    from profan.hlo.parser import parse_module

    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as error:
        raise HloSyntaxError(f"cannot read the file: {error.strerror}", file=str(file)) from None

    def build() -> Module:
        return parse_module(_read_text(file, data), file=str(file))

    return cached_module("hlo", data, build) if use_cache else build()

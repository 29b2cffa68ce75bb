"""The on-disk store every cache of profan writes through: data only, bounded, never beside a
trace.

**Where.**  ``profan.paths.cache_dir(kind)``: ``$PROFAN_CACHE_DIR``, else
``$XDG_CACHE_HOME/profan``, else ``~/.cache/profan``, one folder per kind of entry.  Nothing
is ever written next to the input: trace directories may be read-only or shared.

**What an entry is.**  One file ``<kind>/<key>.entry``, written to a temporary file and renamed
into place (readers never see half an entry)::

    magic (8 bytes, the format's version in its last byte) | header length (u64) |
    CRC-32 of the rest (u32) | padding to 32 bytes
    header: msgpack [key, [[offset, length] of each blob], meta (msgpack)], padded to 64 bytes
    blobs: raw bytes (numpy columns), each at a 64-byte aligned offset

It holds data only: msgpack (read with ``msgspec``, typed by the reader) and raw little-endian
numbers.  Nothing in it is ever executed; there is no pickle anywhere in profan's caches.  An
entry whose magic, length, checksum or key does not match what the reader expects (damaged,
truncated, written by another format version, or another key's file renamed) is a miss, as is
one the reader cannot decode into its types.  The CRC catches damage, not forgery: a process
that can write the cache directory can make profan print wrong numbers (never run code), so a
cache shared between users should be trusted like the traces it summarises.

**Bound.**  The entries of every kind together are kept under ``max_bytes()`` (default 2 GiB,
``$PROFAN_CACHE_MAX_BYTES``: a number of bytes with an optional K/M/G suffix, ``0`` turns
writing off).  A hit touches its entry's modification time; after each write the least recently
used entries are removed until the store is under its bound, and so is any other file in the
store's folders (a temporary file an interrupted writer left an hour ago or more, the pickles
that older versions of profan wrote).
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

MAGIC = b"PROFANC\x01"
_PREFIX = struct.Struct("<8sQI12x")  # 32 bytes: the header starts aligned
_ALIGN = 64
SUFFIX = ".entry"
MAX_BYTES_ENV = "PROFAN_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 * 2**30
# Kinds whose entries this store writes (and so may evict); ``lark`` holds the parser tables.
KINDS = ("inputs", "hlo", "hloproto", "hosts", "profiles", "reports", "lark")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# A temporary file this old was left by a writer that died: eviction removes it.
_STALE_TEMPORARY_S = 3600


class _Header(msgspec.Struct, array_like=True):
    key: str
    blobs: list[tuple[int, int]]
    meta: msgspec.Raw


_HEADER_DECODER = msgspec.msgpack.Decoder(_Header)
_ENCODER = msgspec.msgpack.Encoder()


def max_bytes() -> int:
    """The bound on the store's size: ``$PROFAN_CACHE_MAX_BYTES`` or 2 GiB."""
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    return parse_size(text)


def parse_size(text: str) -> int:
    """``"500M"`` -> bytes (K, M, G, T are powers of 1024; a ``B``/``iB`` tail is allowed)."""
    value = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = value[-1:] if value[-1:] in _UNITS and value[-1:] else ""
    number = value[: len(value) - len(unit)].strip()
    try:
        size = float(number)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (a number of bytes, e.g. 2G or 500M)") from None
    if size < 0 or size != size:
        raise ValueError(f"not a size: {text!r} (must be 0 or more)")
    return int(size * _UNITS[unit])


def _folder(kind: str) -> Path | None:
    from profan.paths import cache_dir

    try:
        return cache_dir(kind)
    except OSError:  # no writable cache directory: every lookup is a miss
        return None


def _entry_path(kind: str, key: str) -> Path | None:
    folder = _folder(kind)
    return None if folder is None else folder / f"{key}{SUFFIX}"


def read_entry(kind: str, key: str) -> tuple[msgspec.Raw, list[memoryview]] | None:
    """The meta (undecoded msgpack) and blobs of the entry ``key``, or None on a miss.

    The blobs are writable views of one buffer, so numpy arrays built on them are writable."""
    pending = _PENDING.get((kind, key))
    if pending is not None:
        pending.join()  # written in the background (``write_entry(background=True)``)
    path = _entry_path(kind, key)
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            buffer = bytearray(size)
            if handle.readinto(buffer) != size:
                return None
    except OSError:
        return None
    parsed = parse_entry(buffer, key)
    if parsed is not None:
        with contextlib.suppress(OSError):
            os.utime(path)  # least recently used goes first
    return parsed


def entry_exists(kind: str, key: str) -> bool:
    """Whether an entry ``key`` is stored (not whether it is intact: reading it tells)."""
    path = _entry_path(kind, key)
    return path is not None and path.is_file()


def parse_entry(buffer: bytearray, key: str) -> tuple[msgspec.Raw, list[memoryview]] | None:
    """An entry's meta and blobs, or None when it is not an intact entry of ``key``."""
    if len(buffer) < _PREFIX.size:
        return None
    magic, header_length, checksum = _PREFIX.unpack_from(buffer)
    body = memoryview(buffer)[_PREFIX.size :]
    if magic != MAGIC or header_length > len(body) or zlib.crc32(body) != checksum:
        return None
    try:
        header = _HEADER_DECODER.decode(body[:header_length])
    except (msgspec.DecodeError, ValueError):
        return None
    if header.key != key:
        return None  # another key's entry under this name: foreign
    blobs = []
    area = body[_aligned(header_length) :]
    for offset, length in header.blobs:
        if offset < 0 or length < 0 or offset + length > len(area):
            return None
        blobs.append(area[offset : offset + length])
    return header.meta, blobs


def _pieces(key: str, meta: Any, blobs: Sequence[Any]) -> tuple[int, list[Any]]:
    """The entry's header length and its pieces after the prefix (meta encoded now; the blobs
    as they are)."""
    views = [memoryview(blob).cast("B") for blob in blobs]
    spans, offset = [], 0
    for view in views:
        offset = _aligned(offset)
        spans.append((offset, view.nbytes))
        offset += view.nbytes
    header = _ENCODER.encode(_Header(key, spans, msgspec.Raw(_ENCODER.encode(meta))))
    pieces: list[Any] = [header, b"\0" * (_aligned(len(header)) - len(header))]
    position = 0
    for (start, _), view in zip(spans, views, strict=True):
        pieces.append(b"\0" * (start - position))
        pieces.append(view)
        position = start + view.nbytes
    return len(header), pieces


def _checked(encoded: tuple[int, list[Any]]) -> list[Any]:
    """The pieces with their prefix (magic, header length, CRC of the rest) in front."""
    header_length, pieces = encoded
    checksum = 0
    for piece in pieces:
        checksum = zlib.crc32(piece, checksum)
    return [_PREFIX.pack(MAGIC, header_length, checksum), *pieces]


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


# Entries being written in the background, by (kind, key): reading one waits for it.
_PENDING: dict[tuple[str, str], threading.Thread] = {}
_BEHIND = [0]  # depth of ``writing_behind`` scopes: background writes are allowed within one
# Whether a write within a scope left the eviction to the scope's end: a command writes several
# entries, and each eviction lists and stats every file of the store.
_EVICTION_DUE = [False]


@contextlib.contextmanager
def writing_behind() -> Iterator[None]:
    """Within: ``write_entry(background=True)`` writes in the background; on the way out of
    the outermost scope every such write is waited for, and the store evicted once (not after
    each write).  Outside any scope it writes at once and evicts after each write (a library
    caller never returns with a thread of profan's still writing)."""
    _BEHIND[0] += 1
    try:
        yield
    finally:
        _BEHIND[0] -= 1
        if not _BEHIND[0]:
            finish_writes()
            if _EVICTION_DUE[0]:
                _EVICTION_DUE[0] = False
                evict(_bound_or_none())


def write_entry(
    kind: str, key: str, meta: Any, blobs: Sequence[Any] = (), *, background: bool = False
) -> bool:
    """Store an entry (atomically); whether it was stored.  Failing only costs the next run
    its speed: a full or read-only disk, or data the format cannot hold, is not an error.

    ``background`` (within ``writing_behind``): the meta is encoded now, and the checksum,
    the file and the eviction are done by a thread while the caller goes on (the checksum and
    the writes release the interpreter's lock: on the big trace's loaded profile, ~50 MB, they
    are most of its cost).  The blobs must not change until it is done.  True once it is under
    way; reading the entry waits for it, ``finish_writes`` waits for all, and so does the end
    of the scope."""
    bound = _bound_or_none()
    path = _entry_path(kind, key)
    if path is None or bound == 0:
        return False
    try:
        encoded = _pieces(key, meta, blobs)
    except (TypeError, ValueError, OverflowError):
        return False
    if _PREFIX.size + sum(memoryview(piece).nbytes for piece in encoded[1]) > bound:
        return False  # would evict everything, itself included
    if not background or not _BEHIND[0]:
        return _store(path, encoded, bound)
    finish_writes((kind, key))
    thread = threading.Thread(
        target=_store, args=(path, encoded, bound), name=f"profan cache: {kind}"
    )
    _PENDING[(kind, key)] = thread
    thread.start()
    return True


def finish_writes(only: tuple[str, str] | None = None) -> None:
    """Wait for the entries being written in the background (``only``: that one)."""
    for name, thread in list(_PENDING.items()):
        if (only is None or name == only) and thread is not threading.current_thread():
            thread.join()
            if _PENDING.get(name) is thread:
                del _PENDING[name]


def _store(path: Path, encoded: tuple[int, list[Any]], bound: int) -> bool:
    import tempfile  # only a write needs it (with shutil and random): a cache hit does not

    temporary = None
    try:
        pieces = _checked(encoded)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "wb") as stream:
            for piece in pieces:
                stream.write(piece)
        os.replace(temporary, path)
        temporary = None
    except OSError:
        return False
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
    if _BEHIND[0]:
        _EVICTION_DUE[0] = True  # once, at the scope's end (``writing_behind``)
    else:
        evict(bound)
    return True


def _bound_or_none() -> int:
    try:
        return max_bytes()
    except ValueError:
        return DEFAULT_MAX_BYTES  # `profan cache info` names the bad value


class StoredFile(NamedTuple):
    """One file of the store, as ``info`` and eviction see it."""

    path: Path
    kind: str
    size: int
    used_ns: int  # last use: the modification time a hit refreshes


def stored_files(kinds: Sequence[str] = KINDS) -> Iterator[StoredFile]:
    """Every entry (and left-over temporary file) of these kinds (once the entries being
    written in the background are written)."""
    finish_writes()
    return _stored_files(kinds)


def _stored_files(kinds: Sequence[str] = KINDS) -> Iterator[StoredFile]:
    from profan.paths import cache_root

    root = cache_root()
    for kind in kinds:
        try:
            scan = os.scandir(root / kind)
        except OSError:
            continue
        with scan:
            for item in scan:
                try:
                    if item.is_file(follow_symlinks=False):
                        stat = item.stat(follow_symlinks=False)
                        yield StoredFile(Path(item.path), kind, stat.st_size, stat.st_mtime_ns)
                except OSError:
                    continue


def evict(bound: int) -> int:
    """Remove the least recently used entries until the store holds at most ``bound`` bytes
    (and temporary files that writers which died left behind); the bytes removed."""
    files = list(_stored_files())  # (a background writer evicts too: it waits for none)
    total = sum(f.size for f in files)
    stale_before = time.time_ns() - _STALE_TEMPORARY_S * 10**9
    stale = [f for f in files if _stale(f, stale_before)]
    entries = sorted((f for f in files if f.path.name.endswith(SUFFIX)), key=lambda f: f.used_ns)
    removed = 0
    for item in stale:
        removed += _remove(item)
    for item in entries:
        if total - removed <= bound:
            break
        removed += _remove(item)
    return removed


def _stale(item: StoredFile, before_ns: int) -> bool:
    """Not an entry: a temporary file its writer left an hour ago or more, or a file of an
    older format (the pickles profan once wrote)."""
    name = item.path.name
    if name.endswith(SUFFIX):
        return False
    return not name.endswith(".tmp") or item.used_ns < before_ns


def _remove(item: StoredFile) -> int:
    """The bytes freed by removing ``item`` (0 when it could not be removed)."""
    try:
        item.path.unlink()
    except OSError:
        return 0
    return item.size


def clear(kinds: Sequence[str] | None = None) -> tuple[int, int]:
    """Remove every file of these kinds (default: every folder of the cache, the parser tables
    included): (files, bytes) removed."""
    count = size = 0
    for item in list(stored_files(all_kinds() if kinds is None else kinds)):
        with contextlib.suppress(OSError):
            item.path.unlink()
            count += 1
            size += item.size
    return count, size


def all_kinds() -> list[str]:
    """Every folder under the cache's root (what ``profan cache info`` lists)."""
    from profan.paths import cache_root

    try:
        return sorted(item.name for item in os.scandir(cache_root()) if item.is_dir())
    except OSError:
        return []

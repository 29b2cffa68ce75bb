"""The on-disk store every cache of profan writes through: data only, bounded, never beside a
trace.

**Where.**  ``profan.paths.cache_root()``: ``$PROFAN_CACHE_DIR``, else
``$XDG_CACHE_HOME/profan``, else ``~/.cache/profan``, one folder per kind of entry.  Nothing
is ever written next to the input: trace directories may be read-only or shared.  The root is
used only when profan made it and nobody else can write it (``profan.cache.trust``); else every
lookup is a miss and nothing is written.

**What an entry is.**  One file ``<kind>/<key>.entry``, written to a temporary file and renamed
into place (readers never see half an entry)::

    magic (8 bytes, the format's version in its last byte) | header length (u64) |
    keyed BLAKE2b of the kind and the rest (16 bytes)
    header: msgpack [key, [[offset, length] of each blob], meta (msgpack)], padded to 64 bytes
    blobs: raw bytes (numpy columns), each at a 64-byte aligned offset

It holds data only: msgpack (read with ``msgspec``, typed by the reader) and raw little-endian
numbers.  Nothing in it is ever executed; there is no pickle anywhere in profan's caches.  An
entry whose magic, length, MAC or key does not match what the reader expects (damaged,
truncated, written by another format version or with another cache's key, forged, or another
key's file renamed) is a miss, as is one the reader cannot decode into its types, and so is
anything at an entry's name that is not a regular file (a link, a FIFO: never followed, never
waited on) or is bigger than the store's bound.  The MAC's key is the root's
(``trust.KEY_FILE``, readable by the user alone): BLAKE2b runs at ~0.8 GB/s, ~4x slower than
the CRC-32 it replaces, which on a re-open is well under a millisecond per report read.

**Bound.**  The entries of every kind together are kept under ``max_bytes()`` (default 2 GiB,
``$PROFAN_CACHE_MAX_BYTES``: a number of bytes with an optional K/M/G suffix, ``0`` turns
writing off).  A hit touches its entry's modification time; after each write the least recently
used entries are removed until the store is under its bound, and so are temporary files that
an interrupted writer left an hour ago or more.  Only what the store recognises as its own is
ever removed: a file named ``<key>.entry`` that starts with profan's magic and the header of
that key, or a ``.profan-*.tmp`` file that is empty or starts with the magic; any other file in
its folders is left alone and not counted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from profan.cache import trust

MAGIC = b"PROFANC\x02"
# Every format version starts so: eviction recognises entries an older profan wrote too.
_MAGIC_STEM = MAGIC[:7]
_MAC_BYTES = 16
_PREFIX = struct.Struct(f"<8sQ{_MAC_BYTES}s")  # 32 bytes: the header starts aligned
_ALIGN = 64
SUFFIX = ".entry"
MAX_BYTES_ENV = "PROFAN_CACHE_MAX_BYTES"
DEFAULT_MAX_BYTES = 2 * 2**30
# Kinds whose entries this store writes (and so may evict); ``lark`` holds the parser tables.
KINDS = trust.KINDS
# Opening an entry: never through a link, never waiting on a FIFO or a device.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
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


def _root(*, create: bool = True) -> trust.Root | None:
    """The cache root, when profan may use it (else a one-line warning, once, and None)."""
    from profan.paths import cache_root

    try:
        return trust.root(cache_root(), create=create)
    except trust.Refused as refused:
        if create:
            trust.warn_once(refused.reason)
        return None


def _folder(kind: str) -> tuple[trust.Root, Path] | None:
    """The root and the folder of ``kind``, when profan may use them (else None: a miss)."""
    cache = _root()
    if cache is None:
        return None
    try:
        return cache, trust.folder(cache, kind)
    except trust.Refused as refused:
        trust.warn_once(refused.reason, f"{kind} are not cached")
        return None


def read_entry(kind: str, key: str) -> tuple[msgspec.Raw, list[memoryview]] | None:
    """The meta (undecoded msgpack) and blobs of the entry ``key``, or None on a miss.

    The blobs are writable views of one buffer, so numpy arrays built on them are writable."""
    pending = _PENDING.get((kind, key))
    if pending is not None:
        pending.join()  # written in the background (``write_entry(background=True)``)
    found = _folder(kind)
    if found is None:
        return None
    cache, folder = found
    try:
        handle = os.open(folder / f"{key}{SUFFIX}", _OPEN_FLAGS)
    except OSError:
        return None
    try:
        buffer = _read_regular(handle, _bound_or_none())
        parsed = None if buffer is None else parse_entry(buffer, key, kind, cache.key)
        if parsed is not None:
            os.utime(handle)  # least recently used goes first
    except OSError:
        return None
    finally:
        os.close(handle)
    return parsed


def _read_regular(handle: int, limit: int) -> bytearray | None:
    """The whole of an open regular file of at most ``limit`` bytes (None for anything else:
    a FIFO, a device, a bigger file, one cut short while read)."""
    status = os.fstat(handle)
    if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
        return None
    buffer = bytearray(status.st_size)
    view, done = memoryview(buffer), 0
    while done < len(buffer):
        count = os.readv(handle, [view[done:]])
        if not count:
            return None
        done += count
    return buffer


def entry_exists(kind: str, key: str) -> bool:
    """Whether an entry ``key`` is stored (not whether it is intact: reading it tells)."""
    found = _folder(kind)
    if found is None:
        return False
    try:
        return stat.S_ISREG(os.lstat(found[1] / f"{key}{SUFFIX}").st_mode)
    except OSError:
        return False


def _mac(kind: str, mac_key: bytes, pieces: Sequence[Any]) -> bytes:
    """The keyed BLAKE2b of an entry of ``kind`` made of ``pieces`` (the kind is signed too:
    an entry moved to another kind's folder fails it)."""
    mac = hashlib.blake2b(kind.encode(), key=mac_key, digest_size=_MAC_BYTES)
    for piece in pieces:
        mac.update(piece)
    return mac.digest()


def parse_entry(
    buffer: bytearray, key: str, kind: str, mac_key: bytes
) -> tuple[msgspec.Raw, list[memoryview]] | None:
    """An entry's meta and blobs, or None when it is not an intact entry of ``key`` of this
    ``kind`` signed with ``mac_key``."""
    if len(buffer) < _PREFIX.size:
        return None
    magic, header_length, mac = _PREFIX.unpack_from(buffer)
    body = memoryview(buffer)[_PREFIX.size :]
    if magic != MAGIC or header_length > len(body) or _mac(kind, mac_key, [body]) != mac:
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


def _signed(encoded: tuple[int, list[Any]], kind: str, mac_key: bytes) -> list[Any]:
    """The pieces with their prefix (magic, header length, MAC of the rest) in front."""
    header_length, pieces = encoded
    return [_PREFIX.pack(MAGIC, header_length, _mac(kind, mac_key, pieces)), *pieces]


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
    found = _folder(kind) if bound else None
    if found is None:
        return False
    cache, folder = found
    path = folder / f"{key}{SUFFIX}"
    try:
        encoded = _pieces(key, meta, blobs)
    except (TypeError, ValueError, OverflowError):
        return False
    if _PREFIX.size + sum(memoryview(piece).nbytes for piece in encoded[1]) > bound:
        return False  # would evict everything, itself included
    signing = (kind, cache.key)
    if not background or not _BEHIND[0]:
        return _store(path, encoded, signing, bound)
    finish_writes((kind, key))
    thread = threading.Thread(
        target=_store, args=(path, encoded, signing, bound), name=f"profan cache: {kind}"
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


def _store(
    path: Path, encoded: tuple[int, list[Any]], signing: tuple[str, bytes], bound: int
) -> bool:
    import tempfile  # only a write needs it (with shutil and random): a cache hit does not

    temporary = None
    try:
        pieces = _signed(encoded, *signing)
        handle, temporary = tempfile.mkstemp(
            dir=path.parent, prefix=trust.TEMPORARY_PREFIX, suffix=trust.TEMPORARY_SUFFIX
        )
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


def stored_files(kinds: Sequence[str] = KINDS) -> list[StoredFile]:
    """Every entry (and left-over temporary file) of these kinds that the store recognises as
    its own (once the entries being written in the background are written); none when the
    cache directory is one profan does not use."""
    finish_writes()
    cache = _root(create=False)
    return [] if cache is None else [f for f in _listed(cache, kinds) if owned(f)]


def _listed(cache: trust.Root, kinds: Sequence[str] = KINDS) -> Iterator[StoredFile]:
    """The regular files of these kinds' folders named as the store names its files (whether
    they hold what it wrote is ``owned``'s to say); folders profan does not use are skipped."""
    for kind in kinds:
        try:
            scan = os.scandir(trust.folder(cache, kind, create=False))
        except (OSError, trust.Refused):
            continue
        with scan:
            for item in scan:
                if not (_entry_name(item.name) or _temporary_name(item.name)):
                    continue
                try:
                    if item.is_file(follow_symlinks=False):
                        status = item.stat(follow_symlinks=False)
                        yield StoredFile(Path(item.path), kind, status.st_size, status.st_mtime_ns)
                except OSError:
                    continue


def _entry_name(name: str) -> bool:
    stem = name[: -len(SUFFIX)]
    plain = stem.replace("-", "").replace("_", "")
    return name.endswith(SUFFIX) and 0 < len(stem) <= 128 and plain.isascii() and plain.isalnum()


def _temporary_name(name: str) -> bool:
    return name.startswith(trust.TEMPORARY_PREFIX) and name.endswith(trust.TEMPORARY_SUFFIX)


def owned(item: StoredFile) -> bool:
    """Whether a listed file holds what the store writes: an entry that starts with profan's
    magic (any format version) and the header of the key it is named after, or a temporary file
    that is empty or starts with the magic (a write under way, or one a writer left)."""
    name = item.path.name
    expected = b"" if _temporary_name(name) else b"\x93" + _ENCODER.encode(name[: -len(SUFFIX)])
    try:
        handle = os.open(item.path, _OPEN_FLAGS)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return False
        start = os.read(handle, _PREFIX.size + len(expected))
    except OSError:
        return False
    finally:
        os.close(handle)
    if not expected:
        return not start or start.startswith(_MAGIC_STEM)
    return start.startswith(_MAGIC_STEM) and start[_PREFIX.size :] == expected


def evict(bound: int) -> int:
    """Remove the least recently used entries until the store holds at most ``bound`` bytes
    (and temporary files that writers which died left behind); the bytes removed.  Files the
    store does not recognise as its own are neither removed nor counted."""
    cache = _root()
    if cache is None:
        return 0
    files = list(_listed(cache))  # (a background writer evicts too: it waits for none)
    total = sum(f.size for f in files)
    stale_before = time.time_ns() - _STALE_TEMPORARY_S * 10**9
    removed = 0
    for item in files:
        if _temporary_name(item.path.name) and item.used_ns < stale_before:
            if owned(item):
                removed += _remove(item)
            else:
                total -= item.size
    entries = sorted((f for f in files if f.path.name.endswith(SUFFIX)), key=lambda f: f.used_ns)
    for item in entries:
        if total - removed <= bound:
            break
        if owned(item):
            removed += _remove(item)
        else:
            total -= item.size
    return removed


def _remove(item: StoredFile) -> int:
    """The bytes freed by removing ``item`` (0 when it could not be removed)."""
    try:
        item.path.unlink()
    except OSError:
        return 0
    return item.size


def clear(kinds: Sequence[str] = KINDS) -> tuple[int, int]:
    """Remove every entry (and temporary file) of the store of these kinds, nothing else:
    (files, bytes) removed.  Raises ``trust.Refused`` when the cache directory is not one
    profan made and may use (``profan cache clear`` says so)."""
    from profan.paths import cache_root

    finish_writes()
    cache = trust.root(cache_root(), create=False)
    count = size = 0
    for item in [f for f in _listed(cache, kinds) if owned(f)]:
        with contextlib.suppress(OSError):
            item.path.unlink()
            count += 1
            size += item.size
    return count, size

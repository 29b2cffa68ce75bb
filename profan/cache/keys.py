"""Cache keys: what an entry was made from, hashed.

A key is the SHA-256 of a msgpack list of everything that determines the entry: the content of
each input, the options that change the output, profan's version and a hash of profan's own
code (``code_digest``), so no entry outlives a change to any of them.

**Inputs.**  A local file counts by the SHA-256 of its bytes.  Hashing a large trace every
time would cost a tenth of a second per 70 MB, so, as git's index does, the hash is recorded
with the file's stat signature (device, inode, size, modification and change times in ns) and
reused while the signature is unchanged; a file modified in the last two seconds is hashed but
not recorded (its next change could land within the same timestamp tick).  A remote object
(``gs://``, ``s3://``) counts by what its store says of it when the run is listed, never by
downloading it: its generation / version id / ETag / checksum and size.  An object whose store
reports none of these is not cached (``remote_fingerprint`` is None).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from profan.cache.store import read_entry, write_entry
from profan.paths import cache_root
from profan.version import __version__

_ENCODER = msgspec.msgpack.Encoder()
_SIGNATURE_DECODER = msgspec.msgpack.Decoder(tuple[tuple[int, int, int, int, int], str])
_CODE_DECODER = msgspec.msgpack.Decoder(str)
# A file modified this recently is hashed but its hash is not recorded (racy timestamps).
_RACY_NS = 2 * 10**9
# What object stores report that changes whenever the object's content does.
_REMOTE_IDENTITY = ("generation", "VersionId", "version_id", "ETag", "etag", "md5Hash", "crc32c")
_REMOTE_EXTRA = ("size", "mtime", "LastModified", "updated")

_CODE_DIGEST: str | None = None
# What this process learnt of files' digests, by cache directory and stat index key: (stat
# signature, digest).  A command takes each key's parts where it needs them (whether to read
# ahead, the lookup, the store): the files are hashed, or looked up in the stat index, once.
_KNOWN: dict[tuple[str, str], tuple[tuple[int, int, int, int, int], str]] = {}


def digest(parts: Any) -> str:
    """The key of ``parts`` (anything msgpack encodes: str, int, float, bytes, lists, dicts)."""
    return hashlib.sha256(_ENCODER.encode(parts)).hexdigest()[:40]


def code_digest() -> str:
    """SHA-256 of every file of the profan package (code, data tables, schema descriptors) and
    of the grammars: any change to profan gives every key a new value.  Like a trace file's
    (``file_digest``), it is recorded under the files' stat signatures and reused while none
    of them changes: a run that looks anything up stats ~200 files instead of reading them
    (~1 ms instead of ~8)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        _CODE_DIGEST = sources_digest("code", _code_files())
    return _CODE_DIGEST


def sources_digest(name: str, files: Sequence[tuple[str, str | os.PathLike[str]]]) -> str:
    """SHA-256 of profan's version and of ``files`` ((name, path): the name, relative to the
    package, is hashed with the content, so a key does not move with the checkout), recorded
    in the stat index under ``name`` and the files' stat signatures and reused while none of
    them changes.  The one scheme for a hash of profan's own code: the whole package
    (``code_digest``) or the part an entry depends on (``profan.hlo.stored``)."""
    stats = [(relative, path, os.stat(path)) for relative, path in files]
    signature = [[relative, *_signature(stat)] for relative, _, stat in stats]
    index_key = digest([name, __version__, signature])
    found = read_entry("inputs", index_key)
    if found is not None:
        try:
            return _CODE_DECODER.decode(found[0])
        except (msgspec.DecodeError, ValueError):
            pass
    hasher = hashlib.sha256(__version__.encode())
    for relative, path, _ in stats:
        hasher.update(relative.encode() + b"\0")
        with open(path, "rb") as handle:
            hasher.update(handle.read())
    content = hasher.hexdigest()[:32]
    newest_ns = max((max(s.st_mtime_ns, s.st_ctime_ns) for _, _, s in stats), default=0)
    if time.time_ns() - newest_ns > _RACY_NS:
        write_entry("inputs", index_key, content)
    return content


def _code_files() -> list[tuple[str, str]]:
    """(name relative to the package's parent, path) of every file ``code_digest`` covers,
    sorted by path."""
    from profan.paths import PACKAGE_DIR  # (read when called: a test points it at a copy)

    files = []
    for folder, subfolders, names in os.walk(PACKAGE_DIR):
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        files += [os.path.join(folder, name) for name in names]
    grammars = PACKAGE_DIR.parent / "grammars"  # a checkout keeps them beside the package
    if grammars.is_dir() and not (PACKAGE_DIR / "grammars").is_dir():
        files += [str(path) for path in grammars.glob("*.lark")]
    skip = len(os.path.join(PACKAGE_DIR.parent, ""))  # every path starts with it
    return [(path[skip:], path) for path in sorted(files)]


def versioned(kind: str, parts: Any) -> str:
    """The key of an entry of ``kind`` made from ``parts`` by this profan (version and code)."""
    return digest([kind, __version__, code_digest(), parts])


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a local file's bytes, reused from the stat index while the file is unchanged
    (raises OSError when it cannot be read), or taken over from ``digest_behind``."""
    file = Path(path)
    stat = file.stat()
    signature, index_key, content = _indexed_digest(file, stat)
    if content is not None:
        return content
    hashing = _HASHING.pop(index_key, None)
    if hashing is not None:
        hashing.done.wait()
        if hashing.signature == signature and hashing.content is not None:
            return hashing.content
    return _hash_and_record(file, stat, signature, index_key)[0]


def _hash_and_record(
    file: Path, stat: os.stat_result, signature: tuple[int, int, int, int, int], index_key: str
) -> tuple[str, bool]:
    """The file's SHA-256, and whether the file was still as ``signature`` says once read: only
    then is the hash recorded in the stat index under it."""
    with file.open("rb") as handle:
        content = hashlib.file_digest(handle, "sha256").hexdigest()
    if _signature(file.stat()) != signature:
        return content, False
    if time.time_ns() - max(stat.st_mtime_ns, stat.st_ctime_ns) > _RACY_NS:
        write_entry("inputs", index_key, [list(signature), content])
        _KNOWN[cache_root().as_posix(), index_key] = (signature, content)
    return content, True


@dataclass(slots=True)
class _Hashing:
    """A file being hashed in the background: its stat signature then, and the digest once
    ``done`` (None when it could not be read, or changed meanwhile: ``file_digest`` then reads
    it again, and says why)."""

    file: Path
    stat: os.stat_result
    signature: tuple[int, int, int, int, int]
    content: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


# Files being hashed in the background (``digest_behind``), by stat index key.
_HASHING: dict[str, _Hashing] = {}
_HASHERS: list[threading.Thread] = []


def digest_behind(paths: Iterable[Any]) -> None:
    """Start hashing these local files, one after the other, in a thread (the hash releases
    the interpreter's lock), for a caller with other work to do before it needs their keys:
    ``file_digest`` of one of them then waits for that result (taken from the same bytes, by
    the same stat signature) instead of reading the file again.  Files the stat index knows,
    and remote ones, are left out."""
    queued: list[tuple[str, _Hashing]] = []
    for path in paths:
        if not isinstance(path, Path):
            continue
        try:
            stat = path.stat()
            signature, index_key, content = _indexed_digest(path, stat)
        except OSError:
            continue  # file_digest says why, when the key is taken
        if content is None and index_key not in _HASHING:
            _HASHING[index_key] = _Hashing(path, stat, signature)
            queued.append((index_key, _HASHING[index_key]))
    if queued:
        thread = threading.Thread(target=_hash_all, args=(queued,), name="profan cache: hash")
        _HASHERS.append(thread)
        thread.start()


def finish_digests() -> None:
    """Wait for the hashes ``digest_behind`` started (their digests are recorded in the stat
    index whether or not a key took them)."""
    while _HASHERS:
        _HASHERS.pop().join()
    _HASHING.clear()


def _hash_all(queued: list[tuple[str, _Hashing]]) -> None:
    for index_key, hashing in queued:
        try:
            content, unchanged = _hash_and_record(
                hashing.file, hashing.stat, hashing.signature, index_key
            )
            hashing.content = content if unchanged else None
        except OSError:
            pass
        finally:
            hashing.done.set()


def known_digest(path: str | os.PathLike[str]) -> str | None:
    """``file_digest(path)`` when the stat index holds it for the file as it is now, else None
    (never reads the file: a file the cache has not seen is told apart at the cost of a stat)."""
    file = Path(path)
    try:
        return _indexed_digest(file, file.stat())[2]
    except OSError:
        return None


def _indexed_digest(
    file: Path, stat: os.stat_result
) -> tuple[tuple[int, int, int, int, int], str, str | None]:
    """The file's stat signature, its index key, and the digest recorded for that signature."""
    signature = _signature(stat)
    index_key = digest(["input", str(file.resolve())])
    known = _KNOWN.get((cache_root().as_posix(), index_key))
    if known is not None and known[0] == signature:
        return signature, index_key, known[1]
    found = read_entry("inputs", index_key)
    if found is not None:
        try:
            recorded, content = _SIGNATURE_DECODER.decode(found[0])
        except (msgspec.DecodeError, ValueError):
            recorded, content = None, ""
        if recorded == signature:
            _KNOWN[cache_root().as_posix(), index_key] = (signature, content)
            return signature, index_key, content
    return signature, index_key, None


def _signature(stat: os.stat_result) -> tuple[int, int, int, int, int]:
    """What changes whenever a file's content does (git's index uses the same)."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def remote_fingerprint(info: dict[str, Any] | None) -> list[Any] | None:
    """What an object store's listing says of one object that changes with its content, or
    None when it says nothing of the kind (such an object is never cached)."""
    if not info:
        return None
    identity = [[name, str(info[name])] for name in _REMOTE_IDENTITY if info.get(name)]
    if not identity:
        return None
    return identity + [[name, str(info[name])] for name in _REMOTE_EXTRA if name in info]


def file_input(file: Any) -> list[Any] | None:
    """One file: a local path by its content hash, a remote object by its generation / ETag."""
    if isinstance(file, Path):
        try:
            return ["local", file_digest(file)]
        except OSError:
            return None
    info = file.info() if hasattr(file, "info") else None
    found = remote_fingerprint(info)
    return None if found is None else ["remote", str(file), found]

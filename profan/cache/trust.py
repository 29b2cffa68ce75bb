"""Whether profan may use a cache directory, and the key that signs its entries.

A cache directory is trusted no more than the user's own files: profan uses it only when it is
a directory owned by the user running profan and writable by nobody else (no group or other
write bit), and only when profan made it, which a marker file at its root says (``MARKER``,
a `CACHEDIR.TAG <https://bford.info/cachedir/>`_ whose comment names profan, so that backup
tools skip the cache too).  profan writes the marker when it creates the directory, and when
it finds the directory empty or holding nothing but its own folders (a cache an older profan
made).  Any other directory is refused with one line on stderr saying why and how to fix it,
and the command runs without the cache: a cache only buys speed.

Each kind of entry lives in a folder of its own under the root, used on the same terms, and
never through a symbolic link (profan would write into, and evict from, the link's target).

**The key.**  Every entry carries a keyed BLAKE2b of its bytes (``profan.cache.store``); the
key is 32 random bytes in ``KEY_FILE`` at the root, created ``0600`` on first use.  An entry
copied from another user's cache, or forged with a recomputed checksum, fails it and is a miss.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import NamedTuple

MARKER = "CACHEDIR.TAG"
_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55\n"
_MARKER_TEXT = _SIGNATURE + (
    b"# profan cache: made by profan, which removes from it only the entries it wrote.\n"
    b"# See https://bford.info/cachedir/ for what this file means to backup tools.\n"
)
KEY_FILE = "entries.key"
KEY_BYTES = 32
# The store's kind folders (``profan.cache.store`` writes one kind of entry in each).
KINDS = ("inputs", "hlo", "hloproto", "hosts", "profiles", "reports", "lark")
# A temporary file of profan's store (``store._store``) starts so; it may be seen mid-write.
TEMPORARY_PREFIX = ".profan-"
TEMPORARY_SUFFIX = ".tmp"


class Refused(Exception):
    """A cache directory (or one of its folders) profan does not use: ``reason`` says why and
    how to fix it, in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Root(NamedTuple):
    """A cache root profan may use: where it is, and the key its entries are signed with.
    (A named tuple: a frozen dataclass costs a re-open ~2 ms to define.)"""

    path: Path
    key: bytes


# Verified roots by (path, device, inode): the marker and key are read once per process; the
# owner and mode are checked on every use (one stat).
_VERIFIED: dict[tuple[str, int, int], Root] = {}
_WARNED: set[str] = set()


def warn_once(reason: str, outcome: str = "running without the cache") -> None:
    """One line on stderr, once per process and reason: the command goes on without it."""
    if reason not in _WARNED:
        _WARNED.add(reason)
        print(f"profan: warning: {reason}; {outcome}", file=sys.stderr)


def root(path: Path, *, create: bool = True) -> Root:
    """The cache root at ``path``, checked (``Refused`` when profan may not use it).

    ``create``: make the directory (``0700``) when missing, and adopt one that is empty or
    holds only profan's folders (writing the marker), and make the key on first use.  Without
    ``create`` (a look, ``profan cache info|clear``) a directory without the marker is refused
    and no key is read."""
    status = _stat_root(path, create)
    _check_owner(path, status, "cache directory")
    identity = (str(path), status.st_dev, status.st_ino)
    found = _VERIFIED.get(identity)
    if found is None:
        _check_marker(path, create)
        if not create:  # looked at only (``profan cache info|clear``): no key needed
            return Root(path, b"")
        found = _VERIFIED[identity] = Root(path, _key(path))
    return found


def folder(cache: Root, kind: str, *, create: bool = True) -> Path:
    """The folder of ``kind`` under a checked root (made ``0700`` when missing and ``create``);
    ``Refused`` when it is a symbolic link, not a directory, another user's or writable by
    others.  (Checked by name: once the root is the user's alone, nobody else can swap it.)"""
    path = cache.path / kind
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise Refused(f"{path} does not exist") from None
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
            status = os.lstat(path)
        except OSError as error:
            raise Refused(f"{path} cannot be made: {error.strerror}") from None
    except OSError as error:
        raise Refused(f"{path}: {error.strerror}") from None
    if stat.S_ISLNK(status.st_mode):
        raise Refused(f"{path} is a symbolic link, which the cache never follows (remove it)")
    _check_owner(path, status, "cache folder")
    return path


def _stat_root(path: Path, create: bool) -> os.stat_result:
    try:
        return os.stat(path)
    except FileNotFoundError:
        if not create:
            raise Refused(f"{path} does not exist") from None
    except OSError as error:
        raise Refused(f"cache directory {path}: {error.strerror}") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another profan made it meanwhile
            os.mkdir(path, 0o700)
        return os.stat(path)
    except OSError as error:
        raise Refused(f"cache directory {path} cannot be made: {error.strerror}") from None


def _check_owner(path: Path, status: os.stat_result, what: str) -> None:
    if not stat.S_ISDIR(status.st_mode):
        raise Refused(f"{what} {path} is not a directory (set PROFAN_CACHE_DIR to another path)")
    if status.st_uid != os.geteuid():
        raise Refused(
            f"{what} {path} belongs to another user (uid {status.st_uid}); "
            "set PROFAN_CACHE_DIR to a directory of your own"
        )
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        mode = stat.S_IMODE(status.st_mode)
        raise Refused(
            f"{what} {path} can be written by other users (mode {mode:o}); "
            f"run `chmod go-w {path}` or set PROFAN_CACHE_DIR to another directory"
        )


def _read_small(path: Path, limit: int, *, private: bool = False) -> bytes | None:
    """The bytes of a regular file of the user's (never through a link, never blocking on a
    FIFO), None when missing; ``Refused`` when it is something else, bigger than ``limit``, or
    (``private``) readable by others."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise Refused(f"{path}: {error.strerror} (remove it)") from None
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            raise Refused(f"{path} is not the file profan wrote there (remove it)")
        if status.st_uid != os.geteuid():
            raise Refused(f"{path} belongs to another user (uid {status.st_uid}; remove it)")
        if private and status.st_mode & 0o077:
            raise Refused(f"{path} can be read by other users (run `chmod 600 {path}`)")
        return os.read(handle, limit + 1)
    finally:
        os.close(handle)


def is_marked(path: Path) -> bool:
    """Whether ``path`` holds profan's marker (``Refused`` when the marker is no plain file)."""
    text = _read_small(path / MARKER, 4096)
    return text is not None and text.startswith(_SIGNATURE) and b"\n# profan cache:" in text


def _check_marker(path: Path, create: bool) -> None:
    if is_marked(path):
        return
    adoptable = _adoptable(path)
    if create and adoptable:
        _write_new(path / MARKER, _MARKER_TEXT, 0o644)
        return
    if adoptable:  # looked at only: a command that caches marks it
        raise Refused(
            f"{path} has no {MARKER} of profan's yet (empty, or made by an older profan: "
            "the next cached command marks it)"
        )
    raise Refused(
        f"{path} was not made by profan (no {MARKER} of profan's in it) and holds other "
        "files; set PROFAN_CACHE_DIR to a new or empty directory"
    )


def _adoptable(path: Path) -> bool:
    """Empty, or holding only what profan puts there: its kind folders (real ones), the marker,
    the key and temporary files (a cache made by an older profan, or by one running now)."""
    with os.scandir(path) as items:
        for item in items:
            name = item.name
            if name in KINDS and item.is_dir(follow_symlinks=False):
                continue
            if name in (MARKER, KEY_FILE) or name.startswith(TEMPORARY_PREFIX):
                continue
            return False
    return True


def _key(path: Path) -> bytes:
    """The root's key, made on first use."""
    key_path = path / KEY_FILE
    key = _read_small(key_path, KEY_BYTES, private=True)
    if key is None:
        _write_new(key_path, os.urandom(KEY_BYTES), 0o600)
        key = _read_small(key_path, KEY_BYTES, private=True)  # another profan's, if first
    if key is None or len(key) != KEY_BYTES:
        raise Refused(f"{key_path} is not a key profan wrote ({KEY_BYTES} bytes; remove it)")
    return key


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """Write ``path`` whole, unless it exists (another profan wrote it first: kept)."""
    temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        handle = os.open(temporary, flags, mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        try:
            os.link(temporary, path)  # atomic, and never over a file another profan wrote
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not os.path.lexists(path):
                os.replace(temporary, path)
    except OSError as error:
        raise Refused(f"{path} cannot be written: {error.strerror}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)

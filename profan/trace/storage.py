"""Where traces live: local paths, or any URL fsspec understands (``gs://``, ``s3://``, ...).

``as_path(text)`` gives a ``pathlib.Path`` for a local path (or ``file://`` URL) and a
``RemotePath`` for a URL.  ``RemotePath`` offers the few ``Path`` methods discovery and reading
use (``exists``, ``is_file``, ``is_dir``, ``iterdir``, ``read_bytes``, ``name``, ``parent``,
``/``), so the same code finds runs and hosts in a bucket: listing a directory is one request
(its entries' kinds and sizes are kept), and only the host files that are read are downloaded.

Remote protocols are optional extras: ``pip install 'profan[gcs]'`` (gcsfs) for ``gs://``,
``'profan[s3]'`` (s3fs) for ``s3://``.  Credentials come from each library's standard
environment and configuration; profan never prints them.  Failures (no such bucket, permission
denied, network down) become one-line ``TraceError``s (exit code 2).
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from profan.errors import TraceError
from profan.inputs import check_input, file_url_path

EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3"}


def is_remote(text: str | os.PathLike[str]) -> bool:
    """True for a URL with a protocol other than ``file://``."""
    value = str(text)
    return "://" in value and not value.startswith("file://")


def is_local_plain(path: str) -> bool:
    """A local file read with seeks (not remote, not gzip-compressed)."""
    file = as_path(path)
    return isinstance(file, Path) and not file.name.endswith(".gz") and _is_plain(file)


def _is_plain(file: Path) -> bool:
    """A local file that is not gzip-compressed (whatever its name)."""
    check_input(file, "trace file")  # (opening a FIFO would wait for a writer)
    try:
        with open(file, "rb") as handle:
            return handle.read(2) != b"\x1f\x8b"
    except OSError as error:
        raise TraceError(str(file), f"cannot read: {error.strerror}") from None


TIMEOUT_ENV = "PROFAN_REMOTE_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0
# Loggers of the storage libraries: with no handler of their own, Python prints their warnings
# (tracebacks of each retry) on stderr; profan says what failed in one line instead.
_LIBRARY_LOGGERS = ("gcsfs", "s3fs", "fsspec", "aiohttp", "botocore", "aiobotocore",
                    "google", "urllib3", "asyncio")  # fmt: skip


def remote_timeout() -> float:
    """Seconds a remote store may take to connect or answer: ``$PROFAN_REMOTE_TIMEOUT``, else
    ``DEFAULT_TIMEOUT_S``."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise TraceError(f"${TIMEOUT_ENV}", f"{text!r}: expected a number of seconds above 0")
    return seconds


def _quiet_libraries() -> None:
    for name in _LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())


def as_path(text: str | os.PathLike[str]) -> Path | RemotePath:
    """A local ``Path`` or a ``RemotePath`` for ``text``."""
    if isinstance(text, RemotePath | Path):
        return text
    value = os.fspath(text)
    local = file_url_path(value)
    if local is not None:
        return Path(local)
    if not is_remote(value):
        return Path(value)
    protocol = value.split("://", 1)[0]
    try:
        import fsspec
    except ImportError:
        raise TraceError(value, _missing(protocol)) from None
    _quiet_libraries()
    try:
        fs, root = fsspec.core.url_to_fs(value)
    except (ImportError, ValueError) as error:
        raise TraceError(value, f"{_missing(protocol)} ({error})") from None
    return RemotePath(fs, root.rstrip("/"), protocol)


def _missing(protocol: str) -> str:
    extra = EXTRAS.get(protocol)
    if extra:
        return (
            f"reading {protocol}:// paths needs the [{extra}] extra: pip install 'profan[{extra}]'"
        )
    return f"no fsspec filesystem for {protocol}:// (pip install fsspec and its {protocol} backend)"


def describe_error(error: BaseException) -> str:
    """One line for a storage failure, without credentials or tracebacks."""
    if isinstance(error, FileNotFoundError):
        return "no such file, directory or bucket"
    if isinstance(error, PermissionError):
        return "permission denied"
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text[:200]}"


@cache
def _storage_errors() -> tuple[type[BaseException], ...]:
    """What the storage libraries raise for a failed request (each has its own hierarchy)."""
    errors: list[type[BaseException]] = [OSError, ValueError, TimeoutError]
    for module, names in (
        ("botocore.exceptions", ("BotoCoreError", "ClientError")),
        ("aiohttp", ("ClientError",)),
        ("google.auth.exceptions", ("GoogleAuthError",)),
    ):
        try:
            found = importlib.import_module(module)
        except ImportError:
            continue
        errors += [getattr(found, name) for name in names if hasattr(found, name)]
    return tuple(errors)


class _Stat(NamedTuple):
    st_mtime: float
    st_size: int


@dataclass
class RemotePath:
    """A file or directory behind an fsspec filesystem, with the ``Path`` methods profan uses."""

    fs: Any
    path: str
    protocol: str
    _info: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.protocol}://{self.path}"

    def __fspath__(self) -> str:
        return str(self)

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(self.fs, f"{self.path}/{name}", self.protocol)

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> RemotePath:
        return RemotePath(self.fs, self.path.rstrip("/").rsplit("/", 1)[0], self.protocol)

    def _call(self, method: str, *args: Any, seconds: float | None = None) -> Any:
        """``fs.method(*args)``, the whole call within ``seconds`` (default ``remote_timeout()``;
        fsspec's own limit on an async filesystem, gcsfs' and s3fs': a store that refuses
        connections is retried for a minute, one that never answers is waited for forever)."""
        options = {}
        if getattr(self.fs, "async_impl", False):
            # (taken by fsspec's sync, not passed to the method)
            options["timeout"] = seconds or remote_timeout()
        try:
            return getattr(self.fs, method)(*args, **options)
        except FileNotFoundError:
            raise
        except _storage_errors() as error:
            if isinstance(error, TimeoutError):
                waited = options.get("timeout", remote_timeout())
                reason = f"no answer within {waited:g} s (set {TIMEOUT_ENV} to wait more)"
                raise TraceError(str(self), reason) from None
            raise TraceError(str(self), describe_error(error)) from None

    def info(self) -> dict[str, Any] | None:
        if self._info is None:
            try:
                self._info = self._call("info", self.path)
            except FileNotFoundError:
                return None
        return self._info

    def exists(self) -> bool:
        return self.info() is not None

    def is_file(self) -> bool:
        info = self.info()
        return info is not None and info.get("type") == "file"

    def is_dir(self) -> bool:
        info = self.info()
        return info is not None and info.get("type") == "directory"

    def iterdir(self) -> list[RemotePath]:
        try:
            entries = self._call("ls", self.path, True)
        except FileNotFoundError:
            raise TraceError(str(self), describe_error(FileNotFoundError())) from None
        children = []
        for entry in entries:
            name = str(entry["name"]).rstrip("/")
            if name == self.path:
                continue
            children.append(RemotePath(self.fs, name, self.protocol, entry))
        return sorted(children, key=lambda child: child.path)

    def stat(self) -> _Stat:
        info = self.info() or {}
        modified = info.get("mtime") or info.get("LastModified") or info.get("updated") or 0
        if hasattr(modified, "timestamp"):
            modified = modified.timestamp()
        elif isinstance(modified, str):
            modified = 0.0  # order runs by name only
        return _Stat(float(modified), int(info.get("size") or 0))

    def read_bytes(self) -> bytes:
        try:
            # a big file has the time to come at 1 MiB/s on top of the deadline
            seconds = remote_timeout() + self.stat().st_size / 2**20
            return bytes(self._call("cat_file", self.path, seconds=seconds))
        except FileNotFoundError:
            raise TraceError(str(self), describe_error(FileNotFoundError())) from None

    def __lt__(self, other: RemotePath) -> bool:
        return self.path < other.path

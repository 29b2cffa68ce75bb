"""Input paths checked before they are opened: a device, a FIFO or a socket is refused.

Reading ``/dev/zero`` never ends, and opening a FIFO waits for a writer that may never come:
either would hang a command (or fill its memory) instead of failing.  So every input a command
names (a trace, ``--hlo``, ``--budget``, ``--config``, ``--chips``, ``--kernels``, a baseline)
is looked at with ``os.stat`` first (no open, so a FIFO cannot block it) and anything that is
neither a regular file nor a directory is a ``SpecialFileError`` (exit 2) naming it.  A path
that does not exist is left to the reader, which says so in its own words.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from urllib.parse import unquote

from profan.errors import ProfanError, TraceError

# The ``argparse`` destinations that name input paths, in any command, and how to call them.
INPUT_OPTIONS = {
    "trace": "trace",
    "a": "trace",
    "b": "trace",
    "target": "input",
    "file": "input",
    "hlo": "--hlo",
    "budget": "--budget",
    "config": "--config",
    "baseline": "--baseline",
    "user_chips": "--chips",
    "user_kernels": "--kernels",
}

_KINDS = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


class SpecialFileError(ProfanError):
    """An input path that names a device, a FIFO or a socket."""


def special_kind(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is not a regular file or a directory (None otherwise, and
    when it cannot be looked at: its reader reports that)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None


def check_input(path: str | os.PathLike[str], what: str) -> None:
    """Refuse ``path`` (an input called ``what``) when it is a device, FIFO or socket.  Remote
    URLs are not looked at; a ``file://`` URL is checked as its local path."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        return
    kind = special_kind(text)
    if kind is not None:
        raise SpecialFileError(
            f"{text}: {what} is {kind}; expected a regular file or a directory (profan reads "
            "its inputs whole and cannot stream from a device or pipe)"
        )


def file_url_path(text: str) -> str | None:
    """The local path of a ``file://`` URL (``file:///abs/path``, ``file://localhost/abs``),
    None for anything else; ``TraceError`` for one that names another machine."""
    if not text.startswith("file://"):
        return None
    rest = text[len("file://") :]
    if rest.startswith("localhost/"):
        rest = rest[len("localhost") :]
    if not rest.startswith("/"):
        raise TraceError(text, "a file:// URL names an absolute local path: file:///path/to/it")
    return unquote(rest)


def check_inputs(args: object, extra: Iterable[tuple[str, str]] = ()) -> None:
    """``check_input`` on every input a parsed command line names (``INPUT_OPTIONS``) and on
    ``extra`` (path, what) pairs.  A ``file://`` URL among the options becomes its local path
    (every reader then takes it as any local path)."""
    for dest in INPUT_OPTIONS:
        value = getattr(args, dest, None)
        local = file_url_path(value) if isinstance(value, str) else None
        if local is not None:
            setattr(args, dest, local)
    named = [(getattr(args, dest, None), what) for dest, what in INPUT_OPTIONS.items()]
    for path, what in [*named, *extra]:
        if isinstance(path, str) and path:
            check_input(path, what)

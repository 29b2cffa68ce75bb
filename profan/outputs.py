"""Writing a command's outputs without destroying a user's file.

Every command that writes a file goes through here:

* ``refuse_inputs`` — before any analysis, an output that is one of the command's inputs (the
  same resolved path or the same inode) or lies inside an input directory is refused;
* ``check_destination`` — before any analysis, the destination's folder is probed with a real
  temporary file, so a missing, read-only or bad destination is a clear error (exit 2), not a
  failure after minutes of work;
* ``write_file`` / ``atomic_file`` — the file is written beside its destination and renamed
  into place once whole, so a failed write (a full disk) leaves the old file as it was;
* ``write_stdout`` — text for standard output, flushed at once, so a failing stdout (``>
  /dev/full``) is one line and exit 2 too.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from profan.errors import ProfanError

# Errors of the writing side: whatever the body of ``atomic_file`` raises with one of these is
# the destination's fault (a read error of an input says its own file).
_DESTINATION_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


class OutputError(ProfanError):
    """An output that cannot be written where the user asked (exit 2: the user's setting)."""


def os_reason(error: OSError) -> str:
    """The operating system's words for ``error`` (``No space left on device``)."""
    return error.strerror or os.strerror(error.errno or 0) or type(error).__name__


def _is_remote(path: str) -> bool:
    return "://" in path


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist: not the same file
        return False


def refuse_inputs(
    outputs: Iterable[tuple[str, str | os.PathLike[str]]],
    inputs: Iterable[tuple[str, str | os.PathLike[str] | None]],
) -> None:
    """Refuse an output (flag, path) that is an input (flag, path), by resolved path or inode,
    or that lies inside an input directory.  Inputs in object storage cannot be local files."""
    given = [
        (flag, Path(path))
        for flag, path in inputs
        if path is not None and str(path) and not _is_remote(str(path))
    ]
    for out_flag, out_path in outputs:
        target = Path(out_path)
        resolved = target.resolve()
        for in_flag, source in given:
            source_resolved = source.resolve()
            if source.is_dir():
                if _inside(resolved, source_resolved):
                    raise OutputError(
                        f"{out_flag} {target}: inside the {in_flag} directory {source}; profan "
                        "never writes among its inputs: choose another place"
                    )
            elif resolved == source_resolved or _same_file(target, source):
                raise OutputError(
                    f"{out_flag} {target}: this is the {in_flag} input file; profan never "
                    "overwrites its inputs: choose another file"
                )


def _special(path: Path) -> bool:
    """Whether ``path`` exists and is neither a regular file nor a folder (``/dev/stdout``, a
    pipe): written in place, as there is nothing to keep."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_destination(flag: str, path: str | Path, *, folder: bool = False) -> None:
    """Whether ``path`` (a file, or with ``folder`` a directory) can be written: its nearest
    existing folder takes a new file (probed with one, so root, read-only mounts and ACLs all
    answer truly).  Raises ``OutputError`` naming the path and the system's reason."""
    target = Path(path)
    if not folder and target.is_dir():
        raise OutputError(f"{flag} {target}: is a directory; give a file name")
    if folder and target.exists() and not target.is_dir():
        raise OutputError(f"{flag} {target}: exists and is not a directory")
    if not folder and _special(target):
        return
    start = target if folder else target.parent
    existing = start.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"{flag} {target}: {existing} is not a directory")
    try:
        handle, probe = tempfile.mkstemp(prefix=".profan-probe.", dir=existing)
    except OSError as error:
        raise OutputError(
            f"{flag} {target}: cannot write in {existing}: {os_reason(error)}"
        ) from None
    os.close(handle)
    os.unlink(probe)


@contextmanager
def atomic_file(target: Path, flag: str = "output") -> Iterator[Path]:
    """A temporary path beside ``target`` that becomes ``target`` only once written whole (the
    temporary keeps ``target``'s suffixes, which say how to write it).  A destination error
    while writing (a full disk) is an ``OutputError`` and leaves ``target`` as it was."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=target.name, dir=target.parent
        )
    except OSError as error:
        raise OutputError(f"{flag} {target}: cannot write: {os_reason(error)}") from None
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as a plain open() would have made it
        os.replace(temporary, target)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        theirs = error.filename not in (None, name, str(target))
        if theirs and error.errno not in _DESTINATION_ERRNOS:
            raise  # an input's error, reported as such
        raise OutputError(
            f"{flag} {target}: cannot write: {os_reason(error)} (nothing was changed there)"
        ) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_file(target: str | Path, data: str | bytes, flag: str = "output") -> None:
    """Write ``data`` (text as UTF-8) to ``target``, whole or not at all."""
    target = Path(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if _special(target):  # a device or pipe: nothing to keep, nothing to rename over
        try:
            with open(target, "wb") as stream:
                stream.write(raw)
        except OSError as error:
            raise OutputError(f"{flag} {target}: cannot write: {os_reason(error)}") from None
        return
    with atomic_file(target, flag) as temporary, open(temporary, "wb") as stream:
        stream.write(raw)
        stream.flush()
        os.fsync(stream.fileno())  # a full disk may answer only here (delayed allocation)


def write_stdout(text: str) -> None:
    """Print ``text`` on standard output and flush it, so a failing stdout is reported now.
    A closed pipe (``| head``) is left to the CLI, which treats it as the reader's choice."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        # What stayed in the buffer would fail again at exit, with a second message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise OutputError(f"standard output: cannot write: {os_reason(error)}") from None


def option_inputs(args: object) -> list[tuple[str, str | None]]:
    """The input files every command may be given beside its own (``--chips``, ``--kernels``,
    added by ``profan.cli``)."""
    return [
        ("--chips", getattr(args, "user_chips", None)),
        ("--kernels", getattr(args, "user_kernels", None)),
    ]

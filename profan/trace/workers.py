"""Worker processes: tasks run in processes forked from this one, each result sent back as data.

The one mechanism every read in another process goes through: the hosts of a run read at once
(``profan.trace.executors.map_hosts``), the shares of one big host (``profan.trace.load``), a
host read ahead while the command does the rest (``profan.trace.prefetch``).

**Start** (``start``): a fork, which needs nothing sent to it but its tasks (the function is the
forked process's own) and imports nothing again.  The worker dies with this process however it
ends (``die_with_parent``) and takes SIGTERM's default action; it runs the tasks it is sent
through its end of a socket pair, one after the other, until this process closes its end.

**Transport** (``send``, ``receive``): data only, never code (as the cache: nothing in profan
loads pickles).  A task or a result is msgpack (``msgspec``) with its arrays' buffers out of band:
numbers, strings, bytes, lists, tuples, sets, dicts, numpy arrays (a host's columns: tens of MB),
and profan's own dataclasses and errors (rebuilt from their fields, or from what ``__reduce__``
gives, by class names looked up among profan's modules already imported, never imported).  All of
it is written into a memory file whose descriptor crosses the socket with a short header; the
receiver maps the file copy-on-write, and the arrays are views of the mapping (writable, as arrays
read here are; their bytes copied once, not twice through a pipe).  Where there is no memory
file (not Linux), and for tasks, it goes through the socket.  A task's error crosses whole and is
raised by the receiver.

**Death** (``WorkerDiedError``): a worker that ends without its result (killed: the
out-of-memory killer's SIGKILL; crashed) is one error naming the host of the task it was given.
``stop_workers`` kills every worker at once (the CLI's SIGTERM handler).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import mmap
import os
import signal
import socket
import struct
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

import msgspec
import numpy as np

from profan.errors import EXIT_INTERNAL, ProfanError

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_ALIGN = 64  # each buffer of a result starts at a multiple of this in the memory file
# a message's header: how many pieces (its msgpack, then each array's buffer), whether they
# follow through the socket (else they are in the memory file that comes with the header)
_HEADER = struct.Struct("<QB")

# Workers alive now, by process id (``stop_workers``; closed in a new worker).
_LIVE: dict[int, Worker] = {}


class WorkerDiedError(ProfanError):
    """A worker process died under the command (killed, or crashed): which host it read, and
    why when the signal says (exit 2 for the out-of-memory killer's SIGKILL, else 3: a bug)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def died_error(what: str, code: int | None) -> WorkerDiedError:
    """The error of a worker that died reading ``what``; ``code``: its exit code as
    ``Process.exitcode`` gives it (minus the signal that ended it)."""
    if code == -signal.SIGKILL:
        return WorkerDiedError(
            f"the worker process reading {what} was killed (SIGKILL: the system's out-of-memory "
            "killer, most likely): read fewer hosts at once (--workers 1; peak memory grows "
            "with the workers, not the hosts)",
            2,
        )
    cause = f"died of signal {signal.Signals(-code).name}" if code and code < 0 else "died"
    return WorkerDiedError(
        f"the worker process reading {what} {cause}: a bug in profan or its libraries "
        "(rerun with --workers 1 --debug and report it)",
        EXIT_INTERNAL,
    )


def describe(task: Any) -> str:
    """A task for a message: a ``(path, host, ...)`` read task as its host and file."""
    if isinstance(task, tuple) and len(task) >= 2 and all(isinstance(t, str) for t in task[:2]):
        return f"host {task[1]} ({task[0]})"
    return repr(task)[:200]


@dataclass(eq=False, slots=True)
class Worker:
    """A worker process (``pid``) and this process's end of its socket; ``task``: the one it
    was given and has not answered yet (None: idle)."""

    pid: int
    channel: socket.socket
    task: Any = None
    busy: bool = False
    _ended: bool = False

    def fileno(self) -> int:
        """(for ``ready``: the socket becomes readable when the result, or the end, comes)"""
        return self.channel.fileno()

    def submit(self, task: Any) -> None:
        """Give the worker ``task`` (it must be idle)."""
        assert not self.busy
        self.task, self.busy = task, True
        with contextlib.suppress(OSError):  # (it died idle: ``result`` says how)
            send(self.channel, task, memory_file=False)

    def result(self) -> Any:
        """The result of the task given (waits for it); the task's error is raised here, a
        death is ``WorkerDiedError`` naming the task's host."""
        assert self.busy
        try:
            value = receive(self.channel)
        except (EOFError, OSError):
            raise self._died() from None
        self.task, self.busy = None, False
        if isinstance(value, Raised):
            raise value.error
        return value

    def _died(self) -> WorkerDiedError:
        code = self._reap()
        return died_error(describe(self.task), code)

    def close(self) -> None:
        """No more tasks: the worker ends (at once when it was given one it has not answered:
        killed) and is reaped."""
        if self.busy:
            self.kill()
            return
        self.channel.close()
        self._reap()

    def kill(self) -> None:
        """End the worker now and reap it."""
        if not self._ended:
            with contextlib.suppress(OSError):  # (already gone)
                os.kill(self.pid, signal.SIGKILL)
        self.channel.close()
        self._reap()

    def _reap(self) -> int | None:
        """Wait for the process to end; its exit code (minus a signal's number)."""
        if self._ended:
            return None
        self._ended = True
        _LIVE.pop(self.pid, None)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            return None
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


@dataclass(frozen=True, slots=True)
class Raised:
    """What a worker sends back when its task raised."""

    error: BaseException


def start(function: Callable[[Any], Any]) -> Worker | None:
    """A worker process that runs ``function`` on each task it is given; None where this
    system cannot fork (the caller then runs the tasks itself)."""
    if not hasattr(os, "fork"):
        return None
    parent_end, child_end = socket.socketpair()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the command
        code = 1
        try:
            die_with_parent(parent)  # (a reader left behind went on for 40 s at 3.5 GB)
            parent_end.close()
            for other in list(_LIVE.values()):  # (the other workers' ends, inherited)
                other.channel.close()
            _LIVE.clear()
            _serve(function, child_end)
            code = 0
        except KeyboardInterrupt:  # (Ctrl-C reaches every process of the group)
            code = 130
        except BaseException:
            import traceback  # (not imported by a command that starts no worker)

            traceback.print_exc()
        finally:
            with contextlib.suppress(BaseException):
                sys.stderr.flush()
            os._exit(code)  # no atexit handlers, no flush of the command's output buffers
    child_end.close()
    worker = Worker(pid, parent_end)
    _LIVE[pid] = worker
    return worker


def _serve(function: Callable[[Any], Any], channel: socket.socket) -> None:
    """The worker's loop: each task received, run, its result (or its error) sent back; until
    the other end is closed."""
    while True:
        try:
            task = receive(channel)
        except EOFError:
            return
        try:
            value: Any = function(task)
        except Exception as error:  # raised again in the parent
            value = Raised(error)
        send(channel, value)
        del task, value


def ready(workers: Iterable[Worker], timeout: float | None) -> list[Worker]:
    """Those of ``workers`` whose result (or end) has come, waiting up to ``timeout`` seconds
    (None: until one has)."""
    return list(wait(list(workers), timeout))  # type: ignore[arg-type]


def stop_workers() -> None:
    """Kill every worker process of this command now (the CLI's SIGTERM handler: no waiting)."""
    for pid in list(_LIVE):
        with contextlib.suppress(OSError):  # (already gone)
            os.kill(pid, signal.SIGKILL)


def die_with_parent(parent: int) -> None:
    """In a worker just forked from ``parent``: end when the parent ends, however it ends.

    Linux sends the worker SIGKILL when its parent dies (``PR_SET_PDEATHSIG``; a worker holds
    nothing that needs cleaning up); the parent may have died before the call, hence the check
    of ``getppid``.  The parent's SIGTERM handler (``profan.cli``) is not the worker's: SIGTERM
    ends it at once.  Elsewhere only the handler is reset."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    found = libc()
    if found is not None and sys.platform.startswith("linux"):
        found.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


# ------------------------------------------------------------------------------ transport


def send(channel: socket.socket, value: Any, *, memory_file: bool = True) -> None:
    """Write ``value`` to ``channel``: its msgpack and its arrays' buffers into a memory file
    sent with the header (``memory_file``, where the system has one), else through the socket
    after the header.  A value that cannot be sent (a type the transport does not carry) is
    sent as the error that says so."""
    blobs: list[np.ndarray] = []
    try:
        data = msgspec.msgpack.encode(_to_wire(value, blobs))
    except (TypeError, ValueError, OverflowError) as error:
        blobs = []
        failed = RuntimeError(f"{type(value).__name__} could not be sent back: {error}")
        data = msgspec.msgpack.encode(_to_wire(Raised(failed), blobs))
    pieces = [memoryview(data), *(_bytes_of(blob) for blob in blobs)]
    sizes = [piece.nbytes for piece in pieces]
    fd = _memory_file() if memory_file else None
    if fd is None:
        channel.sendall(_HEADER.pack(len(sizes), 1) + struct.pack(f"<{len(sizes)}Q", *sizes))
        for piece in pieces:
            channel.sendall(piece)
        return
    try:
        with open(fd, "wb", buffering=0, closefd=False) as file:
            for piece, offset in zip(pieces, _offsets(sizes), strict=True):
                file.seek(offset)
                _write_all(file.write, piece)
        header = _HEADER.pack(len(sizes), 0) + struct.pack(f"<{len(sizes)}Q", *sizes)
        socket.send_fds(channel, [header], [fd])
    finally:
        os.close(fd)


def receive(channel: socket.socket) -> Any:
    """What ``send`` wrote (``EOFError`` when the other end closed first, or its memory file
    is shorter than the header says)."""
    head, fds, _, _ = socket.recv_fds(channel, _HEADER.size, 1)
    try:
        if not head:
            raise EOFError
        head += _read(channel, _HEADER.size - len(head))
        count, inline = _HEADER.unpack(head)
        sizes = struct.unpack(f"<{count}Q", _read(channel, 8 * count))
        if inline:
            pieces: list[Any] = [_read(channel, size) for size in sizes]
        else:
            if not fds:
                raise EOFError
            pieces = _mapped(fds[0], sizes)
    finally:
        for fd in fds:
            os.close(fd)
    return _from_wire(pieces[0], pieces[1:])


_PLAIN = frozenset((str, int, float, bool, bytes))  # (msgpack's own, as they are)
# What the msgpack extension types of the transport carry.
_TUPLE, _SET, _PARTS, _ARRAY, _OBJECTS, _DATACLASS, _ERROR = range(1, 8)


def _to_wire(value: Any, blobs: list[np.ndarray]) -> Any:
    """``value`` as msgpack's own types and extensions (an array's buffer appended to
    ``blobs``, its extension naming it); ``TypeError`` for a type the transport does not
    carry."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, list):
        if all(item is None or type(item) in _PLAIN for item in value):
            return value  # (a column's values: thousands of names, taken as they are)
        return [_to_wire(item, blobs) for item in value]
    if isinstance(value, dict):
        plain = {key: _to_wire(item, blobs) for key, item in value.items()}
        if isinstance(value, defaultdict) and value.default_factory is list:
            return _extension(_PARTS, plain)  # (a host's part tables)
        return plain
    if isinstance(value, tuple):
        return _extension(_TUPLE, [_to_wire(item, blobs) for item in value])
    if isinstance(value, set | frozenset):
        return _extension(_SET, [_to_wire(item, blobs) for item in value])
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return _extension(
                _OBJECTS, [list(value.shape), _to_wire(value.ravel().tolist(), blobs)]
            )
        blobs.append(np.ascontiguousarray(value))
        return _extension(_ARRAY, [value.dtype.str, list(value.shape), len(blobs) - 1])
    if isinstance(value, BaseException):
        reduced: tuple[Any, ...] = value.__reduce__()  # type: ignore[assignment]
        cls, args = reduced[0], reduced[1]  # (what it is rebuilt from, as a copy would be)
        state = reduced[2] if len(reduced) > 2 else None
        carried = [_to_wire(args, blobs), _to_wire(state, blobs), str(value)]
        return _extension(_ERROR, [cls.__module__, cls.__qualname__, *carried])
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            field.name: _to_wire(getattr(value, field.name), blobs)
            for field in dataclasses.fields(value)
            if field.init
        }
        kind = type(value)
        return _extension(_DATACLASS, [kind.__module__, kind.__qualname__, fields])
    raise TypeError(f"{type(value).__name__} is not carried between processes")


def _extension(code: int, items: Any) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(code, msgspec.msgpack.encode(items))


def _from_wire(data: Any, blobs: list[Any]) -> Any:
    """What ``_to_wire`` made, from its msgpack ``data`` and the buffers of its arrays."""

    def rebuilt(code: int, payload: memoryview) -> Any:
        items = msgspec.msgpack.decode(payload, ext_hook=rebuilt)
        if code == _TUPLE:
            return tuple(items)
        if code == _SET:
            return frozenset(items)
        if code == _PARTS:
            return defaultdict(list, items)
        if code == _ARRAY:
            dtype, shape, index = items
            return np.frombuffer(blobs[index], dtype=np.dtype(dtype)).reshape(shape)
        if code == _OBJECTS:
            shape, values = items
            column = np.empty(len(values), dtype=object)
            column[:] = values
            return column.reshape(shape)
        if code == _DATACLASS:
            module, name, fields = items
            return _known(module, name)(**fields)
        if code == _ERROR:
            return _error(*items)
        raise ValueError(f"unknown extension {code}")

    return msgspec.msgpack.decode(data, ext_hook=rebuilt)


def _known(module: str, name: str) -> Any:
    """A class of profan's (or a built-in exception) by its names, from a module already
    imported (nothing is imported for it: the names come from data); ``ValueError`` for any
    other name."""
    owner = (
        sys.modules.get(module) if module == "builtins" or module.startswith("profan.") else None
    )
    found = getattr(owner, name, None) if owner is not None and "." not in name else None
    if isinstance(found, type) and (
        issubclass(found, BaseException) or dataclasses.is_dataclass(found)
    ):
        return found
    raise ValueError(f"{module}.{name} is not carried between processes")


def _error(module: str, name: str, args: tuple[Any, ...], state: Any, text: str) -> BaseException:
    """The error a worker raised, rebuilt from its class, ``args`` and ``state``;
    one that cannot be (not profan's, not built in) is a ``RuntimeError`` saying what it was."""
    try:
        error: BaseException = _known(module, name)(*args)
        if state:
            error.__dict__.update(state)
    except (TypeError, ValueError):
        return RuntimeError(f"{name}: {text}")
    return error


def _bytes_of(array: np.ndarray) -> memoryview:
    """An array's bytes (it is contiguous), as one flat view."""
    return memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]


def _offsets(sizes: list[int] | tuple[int, ...]) -> list[int]:
    """Where each piece starts in the memory file (each buffer aligned to ``_ALIGN``)."""
    offsets, end = [], 0
    for size in sizes:
        start = -(-end // _ALIGN) * _ALIGN
        offsets.append(start)
        end = start + size
    return offsets


def _mapped(fd: int, sizes: tuple[int, ...]) -> list[Any]:
    """The pieces of ``sizes`` in the memory file ``fd``, as views of its mapping,
    copy-on-write (the views keep it mapped)."""
    offsets = _offsets(sizes)
    total = offsets[-1] + sizes[-1] if sizes else 0
    if os.fstat(fd).st_size < total:
        raise EOFError
    if not total:
        return [bytearray() for _ in sizes]
    view = memoryview(mmap.mmap(fd, total, access=mmap.ACCESS_COPY))
    return [view[offset : offset + size] for offset, size in zip(offsets, sizes, strict=True)]


def _memory_file() -> int | None:
    """A file in memory for a result (Linux), else None (it goes through the socket)."""
    try:
        return os.memfd_create("profan worker result", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None


def _write_all(write: Callable[[memoryview], int | None], view: memoryview) -> None:
    while view.nbytes:
        view = view[write(view) or 0 :]


def _read(channel: socket.socket, size: int) -> bytearray:
    """Exactly ``size`` bytes (``EOFError`` when the other end closes first)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    while view.nbytes:
        count = channel.recv_into(view)
        if not count:
            raise EOFError
        view = view[count:]
    return buffer


@functools.cache
def libc() -> ctypes.CDLL | None:
    """The C library (glibc's ``prctl``, ``malloc_trim``), where there is one."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None

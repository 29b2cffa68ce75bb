"""A host read started before it is needed, in a worker process, while the command does the rest.

A cold ``profan report`` of one big host spends about as long decoding the xplane as it does
importing pandas and the pipeline and parsing the ``--hlo`` dump, and none of the latter needs
the trace.  So a command that will read the trace starts the read first (``start``, from
``profan.report.analysis.pipeline.reading_ahead``: before pandas is even imported) and goes on; the
loader takes it over where it would have read the host itself (``claim``, in
``profan.trace.load``), after parsing the dump.  The worker reads the host exactly as
``xplane.read_host`` does in the loader, so the profile is the same either way.

Only where it pays: one local, uncompressed xplane host of at least ``SPLIT_HOST_BYTES`` (a
smaller one reads faster than a worker starts), no Dask scheduler, and a CPU the machine leaves
idle or ``--workers`` of 2 or more (on a busy machine a second process only adds its start-up).
Otherwise nothing is started and the loader reads as it always did.

A read nobody claims (the report came from the cache after all, or the command failed first)
is stopped by whoever started it (``HostRead.stop``): no worker outlives the command.  The
readers (numpy, protobuf's schema, ``profan.trace.xplane``) are imported here, just before the
fork, only when a worker is started: the command needs them itself later, and a worker forked
with them loaded does not import them a second time (~0.2 s of CPU, which a busy machine feels).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from profan.errors import TraceError

if TYPE_CHECKING:
    from profan.trace.discover import Run
    from profan.trace.planes import HostTrace

# A host file this big or bigger is worth a worker process of its own: starting one and sending
# the columns back cost ~0.1 s.  (``profan.trace.load`` shares out such a host by the same rule.)
SPLIT_HOST_BYTES = 32 * 2**20


@dataclass(slots=True)
class HostRead:
    """The read of one host's xplane file, running in a worker process (``pid``) that sends
    its result through the pipe ``fd``, the columns' bytes through the memory file
    ``blob_file`` where there is one (``profan.trace.transfer``)."""

    path: str
    host: str
    pid: int
    fd: int
    blob_file: int | None = None
    claimed: bool = False
    _received: bool = False
    _reaped: bool = False

    def result(self) -> HostTrace:
        """The host as ``xplane.read_host(path, host)`` reads it (waits for the worker); its
        ``TraceError`` is raised here."""
        from profan.trace.transfer import receive

        with os.fdopen(self.fd, "rb", buffering=0) as stream:
            self._received = True
            try:
                found = receive(stream, self.blob_file)
            except EOFError:
                raise self._died() from None
            finally:
                self._close_blob_file()
        if isinstance(found, tuple):
            raise TraceError(*found)
        return found

    def _died(self) -> Exception:
        """The error of the worker that ended without its result (reaped now)."""
        from profan.trace.executors import died_error

        _, status = os.waitpid(self.pid, 0)
        self._reaped = True
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return died_error(f"host {self.host} ({self.path})", code)

    def stop(self) -> None:
        """End the worker (at once when its result was not taken) and reap it."""
        if not self._received:
            self._received = True
            os.close(self.fd)
            self._close_blob_file()
            os.kill(self.pid, signal.SIGTERM)
        if not self._reaped:
            self._reaped = True
            os.waitpid(self.pid, 0)
        if self in _STARTED:
            _STARTED.remove(self)

    def _close_blob_file(self) -> None:
        if self.blob_file is not None:
            os.close(self.blob_file)  # (a mapping of it stays)
            self.blob_file = None


_STARTED: list[HostRead] = []


def kill_started() -> None:
    """Kill every read started and not reaped (the CLI's SIGTERM handler: no waiting)."""
    for started in _STARTED:
        if not started._reaped:
            with contextlib.suppress(OSError):  # (already gone)
                os.kill(started.pid, signal.SIGKILL)


def host_processes(
    path: str, fmt: str | None, size: int, workers: int | None, scheduler: str | None
) -> int:
    """How many processes should read a run's one host: 1 unless it is a big local xplane file
    (``SPLIT_HOST_BYTES`` or more, uncompressed: a remote or compressed file would be fetched or
    decompressed once per process) and no Dask scheduler reads it; then the workers asked for
    (``--workers 1``: one), else this process and one more per CPU the machine leaves idle now
    (on a busy machine a second process only adds its start-up and its transfer), at most one
    per CPU."""
    from profan.trace.executors import idle_cpus
    from profan.trace.storage import is_local_plain

    if scheduler or fmt != "xplane" or size < SPLIT_HOST_BYTES or not is_local_plain(path):
        return 1
    wanted = workers or 1 + idle_cpus()
    return max(1, min(wanted, os.cpu_count() or 1))


def start(run: Run, workers: int | None = None, scheduler: str | None = None) -> HostRead | None:
    """Start reading ``run``'s one host in a worker process, when that can pay with these
    ``workers`` and ``scheduler`` (``LoadOptions``' fields; see the module docstring); None
    otherwise."""
    from profan.cache.store import finish_writes

    if len(run.files) != 1:
        return None
    ((host, file),) = run.files.items()
    path = str(file)
    try:
        size = os.stat(path).st_size
    except OSError:
        return None  # the loader reports it
    if host_processes(path, run.formats.get(host), size, workers, scheduler) < 2:
        return None
    # A forked worker starts at once and needs nothing pickled to it; forking is only safe
    # while this process runs no other thread (an earlier command's cache writes are waited for).
    finish_writes()
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    # for the worker and, later, for this process:
    import profan.trace.transfer
    import profan.trace.xplane  # noqa: F401
    from profan.trace.executors import die_with_parent

    read_end, write_end = os.pipe()
    _widen(write_end)
    blob_file = _memory_file()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the command
        code = 1
        try:
            die_with_parent(parent)  # (a reader left behind went on for 40 s at 3.5 GB)
            os.close(read_end)
            _read(path, host, write_end, blob_file)
            code = 0
        except BaseException:
            import traceback  # (not imported by a command that reads nothing)

            traceback.print_exc()
        finally:
            os._exit(code)  # no atexit handlers, no flush of the command's output buffers
    os.close(write_end)
    started = HostRead(path, host, pid, read_end, blob_file)
    _STARTED.append(started)
    return started


def _widen(fd: int) -> None:
    """A pipe of 1 MiB where Linux allows it (64 KiB by default: the columns, tens of MB, then
    cross in many small writes, each a switch between the two processes)."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 2**20)
    except (ImportError, AttributeError, OSError):
        pass


def _memory_file() -> int | None:
    """A file in memory for the worker to write the columns into (Linux), else None (they go
    through the pipe)."""
    try:
        return os.memfd_create("profan host read", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None


def reading(run: Run) -> bool:
    """Whether the one host of ``run`` is being read ahead (started, not claimed yet)."""
    if len(run.files) != 1:
        return False
    ((host, file),) = run.files.items()
    return any(
        started.path == str(file) and started.host == host and not started.claimed
        for started in _STARTED
    )


def claim(path: str, host: str) -> HostRead | None:
    """The read of ``path`` (host ``host``, every column) started by ``start`` and not taken
    yet: the caller now owns its result."""
    for started in _STARTED:
        if started.path == path and started.host == host and not started.claimed:
            started.claimed = True
            return started
    return None


def _read(path: str, host: str, fd: int, blob_file: int | None) -> None:
    """The worker: read the host and write it to ``fd`` (its columns to ``blob_file`` where
    there is one: ``profan.trace.transfer``), or the path and reason of its ``TraceError``."""
    from profan.trace.transfer import send
    from profan.trace.xplane import read_host

    with os.fdopen(fd, "wb", buffering=0) as stream:
        try:
            trace = read_host(path, host, coded=True)
        except TraceError as error:
            send(stream, None, (error.path, error.reason))
        else:
            send(stream, trace, blob_file=blob_file)
    sys.stderr.flush()

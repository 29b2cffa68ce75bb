"""A host read started before it is needed, in a worker process, while the command does the rest.

A cold ``profan report`` of one big host spends about as long decoding the xplane as it does
importing pandas and the pipeline and parsing the ``--hlo`` dump, and none of the latter needs
the trace.  So a command that will read the trace starts the read first (``start``, from
``profan.report.analysis.pipeline.reading_ahead``: before pandas is even imported) and goes on; the
loader takes it over where it would have read the host itself (``claim``, in
``profan.trace.load``), after parsing the dump.  The worker (``profan.trace.workers``: the same
processes, transport and death handling as every read in another process) reads the host
exactly as ``xplane.read_host`` does in the loader, so the profile is the same either way.

Only where it pays: one local, uncompressed xplane host of at least ``SPLIT_HOST_BYTES`` (a
smaller one reads faster than a worker starts), no Dask scheduler, and a CPU the machine leaves
idle or ``--workers`` of 2 or more (on a busy machine a second process only adds its start-up).
Otherwise nothing is started and the loader reads as it always did.

A read nobody claims (the report came from the cache after all, or the command failed first)
is stopped by whoever started it (``HostRead.stop``): no worker outlives the command.  The
worker is forked only while this process runs no other thread (a lock another thread holds
would be copied held).  The readers (numpy, protobuf's schema, ``profan.trace.xplane``) are
imported here, just before the fork, only when a worker is started: the command needs them
itself later, and a worker forked with them loaded does not import them a second time (~0.2 s
of CPU, which a busy machine feels).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from profan.trace import workers as processes

if TYPE_CHECKING:
    from profan.trace.discover import Run
    from profan.trace.planes import HostTrace

# A host file this big or bigger is worth a worker process of its own: starting one and sending
# the columns back cost ~0.1 s.  (``profan.trace.load`` shares out such a host by the same rule.)
SPLIT_HOST_BYTES = 32 * 2**20


@dataclass(slots=True)
class HostRead:
    """The read of one host's xplane file, running in ``worker``."""

    path: str
    host: str
    worker: processes.Worker
    claimed: bool = False

    @property
    def pid(self) -> int:
        return self.worker.pid

    def result(self) -> HostTrace:
        """The host as ``xplane.read_host(path, host)`` reads it (waits for the worker); its
        ``TraceError`` is raised here."""
        found: HostTrace = self.worker.result()
        return found

    def stop(self) -> None:
        """End the worker (at once when its result was not taken) and reap it."""
        self.worker.close()
        if self in _STARTED:
            _STARTED.remove(self)


_STARTED: list[HostRead] = []


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
    # Forking is only safe while this process runs no other thread (an earlier command's cache
    # writes are waited for).
    finish_writes()
    if threading.active_count() > 1:
        return None
    # for the worker and, later, for this process:
    import profan.trace.xplane  # noqa: F401

    worker = processes.start(read_whole)
    if worker is None:
        return None
    worker.submit((path, host))
    started = HostRead(path, host, worker)
    _STARTED.append(started)
    return started


def read_whole(task: tuple[str, str]) -> HostTrace:
    """The worker's task: one host, every column (its string columns coded)."""
    from profan.trace.xplane import read_host

    path, host = task
    return read_host(path, host, coded=True)


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

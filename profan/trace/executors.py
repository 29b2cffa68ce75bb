"""Running one task per host: local worker processes or a Dask cluster, with progress.

Each host's file is read in the process that runs its task (a local worker process,
``profan.trace.workers``, or a Dask worker given a scheduler address; workers read remote paths
themselves).  Only the task's result crosses the process boundary, and results come back in
task (host) order, so a Dask run and a local run give the same profile.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from profan.errors import TraceError
from profan.trace import workers as processes

CONNECT_TIMEOUT_S = 30
Task = TypeVar("Task")


class Progress:
    """``hosts done/total, bytes read`` on stderr, only when asked or on a terminal outside CI."""

    def __init__(self, total: int, total_bytes: int, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty() and not os.environ.get("CI")
        self.enabled = enabled and total > 1
        self.total, self.total_bytes = total, total_bytes
        self.done, self.bytes_done = 0, 0
        self.started = time.perf_counter()

    def step(self, nbytes: int) -> None:
        self.done += 1
        self.bytes_done += nbytes
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            end = "\n" if self.done == self.total else "\r"
            print(
                f"profan: read {self.done}/{self.total} hosts, "
                f"{self.bytes_done / 1e6:.0f}/{self.total_bytes / 1e6:.0f} MB "
                f"[{elapsed:.1f}s]",
                end=end,
                file=sys.stderr,
                flush=True,
            )


def idle_cpus() -> int:
    """CPUs the machine leaves idle now beside the one this process runs on.  Linux says what
    runs now (``running_now``); elsewhere the 1-minute load average stands in, rounded up (it
    also counts the commands of the last minute, the user's own included: a report run in a
    loop sees its own last run there, which is why it is not the first choice).  0 where
    neither is known."""
    others = running_now()
    if others is not None:
        return max(0, (os.cpu_count() or 1) - 1 - others)
    try:
        busy = math.ceil(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0
    return max(0, (os.cpu_count() or 1) - busy)


_LOADAVG = "/proc/loadavg"


def running_now(samples: int = 5) -> int | None:
    """Threads running or ready to run on the machine besides this one: the least of
    ``samples`` readings of ``/proc/loadavg``'s fourth field (``running/total``, the reader
    included) a millisecond apart.  A busy process is runnable in every reading; the least
    leaves out what only passes by (the kernel writing back the last command's files).  None
    where there is no such file."""
    least = None
    for sample in range(samples):
        if sample:
            time.sleep(0.001)
        try:
            running = _running_reading() - 1
        except (OSError, IndexError, ValueError):
            return None
        least = running if least is None else min(least, running)
    return least


def _running_reading() -> int:
    with open(_LOADAVG) as handle:
        return int(handle.read().split()[3].split("/")[0])


def map_hosts(
    function: Callable[[Task], Any],
    tasks: Sequence[Task],
    sizes: Sequence[int],
    *,
    workers: int | None,
    scheduler: str | None,
    progress: Progress,
) -> list[Any]:
    """``function`` over ``tasks`` (one per host), results in task order: on ``scheduler``'s
    Dask workers, else ``workers`` at once here (None: one per CPU; memory grows with this
    count, not with the number of hosts).  An error raised in a worker is raised here
    (profan's errors pickle whole)."""
    results: list[Any] = [None] * len(tasks)
    collected = gc.isenabled()
    if len(tasks) > 1:
        # host after host, here and in the workers forked now: the cyclic collector runs, also
        # where the command turned it off (``profan.cli.run``)
        gc.enable()
    try:
        if scheduler:
            results = _map_on_dask(function, tasks, sizes, scheduler, progress)
        else:
            count = min(len(tasks), workers or os.cpu_count() or 1)
            results = map_local(function, tasks, count, lambda index: progress.step(sizes[index]))
    finally:
        if not collected:
            gc.disable()
    return results


def map_local(
    function: Callable[[Task], Any],
    tasks: Sequence[Task],
    count: int,
    done: Callable[[int], None] | None = None,
) -> list[Any]:
    """``function`` over ``tasks``, ``count`` at a time: ``count - 1`` worker processes
    (``profan.trace.workers``), and this process itself; results in task order, ``done(index)``
    as each comes.

    This process would otherwise sit idle holding its interpreter (~90 MB) while every worker
    holds one host: running tasks here too keeps the run's memory (the sum over its processes)
    to ``count`` hosts being read, not ``count`` hosts plus an idle interpreter.  The workers
    are kept busy first (task by task, in order), so a worker never waits for this process's
    task: with ``count`` tasks, this process runs the last.  Each result is received in this
    thread (a helper thread would unpickle it into its own malloc arena, which keeps the memory
    after the result is freed: a share of the big trace left the process ~27 MB larger)."""
    results: list[Any] = [None] * len(tasks)
    started: list[processes.Worker] = []
    idle: list[processes.Worker] = []
    busy: dict[processes.Worker, int] = {}

    def collect(ready: list[processes.Worker]) -> None:
        for worker in ready:
            index = busy.pop(worker)
            results[index] = worker.result()
            idle.append(worker)
            if done is not None:
                done(index)

    try:
        for _ in range(min(count, len(tasks)) - 1):
            worker = processes.start(function)
            if worker is None:
                break
            started.append(worker)
        idle.extend(reversed(started))  # (the first started takes the first task)
        for index, task in enumerate(tasks):
            if idle:
                worker = idle.pop()
                worker.submit(task)
                busy[worker] = index
                continue
            results[index] = function(task)  # this process's share
            if done is not None:
                done(index)
            collect(processes.ready(busy, 0))
        while busy:
            collect(processes.ready(busy, None))
    finally:
        for worker in started:  # (one still busy here: an error ended the map; killed)
            worker.close()
    return results


def _map_on_dask(
    function: Callable[[Any], Any],
    tasks: Sequence[Any],
    sizes: Sequence[int],
    scheduler: str,
    progress: Progress,
) -> list[Any]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise TraceError(
            scheduler, "--scheduler needs the [dask] extra: pip install 'profan[dask]'"
        ) from None
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as error:
        raise TraceError(scheduler, f"cannot reach the Dask scheduler: {error}") from None
    try:
        futures = client.map(function, list(tasks), pure=False)
        index_of = {future.key: index for index, future in enumerate(futures)}
        results: list[Any] = [None] * len(tasks)
        for future in dask_completed(futures):
            index = index_of[future.key]
            results[index] = future.result()
            progress.step(sizes[index])
        return results
    finally:
        client.close()


def release_freed_memory() -> None:
    """Give the heap that finished work freed back to the OS before the next big read: after
    this process ran map tasks, glibc keeps their freed arenas mapped (RSS stays ~120 MB higher
    on the big trace) unless asked to trim."""
    gc.collect()
    trim_heap()


def trim_heap() -> None:
    """Return the heap's free pages to the OS (glibc ``malloc_trim``; a few ms, a no-op without
    glibc).  Between the phases of reading a host: each phase frees large temporaries that leave
    holes glibc keeps mapped and, fragmented, cannot reuse for the next phase's arrays, so
    without it the phases stack up (a map task on the big trace peaked at ~210 MB, with it
    ~160 MB)."""
    libc = processes.libc()
    if libc is not None:
        libc.malloc_trim(0)

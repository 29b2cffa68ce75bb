"""Running one task per host: local worker processes or a Dask cluster, with progress.

Each host's file is read in the process that runs its task (a local worker process, or a Dask
worker given a scheduler address; workers read remote paths themselves).  Only the task's result
crosses the process boundary, and results come back in task (host) order, so a Dask run and a
local run give the same profile.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from profan.errors import ConfigError, TraceError

SCHEDULER_ENV = "PROFAN_SCHEDULER"
WORKERS_ENV = "PROFAN_WORKERS"
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


def scheduler_address(option: str | None) -> str | None:
    """The Dask scheduler to use: the option, else ``PROFAN_SCHEDULER``, else none (local)."""
    return option or os.environ.get(SCHEDULER_ENV) or None


def parse_worker_count(text: str) -> int:
    """A ``--workers`` / ``PROFAN_WORKERS`` value: a whole number of at least 1 (ValueError
    otherwise)."""
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def worker_count(option: int | None) -> int | None:
    """How many hosts to read at once locally: the option, else ``PROFAN_WORKERS``, else None
    (one per CPU).  Memory grows with this count, not with the number of hosts."""
    if option is not None:
        return option
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return None
    try:
        return parse_worker_count(text)
    except ValueError as error:
        raise ConfigError(f"{WORKERS_ENV}={text!r}: {error}") from None


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
    """``function`` over ``tasks`` (one per host), results in task order.  A result that is a
    ``(path, reason)`` tuple is a ``TraceError`` raised in the worker: raised here again."""
    results: list[Any] = [None] * len(tasks)
    collected = gc.isenabled()
    if len(tasks) > 1:
        # host after host, here and in the workers forked now: the cyclic collector runs, also
        # where the command turned it off (``profan.cli.run``)
        gc.enable()
    try:
        if scheduler:
            results = _map_on_dask(function, tasks, sizes, scheduler, progress)
        elif len(tasks) == 1 or (workers := worker_count(workers)) == 1:
            for index, task in enumerate(tasks):
                results[index] = function(task)
                progress.step(sizes[index])
        else:
            count = min(len(tasks), workers or os.cpu_count() or 1)
            _map_with_parent(function, tasks, sizes, count, progress, results)
    finally:
        if not collected:
            gc.disable()
    for result in results:
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], str):
            raise TraceError(*result)
    return results


def _map_with_parent(
    function: Callable[[Task], Any],
    tasks: Sequence[Task],
    sizes: Sequence[int],
    count: int,
    progress: Progress,
    results: list[Any],
) -> None:
    """``count`` tasks at a time: ``count - 1`` worker processes, and this process itself.

    The parent would otherwise sit idle holding its interpreter (~90 MB) while every worker
    holds one host: running tasks here too keeps the run's memory (the sum over its processes)
    to ``count`` hosts being read, not ``count`` hosts plus an idle interpreter.  The pool is
    kept full first, so a worker never waits for the parent's task.
    """
    in_flight: dict[Future[Any], int] = {}

    def collect(done: Iterable[Future[Any]]) -> None:
        for future in done:
            index = in_flight.pop(future)
            results[index] = future.result()
            progress.step(sizes[index])

    with ProcessPoolExecutor(max_workers=max(1, count - 1)) as pool:
        for index in range(len(tasks)):
            if len(in_flight) < count - 1:
                in_flight[pool.submit(function, tasks[index])] = index
                continue
            results[index] = function(tasks[index])  # the parent's share
            progress.step(sizes[index])
            collect([future for future in in_flight if future.done()])
        collect(as_completed(list(in_flight)))


def map_beside(function: Callable[[Task], Any], tasks: Sequence[Task]) -> list[Any]:
    """``function`` over ``tasks`` at once: each but the last in a worker process started now,
    the last in this process; results in task order.

    Each result is received and unpickled in this thread: a pool's helper thread would unpickle
    it into that thread's malloc arena, which keeps the memory after the result is freed (a
    share of the big trace left the process ~27 MB larger for the rest of the run)."""
    context = multiprocessing.get_context()
    started = []
    for task in tasks[:-1]:
        receive, send = context.Pipe(duplex=False)
        process = context.Process(target=_send_result, args=(function, task, send), daemon=True)
        process.start()
        send.close()
        started.append((process, receive))
    last = function(tasks[-1])
    results = []
    for process, receive in started:
        try:
            results.append(receive.recv())
        except EOFError:
            raise RuntimeError(f"worker process {process.pid} died without a result") from None
        finally:
            receive.close()
            process.join()
    return [*results, last]


def _send_result(function: Callable[[Task], Any], task: Task, send: Connection) -> None:
    try:
        send.send(function(task))
    finally:
        send.close()


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
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None

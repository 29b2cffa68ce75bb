"""Running one task per host: local worker processes or a Dask cluster, with progress.

Each host's file is read in the process that runs its task (a local worker process, or a Dask
worker given a scheduler address; workers read remote paths themselves).  Only the task's result
crosses the process boundary, and results come back in task (host) order, so a Dask run and a
local run give the same profile.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import math
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from profan.errors import EXIT_INTERNAL, ProfanError, TraceError

CONNECT_TIMEOUT_S = 30
Task = TypeVar("Task")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h

# Worker processes alive now (pool workers and ``map_beside``'s), for ``stop_workers``.
_LIVE: dict[int, multiprocessing.process.BaseProcess] = {}


class WorkerDiedError(ProfanError):
    """A worker process died under the command (killed, or crashed): which host it read, and
    why when the signal says (exit 2 for the out-of-memory killer's SIGKILL, else 3: a bug)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def die_with_parent(parent: int) -> None:
    """In a worker just forked from ``parent``: end when the parent ends, however it ends.

    Linux sends the worker SIGKILL when its parent dies (``PR_SET_PDEATHSIG``; a worker holds
    nothing that needs cleaning up); the parent may have died before the call, hence the check
    of ``getppid``.  The parent's SIGTERM handler (``profan.cli``) is not the worker's: SIGTERM
    ends it at once.  Elsewhere only the handler is reset."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    libc = _libc()
    if libc is not None and sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def stop_workers() -> None:
    """Kill every worker process of this command now (the CLI's SIGTERM handler)."""
    for pid in list(_LIVE):
        with contextlib.suppress(OSError):  # (already gone)
            os.kill(pid, signal.SIGKILL)
    _LIVE.clear()


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
        elif len(tasks) == 1 or workers == 1:
            for index, task in enumerate(tasks):
                results[index] = function(task)
                progress.step(sizes[index])
        else:
            count = min(len(tasks), workers or os.cpu_count() or 1)
            _map_with_parent(function, tasks, sizes, count, progress, results)
    finally:
        if not collected:
            gc.disable()
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
    reading: Any = multiprocessing.RawArray("q", len(tasks))  # task index -> its worker's pid

    def collect(done: Iterable[Future[Any]]) -> None:
        for future in done:
            index = in_flight[future]
            results[index] = future.result()  # (a broken pool raises while it is in flight)
            del in_flight[future]
            progress.step(sizes[index])

    pool = ProcessPoolExecutor(
        max_workers=max(1, count - 1),
        initializer=_start_worker,
        initargs=(os.getpid(), reading),  # (inherited by the forked worker, not pickled)
    )
    try:
        for index in range(len(tasks)):
            if len(in_flight) < count - 1:
                future = pool.submit(_run_task, function, tasks[index], index)
                in_flight[future] = index
                _LIVE.update(pool._processes)  # (started by submit)
                continue
            results[index] = function(tasks[index])  # the parent's share
            progress.step(sizes[index])
            collect([future for future in in_flight if future.done()])
            _check_workers(pool)
        while in_flight:
            done, _ = wait(list(in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
            collect(done)
            _check_workers(pool)
    except BrokenProcessPool as broken:
        dead = getattr(broken, "dead", None)
        raise _worker_died(tasks, reading, list(in_flight.values()), dead) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for pid in list(_LIVE):
            if _LIVE[pid].exitcode is not None:
                del _LIVE[pid]


_READING: Any = None  # in a pool worker: the parent's task index -> worker pid array


def _start_worker(parent: int, reading: Any) -> None:
    global _READING
    die_with_parent(parent)
    _READING = reading


def _check_workers(pool: ProcessPoolExecutor) -> None:
    """Raise ``BrokenProcessPool`` when a worker of ``pool`` died.  The pool finds out by
    itself, except when the worker died writing its result: its manager thread then waits for
    the rest of the message forever (the command hung).  So the other workers are killed and
    the parent's end of the result pipe closed, which ends that wait too."""
    workers = list(pool._processes.values())
    dead = {w.pid: w.exitcode for w in workers if w.exitcode not in (None, 0)}
    if not dead:
        return
    for worker in workers:
        if worker.exitcode is None:
            worker.kill()
            worker.join()
    pool._result_queue._writer.close()  # type: ignore[attr-defined]
    broken = BrokenProcessPool("a worker process died")
    broken.dead = dead  # type: ignore[attr-defined]  # (before the others were killed)
    raise broken


def _run_task(function: Callable[[Task], Any], task: Task, index: int) -> Any:
    """``function(task)`` in a pool worker, which first says which task it reads."""
    _READING[index] = os.getpid()
    return function(task)


def _worker_died(
    tasks: Sequence[Any], reading: Any, in_flight: list[int], dead: dict[int, int] | None = None
) -> WorkerDiedError:
    """The error of a pool that broke: a worker died (``dead``: pid -> exit code, when known),
    reading the task that names it."""
    if dead is None:
        dead = {
            pid: process.exitcode
            for pid, process in _LIVE.items()
            if process.exitcode not in (None, 0, -signal.SIGTERM)  # (SIGTERM: the pool's)
        }
    # the task whose worker died; else the only one in flight whose worker had not said yet
    index = next((i for i in in_flight if reading[i] in dead), None)
    unsaid = [i for i in in_flight if not reading[i]]
    if index is None and len(unsaid) == 1:
        index = unsaid[0]
    what = "a host" if index is None else _describe(tasks[index])
    code = dead.get(reading[index]) if index is not None else None
    if code is None:
        code = next(iter(dead.values()), None)
    return died_error(what, code)


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


def _describe(task: Any) -> str:
    """A task for a message: a ``(path, host, ...)`` read task as its host and file."""
    if isinstance(task, tuple) and len(task) >= 2 and all(isinstance(t, str) for t in task[:2]):
        return f"host {task[1]} ({task[0]})"
    return repr(task)[:200]


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
        process = context.Process(
            target=_send_result, args=(function, task, send, os.getpid()), daemon=True
        )
        process.start()
        _LIVE[_pid(process)] = process
        send.close()
        started.append((process, receive))
    last = function(tasks[-1])
    results = []
    for process, receive in started:
        try:
            found = receive.recv()
            if isinstance(found, _Raised):
                raise found.error
            results.append(found)
        except EOFError:
            process.join()
            raise _share_died(process, tasks[len(results)]) from None
        finally:
            receive.close()
            process.join()
            _LIVE.pop(_pid(process), None)
    return [*results, last]


def _share_died(process: multiprocessing.process.BaseProcess, task: Any) -> WorkerDiedError:
    """The error of a ``map_beside`` process that died without its result."""
    _LIVE[_pid(process)] = process  # (read by _worker_died as a pool's worker)
    return _worker_died([task], [process.pid], [0])


def _pid(process: multiprocessing.process.BaseProcess) -> int:
    """A started process's id (``pid`` is None only before ``start``)."""
    pid = process.pid
    assert pid is not None
    return pid


def _send_result(
    function: Callable[[Task], Any], task: Task, send: Connection, parent: int
) -> None:
    die_with_parent(parent)
    try:
        try:
            result: Any = function(task)
        except Exception as error:  # raised again in the parent (profan's errors pickle whole)
            result = _Raised(error)
        send.send(result)
    finally:
        send.close()


@dataclass(frozen=True)
class _Raised:
    """What a ``map_beside`` process sends back when its task raised."""

    error: Exception


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

"""Many hosts: the per-host map (local processes or a Dask cluster), progress, the reduced form.

**Map.**  Each host's file is read in the process that runs its task (a local worker process,
or a Dask worker given ``scheduler``; workers read remote paths themselves).  Only the task's
result crosses the process boundary, and results are put in host order, so a Dask run and a
local run give the same profile.

**Two forms of a profile** (``LoadOptions.form``):

* ``"events"``: every op execution of every host, one row each (``Profile.ops``).  Used for one
  host, and for several whose files add up to at most ``LoadOptions.reduce_above_bytes``
  (256 MiB): memory grows with the events of all hosts.
* ``"reduced"``: each host is read and reduced where it is read, to its ``HostSummary`` (per-step
  windows, every shared collective's start and end, idle time, op time) plus its step time; the
  parent keeps only those.  The per-event tables (``ops``, ``steps``, ``async_ops``) are then
  those of one representative host, the median host by median step time, read once more in the
  parent; the cross-host view (``Profile.hosts``) covers every host, and ``Profile.device``
  counts every device.  Peak memory is that of reading one host, however many hosts there are.
* ``"auto"`` (default): ``"reduced"`` for two or more hosts above the byte threshold, else
  ``"events"``.  Ask for the other form with ``profan.load(path, form="events")`` (or
  ``"reduced"``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from profan.errors import TraceError
from profan.trace.hosts import HostSummary, summarize_host

SCHEDULER_ENV = "PROFAN_SCHEDULER"
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
    if scheduler:
        results = _map_on_dask(function, tasks, sizes, scheduler, progress)
    elif len(tasks) == 1 or workers == 1:
        for index, task in enumerate(tasks):
            results[index] = function(task)
            progress.step(sizes[index])
    else:
        count = min(len(tasks), workers or os.cpu_count() or 1)
        with ProcessPoolExecutor(max_workers=count) as pool:
            futures = {pool.submit(function, task): index for index, task in enumerate(tasks)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                progress.step(sizes[futures[future]])
    for result in results:
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], str):
            raise TraceError(*result)
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


# ------------------------------------------------------------------------- reduced form


@dataclass(slots=True)
class HostResult:
    """What the map of the reduced form sends back for one host."""

    host: str
    summary: HostSummary
    step_time_median_s: float
    kind: str
    devices: int
    events: int


def summarize_file(task: tuple[str, str, str | None, bool]) -> HostResult | tuple[str, str]:
    """Map task of the reduced form: read one host's file here and reduce it."""
    from profan.trace.load import load

    path, host, hlo, use_cache = task
    try:
        profile = load(path, hlo=hlo, workers=1, use_cache=use_cache, form="events")
    except TraceError as error:
        return (error.path, error.reason)
    summary = summarize_host(host, profile.ops, profile.origin_ns, profile.modules)
    durations = profile.steps["duration_s"].to_numpy(dtype=float) if len(profile.steps) else []
    return HostResult(
        host=host,
        summary=summary,
        step_time_median_s=float(np.median(durations)) if len(durations) else 0.0,
        kind=profile.device.kind,
        devices=profile.device.count,
        events=len(profile.ops),
    )


def representative(results: list[HostResult]) -> HostResult:
    """The median host by median step time (the lower median; ties by host name)."""
    ordered = sorted(results, key=lambda r: (r.step_time_median_s, r.host))
    return ordered[(len(ordered) - 1) // 2]

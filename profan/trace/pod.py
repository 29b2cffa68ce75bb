"""Many hosts: the two forms of a profile, and the reduced one (map -> reduce).

The map runs through ``profan.trace.executors`` (local processes or a Dask cluster).

**Two forms of a profile** (``LoadOptions.form``):

* ``"events"``: every op execution of every host, one row each (``Profile.ops``).  Used for one
  host, and for several whose files add up to at most ``LoadOptions.reduce_above_bytes``
  (256 MiB): memory grows with the events of all hosts.
* ``"reduced"``: each host is read and reduced where it is read, to its ``HostSummary`` (per-step
  windows, every shared collective's start and end, idle time, op time) plus its step time; the
  parent keeps only those.  The per-event tables (``ops``, ``steps``, ``async_ops``) are then
  those of one representative host, the median host by median step time, read once more in the
  parent; the cross-host view (``Profile.hosts``) covers every host (and each host's devices),
  ``Profile.device.hosts`` names every host, ``Profile.device.count`` is that host's devices.
  Each process (the parent and ``workers - 1`` worker processes) reads one host at a time, so
  the run's memory is that of ``workers`` host reads however many hosts there are (``workers``:
  ``LoadOptions.workers``, ``--workers`` or ``$PROFAN_WORKERS``, else one per CPU; measured in
  ``benchmarks/pod_scale.py``).
* ``"auto"`` (default): ``"reduced"`` for two or more hosts above the byte threshold, else
  ``"events"``.  Ask for the other form with ``profan.load(path, form="events")`` (or
  ``"reduced"``).

**Through the cache** (``LoadOptions.use_cache``, default on; ``profan.cache``): the events form
of a run is stored whole (``load_events_cached``), keyed by the content of every host file and
of ``--hlo``; in the reduced form each host's result is stored apart, keyed by its own file, so
a pod whose hosts are unchanged reads no xplane but the median host's, and that one comes from
the cache too.  Only the parent reads and writes the cache; the map runs only for the hosts it
does not hold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from profan.cache.keys import digest_behind, versioned
from profan.hlo.model import Module
from profan.trace.discover import Run
from profan.trace.executors import Progress, map_hosts, release_freed_memory
from profan.trace.fingerprint import Fingerprint, run_inputs
from profan.trace.hosts import HostSummary, analyse_hosts, summarize_host
from profan.trace.load import load_events
from profan.trace.options import LoadOptions
from profan.trace.prefetch import reading
from profan.trace.profile import Profile
from profan.trace.stored import read_host_result, read_profile, write_host_result, write_profile

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


# The columns of ``Profile.ops`` that ``summarize_host`` reads: the map builds no others.
SUMMARY_COLUMNS = ("host", "device", "module_key", "op_name", "step", "start_s", "duration_s")


def summarize_file(task: tuple[str, str, str | None, bool]) -> HostResult:
    """Map task of the reduced form: read one host's file here and reduce it."""
    path, host, hlo, use_cache = task
    profile = load_events(
        path, LoadOptions(hlo=hlo, workers=1, use_cache=use_cache), columns=SUMMARY_COLUMNS
    )
    summary = summarize_host(host, profile.ops, profile.origin_ns, profile.instruction)
    durations = profile.steps["duration_s"].to_numpy(dtype=float) if len(profile.steps) else []
    result = HostResult(
        host=host,
        summary=summary,
        step_time_median_s=float(np.median(durations)) if len(durations) else 0.0,
        kind=profile.device.kind,
        devices=profile.device.count,
        events=len(profile.ops),
    )
    del profile
    release_freed_memory()  # the next host read in this process starts from a trimmed heap
    return result


def load_events_cached(
    path: Any,
    opts: LoadOptions,
    found: Run,
    progress: Progress | None = None,
    dumped: list[Module] | None = None,
    fingerprint: Fingerprint | None = None,
) -> Profile:
    """``load_events``, reused from the cache when the run's files and ``--hlo`` are unchanged
    (and stored there after a read).  ``dumped``: the modules of ``--hlo``, parsed already;
    ``fingerprint``: the key parts of ``path``, ``found`` and ``--hlo``, as far as the caller
    took them already.

    A trace file the cache has not seen as it is now, read ahead by a worker (``prefetch``), is
    not looked up: only the same bytes written again at the same path could be found, and its
    hash would wait for the read.  It is hashed in a thread as the read is taken over, on the
    CPU the worker leaves, and the profile stored under that key."""
    fingerprint = fingerprint or Fingerprint(str(path), found, opts.hlo)
    deferred = opts.use_cache and reading(found) and not fingerprint.seen_before()
    key = fingerprint.events_key() if opts.use_cache and not deferred else None
    if key is not None:
        profile = read_profile(key)
        if profile is not None:
            return profile
    if deferred:
        digest_behind(found.files.values())
    profile = load_events(path, opts, found, progress, dumped=dumped)
    if deferred:
        key = fingerprint.events_key()
    if key is not None:
        # written while the profile is scored (scoring adds columns to no table of it)
        write_profile(key, profile, background=True)
    return profile


def _host_key(host: str, file: Any, hlo_parts: Any) -> str | None:
    """A host's result key: its file and the ``--hlo`` input (``hlo_inputs``, taken once)."""
    files = run_inputs({host: file}, {})
    if files is None or hlo_parts is None:
        return None
    return versioned("host", [files, hlo_parts])


def _map_uncached(
    tasks: list[tuple[str, str, str | None, bool]],
    fingerprint: Fingerprint,
    sizes: list[int],
    opts: LoadOptions,
    progress: Progress,
) -> list[HostResult]:
    """The map over the hosts the cache does not hold; every host's result, in host order."""
    keys: list[str | None] = [None] * len(tasks)
    if opts.use_cache:
        files = fingerprint.run.files
        hlo_parts = fingerprint.dump()  # the --hlo dump is one input, listed and hashed once
        keys = [_host_key(host, files[host], hlo_parts) for _, host, _, _ in tasks]
    results: list[HostResult | None] = [
        None if key is None else read_host_result(key, HostResult) for key in keys
    ]
    todo = [index for index, result in enumerate(results) if result is None]
    for index, result in enumerate(results):
        if result is not None:
            progress.step(sizes[index])
    if todo:
        mapped = map_hosts(
            summarize_file,
            [tasks[index] for index in todo],
            [sizes[index] for index in todo],
            workers=opts.workers,
            scheduler=opts.scheduler,
            progress=progress,
        )
        for index, result in zip(todo, mapped, strict=True):
            results[index] = result
            key = keys[index]
            if key is not None:
                write_host_result(key, result)
    return [result for result in results if result is not None]


def representative(results: list[HostResult]) -> HostResult:
    """The median host by median step time (the lower median; ties by host name)."""
    ordered = sorted(results, key=lambda r: (r.step_time_median_s, r.host))
    return ordered[(len(ordered) - 1) // 2]


def load_reduced(
    path: Any,
    found: Run,
    opts: LoadOptions,
    sizes: list[int],
    progress: Progress,
    fingerprint: Fingerprint | None = None,
) -> Profile:
    """The reduced form (``profan.trace.pod``): hosts summarized where they are read; the
    per-event tables of the median host.  ``fingerprint``: as for ``load_events_cached``."""
    fingerprint = fingerprint or Fingerprint(str(path), found, opts.hlo)
    hlo = None if opts.hlo is None else os.fspath(opts.hlo)
    tasks = [(str(file), host, hlo, opts.use_cache) for host, file in sorted(found.files.items())]
    results = _map_uncached(tasks, fingerprint, sizes, opts, progress)
    chosen = representative(results)
    single = LoadOptions(hlo=hlo, workers=1, use_cache=opts.use_cache)
    median_file = found.files[chosen.host]
    # the run find_run gives for that one file (no name), without listing it again
    median_run = Run(
        median_file.parent,
        None,
        {chosen.host: median_file},
        {chosen.host: found.formats[chosen.host]},
    )
    median = fingerprint.of_run(str(median_file), median_run)
    profile = load_events_cached(str(median_file), single, median_run, fingerprint=median)
    profile.path, profile.run = str(path), found.name
    profile.hosts = analyse_hosts([result.summary for result in results])
    # device.count stays the median host's: every per-device figure divides that host's events.
    profile.device.hosts = sorted(result.host for result in results)
    profile.notes = [f"skipped {item}" for item in found.skipped] + [
        f"reduced form: {len(results)} hosts ({sum(sizes) / 1e6:.0f} MB) were each reduced where "
        f"they were read; per-op and per-step figures are host {chosen.host}'s (the median host "
        f"by step time, {chosen.events} op executions), the cross-host view covers every host "
        "(profan.load(..., form='events') keeps every event of every host)",
        *profile.notes,
    ]
    return profile

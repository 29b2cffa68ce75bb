"""A host read ahead in a worker process (``profan.trace.prefetch``) and sent back as data
(``profan.trace.workers``' transport) is the host that a read in this process gives, and a report
made that way is byte for byte the one made without it.  No worker outlives the command.

Real traces of every kind: the project's CPU fixtures, the GPU fixture (kernels inside command
buffers kept apart) and the corpus's TPU trace (op, async and module lines).  The size threshold
is lowered to the fixtures' and two workers (``workers=2``, ``PROFAN_WORKERS=2`` for the CLI) ask
for the worker whatever the load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import json
import os
import shutil
import socket
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from profan.cli import main
from profan.errors import TraceError
from profan.trace import prefetch, workers
from profan.trace.discover import find_run
from profan.trace.planes import Coded, HostTrace
from profan.trace.workers import Raised, receive, send
from profan.trace.xplane import read_host

from .conftest import FIXTURES_DIR, InCorpus, located, named_params


def _xplane(folder: Path) -> Path:
    return next(folder.rglob("*.xplane.pb"))


CPU_TRANSFORMER = _xplane(FIXTURES_DIR / "transformer")
TRACES: dict[str, Path | InCorpus] = {
    "cpu-transformer": CPU_TRANSFORMER,
    "gpu-transformer": _xplane(FIXTURES_DIR / "gpu_transformer"),
    "tpu-v6e": InCorpus("traces/tpu_v6e_inference.xplane.pb"),
}


def _plain(column: np.ndarray | Coded) -> np.ndarray:
    return column.objects() if isinstance(column, Coded) else column


def _same_host(a: HostTrace, b: HostTrace) -> None:
    """``b`` is the host ``a`` is (its string columns coded or not)."""
    for field in ("ops", "async_ops", "module_runs"):
        columns_a, columns_b = getattr(a, field), getattr(b, field)
        assert list(columns_a) == list(columns_b), field
        for name in columns_a:
            column_a, column_b = _plain(columns_a[name]), _plain(columns_b[name])
            assert column_a.dtype == column_b.dtype, (field, name)
            assert pd.Series(column_a).equals(pd.Series(column_b)), (field, name)
    for table in ("graph_kernels", "kernels"):  # a list of parts per column
        parts_a, parts_b = dict(getattr(a, table)), dict(getattr(b, table))
        assert parts_a.keys() == parts_b.keys()
        for name, parts in parts_a.items():
            assert len(parts) == len(parts_b[name])
            for part_a, part_b in zip(parts, parts_b[name], strict=True):
                assert part_a.dtype == part_b.dtype
                assert pd.Series(part_a).equals(pd.Series(part_b))
    for field in dataclasses.fields(HostTrace):
        if field.name not in ("ops", "async_ops", "module_runs", "graph_kernels", "kernels"):
            assert getattr(a, field.name) == getattr(b, field.name), field.name


def _trace(request: pytest.FixtureRequest, name: str) -> Path:
    return located(request, TRACES[name])


def _sent(value: object, *, memory_file: bool = True) -> tuple[object, int]:
    """``value`` sent through a socket pair and received (the sender in a thread: what goes
    through the socket itself may be more than it holds), and how many bytes crossed the
    socket."""
    here, there = socket.socketpair()
    with here, there:
        sender = threading.Thread(
            target=send, args=(here, value), kwargs={"memory_file": memory_file}
        )
        sender.start()
        sender.join(timeout=5 if memory_file else 0)  # (a memory file: all written first)
        waiting = (
            len(there.recv(1 << 30, socket.MSG_PEEK | socket.MSG_DONTWAIT)) if memory_file else -1
        )
        back = receive(there)
        sender.join()
    return back, waiting


@pytest.mark.parametrize("through", ["socket", "memory file"])
@pytest.mark.parametrize("name", named_params(TRACES))
def test_a_host_sent_as_data_is_the_host_read_here(
    name: str, through: str, request: pytest.FixtureRequest
) -> None:
    """Every field of the host (``_same_host``), its string columns still coded."""
    path = str(_trace(request, name))
    here = read_host(path, "h")
    coded = read_host(path, "h", coded=True)
    assert here.ops or here.graph_kernels  # (the GPU fixture's kernels all ran in graphs)
    if here.ops:  # the string columns travel as codes
        assert any(not isinstance(column, np.ndarray) for column in coded.ops.values())
    back, waiting = _sent(coded, memory_file=through == "memory file")
    if through == "memory file":  # the columns went to the file: a header crossed the socket
        assert 0 < waiting < 1024
    assert isinstance(back, HostTrace)
    _same_host(here, back)
    if here.ops:
        assert any(isinstance(column, Coded) for column in back.ops.values())
    # the columns are writable arrays, as a read's are
    columns = [
        *(column.codes if isinstance(column, Coded) else column for column in back.ops.values()),
        *(part for parts in back.graph_kernels.values() for part in parts),
    ]
    assert columns and all(column.flags.writeable for column in columns)


def test_a_read_error_is_sent_whole() -> None:
    error = TraceError("/x/h.xplane.pb", "the file is empty")
    back, _ = _sent(Raised(error))
    assert isinstance(back, Raised) and isinstance(back.error, TraceError)
    assert (back.error.path, back.error.reason) == (error.path, error.reason)
    here, there = socket.socketpair()
    with here, there:
        here.sendall(b"\x01\x00")  # a header cut short: the sender died
        here.close()
        with pytest.raises(EOFError):
            receive(there)


def test_a_memory_file_cut_short_is_an_early_end(monkeypatch: pytest.MonkeyPatch) -> None:
    coded = read_host(str(CPU_TRANSFORMER), "h", coded=True)
    kept: list[int] = []

    def memory_file() -> int:
        fd = os.memfd_create("columns")
        kept.append(os.dup(fd))
        return fd

    monkeypatch.setattr(workers, "_memory_file", memory_file)
    here, there = socket.socketpair()
    with here, there:
        send(here, coded)
        os.ftruncate(kept[0], os.fstat(kept[0]).st_size - 1)
        with pytest.raises(EOFError):
            receive(there)
    os.close(kept[0])


@pytest.fixture
def ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every host is big enough and a worker is asked for, whatever the machine's load.  The
    threads other tests of the session left running (fsspec's event loop, Dask's) live as long
    as the process: ``start`` rightly never forks beside threads, so here it counts only those
    started after them (profan's own cache writers among them)."""
    monkeypatch.setattr(prefetch, "SPLIT_HOST_BYTES", 0)
    monkeypatch.setenv("PROFAN_WORKERS", "2")
    before = [
        thread for thread in threading.enumerate() if thread is not threading.current_thread()
    ]

    def active_count() -> int:
        return threading.active_count() - sum(thread.is_alive() for thread in before)

    monkeypatch.setattr(prefetch, "threading", SimpleNamespace(active_count=active_count))


def _gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


@pytest.mark.parametrize("name", named_params(TRACES))
def test_a_host_read_ahead_is_the_host_read_here(
    ahead: None, name: str, request: pytest.FixtureRequest
) -> None:
    path = _trace(request, name)
    run = find_run(str(path), None)
    started = prefetch.start(run, workers=2)
    assert started is not None
    ((host, file),) = run.files.items()
    assert prefetch.claim(str(file), host) is started
    assert prefetch.claim(str(file), host) is None  # taken once
    _same_host(read_host(str(file), host), started.result())
    started.stop()
    assert _gone(started.pid) and not prefetch._STARTED


def test_a_read_nobody_takes_is_stopped(ahead: None) -> None:
    started = prefetch.start(find_run(str(CPU_TRANSFORMER), None), workers=2)
    assert started is not None
    started.stop()
    assert _gone(started.pid) and not prefetch._STARTED


def test_no_read_ahead_beside_a_running_thread(ahead: None) -> None:
    """Forking while another thread runs could copy a lock it holds: no worker then."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        assert prefetch.start(find_run(str(CPU_TRANSFORMER), None), workers=2) is None
    finally:
        release.set()
        thread.join()
    started = prefetch.start(find_run(str(CPU_TRANSFORMER), None), workers=2)
    assert started is not None  # the control: once it is gone
    started.stop()


def test_no_read_ahead_for_a_small_host_or_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    run = find_run(str(CPU_TRANSFORMER), None)
    assert prefetch.start(run, workers=2) is None  # below SPLIT_HOST_BYTES
    monkeypatch.setattr(prefetch, "SPLIT_HOST_BYTES", 0)
    assert prefetch.start(run, workers=1) is None


def test_idle_cpus_count_what_runs_now_not_the_last_minute(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where ``/proc/loadavg`` exists, the CPUs left idle beside this process's own are the CPU
    count less one less the threads running now beside the reader (its fourth field counts the
    reader too; the least of a few readings), whatever the 1-minute average says; elsewhere
    that average, rounded up."""
    from profan.trace import executors

    loadavg = tmp_path / "loadavg"
    monkeypatch.setattr(executors, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(executors.os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    loadavg.write_text("3.90 1.47 1.32 1/80 25080\n")  # only the reader runs now
    assert executors.running_now() == 0 and executors.idle_cpus() == 3
    loadavg.write_text("0.10 0.20 0.30 3/80 25080\n")
    assert executors.running_now() == 2 and executors.idle_cpus() == 1
    loadavg.write_text("0.10 0.20 0.30 9/80 25080\n")
    assert executors.idle_cpus() == 0
    readings = itertools.cycle([4, 2, 4, 3, 5])  # a thread passing by in some readings only
    with monkeypatch.context() as patch:
        patch.setattr(executors, "_running_reading", lambda: next(readings))
        assert executors.running_now() == 1 and executors.idle_cpus() == 2
    loadavg.unlink()  # not Linux: the 1-minute average stands in
    assert executors.running_now() is None and executors.idle_cpus() == 1


def test_a_damaged_trace_read_ahead_is_the_same_clear_error(ahead: None, tmp_path: Path) -> None:
    source = CPU_TRANSFORMER
    damaged = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    damaged.parent.mkdir(parents=True)
    data = source.read_bytes()
    damaged.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(TraceError) as here:
        read_host(str(damaged), "h")
    started = prefetch.start(find_run(str(tmp_path), None), workers=2)
    assert started is not None
    with pytest.raises(TraceError) as there:
        started.result()
    started.stop()
    assert str(there.value) == str(here.value)


def _report(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["report", *argv])
    return code, out.getvalue()


def test_a_report_read_ahead_is_byte_identical(
    ahead: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The CLI reads the trace ahead on a cold report (and on ``--no-cache``), not once the
    report is cached; every output is the one a read in this process gives; no worker is left."""
    started: list[prefetch.HostRead | None] = []
    original = prefetch.start

    def spying(*args: object, **kwargs: object) -> prefetch.HostRead | None:
        started.append(original(*args, **kwargs))  # type: ignore[arg-type]
        return started[-1]

    monkeypatch.setattr(prefetch, "start", spying)
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(tmp_path / "cache"))
    fixture = str(FIXTURES_DIR / "transformer")
    cold = _report(fixture, "--format", "json")
    assert len(started) == 1 and started[0] is not None
    assert _gone(started[0].pid) and not prefetch._STARTED
    again = _report(fixture, "--format", "json")
    assert again == cold and len(started) == 1  # from the cache: nothing read
    uncached = _report(fixture, "--format", "json", "--no-cache")
    assert uncached == cold and len(started) == 2 and started[1] is not None
    monkeypatch.setenv("PROFAN_WORKERS", "1")
    here = _report(fixture, "--format", "json", "--no-cache")
    assert here == cold and started[2] is None
    json.loads(cold[1])  # a whole report
    assert not prefetch._STARTED


def test_an_unseen_trace_read_ahead_is_looked_up_only_once_stored(
    ahead: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A trace file the cache has not seen as it is now, read ahead, is not looked up (its hash
    would wait for the read; only the same bytes rewritten at the same path could be found): it
    is hashed once the read is taken over and stored under its content's key.  The next open
    finds it; a rewrite of the same bytes is read again once (the same output), then found."""
    import profan.report.analysis.pipeline as pipeline
    from profan.cache import keys
    from profan.trace import pod

    lookups: list[str] = []
    for module, name in (
        (pipeline, "read_text"),
        (pipeline, "read_report"),
        (pod, "read_profile"),
    ):
        original = getattr(module, name)

        def spying(key: str, _original=original, _name=name) -> object:  # type: ignore[no-untyped-def]
            lookups.append(_name)
            return _original(key)

        monkeypatch.setattr(module, name, spying)
    started: list[prefetch.HostRead | None] = []
    start = prefetch.start
    monkeypatch.setattr(
        prefetch, "start", lambda *args: started.append(start(*args)) or started[-1]
    )
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(keys, "_RACY_NS", 0)  # (the copy is new: record its digest anyway)
    trace = tmp_path / "mlp"
    shutil.copytree(FIXTURES_DIR / "mlp", trace)
    cold = _report(str(trace), "--format", "json")
    assert started[-1] is not None and lookups == []
    assert _report(str(trace), "--format", "json") == cold
    assert len(started) == 1  # found: nothing read
    lookups.clear()
    xplane = _xplane(trace)
    xplane.write_bytes(xplane.read_bytes())  # the same bytes, a new modification time
    assert _report(str(trace), "--format", "json") == cold
    assert len(started) == 2 and started[-1] is not None and lookups == []
    assert _report(str(trace), "--format", "json") == cold
    assert len(started) == 2

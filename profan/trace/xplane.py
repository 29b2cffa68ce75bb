"""Reading one host's ``*.xplane.pb`` into flat columns of op executions (``HostTrace``).

Reader choice (measured with ``benchmarks/load_trace.py`` on the 69 MB, 250-step, 502,000-op
CPU trace of ``benchmarks/make_big_trace.py``; each task in a fresh process, imports included,
best of 2 in the same run, shared 2-core machine):

=========================  ========  ===========  ============
task                       time      vs bare      peak RSS
=========================  ========  ===========  ============
bare protobuf decode       1.03 s    1.0x         9.5x file
profan.load (cold cache)   2.24 s    2.2x         5.4x file
profan.load (warm cache)   2.14 s    2.1x         5.4x file
xprof native reader        54.7 s    53x          49x file
xprof hlo_stats            4.27 s    4.2x         15x file
xprof overview_page        4.01 s    3.9x         15x file
=========================  ========  ===========  ============

profan decodes XSpace with its own schema (``xplane.proto``, committed as a descriptor set, see
``profan.trace.schema``) on the ``protobuf`` runtime (upb), using *views* of
the messages that leave each line's events serialized, and decodes the events in bulk with numpy
(``profan.trace.wire``).  xprof's native reader (``xprof.profile_data``) hands out one ctypes
object per event and stats as strings, which is far slower per event, needs the optional xprof
package, and xprof's converters write cache files next to the trace (``ALL_HOSTS.op_stats_v2.pb``
appears beside the xplane); its tools (``hlo_stats``,
``overview_page``) aggregate away the per-execution rows profan needs.  So xprof is used only
as a point of comparison in the benchmark.

Where stats live (learned from real traces):

* TPU: ``/device:TPU:N`` planes; ``XLA Ops`` events name their op in the event metadata's
  ``display_name`` (the metadata name is the HLO text line) and carry ``program_id``, ``flops``,
  ``bytes_accessed``, ``model_flops``, ``source``, ``tf_op`` as *event-metadata* stats;
  ``XLA Modules`` events are executions named ``module(program_id)``; ``Async XLA Ops`` spans
  run from an async start to its done (event stat ``hlo_op`` names the done).
* GPU: ``/device:GPU:N`` planes, ``Stream #N(...)`` lines; kernel events carry *event-level*
  stats ``hlo_op``, ``hlo_module``, ``program_id`` (as references to stat-metadata names).
  One HLO op may launch several kernels.
* CPU: ``/host:CPU`` thread lines; op events carry event-level ``hlo_op``, ``hlo_module``,
  ``program_id``, ``run_id``, ``device_ordinal``.  ``StepTraceAnnotation`` events carry
  ``step_num``.
* ``/host:metadata``: one event metadata per program, stat ``Hlo Proto`` (serialized
  ``xla.HloProto``), named ``module(program_id)`` (CPU traces add a ``program_id`` stat).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import Message

from profan.errors import TraceError
from profan.escape import terminal
from profan.gunzip import GunzipLimitError, gunzip
from profan.inputs import check_input
from profan.trace.bounds import EventBound
from profan.trace.device_clock import (
    DEVICE_CLOCK_STATS,
    ClockAnchors,
    async_start_name,
    event_times,
    name_codes,
)
from profan.trace.planes import (
    NA_INT,
    PROGRAM_NA,
    Coded,
    HostTrace,
    _line_chunks,
    _line_times,
    _metadata_stats,
    _OpColumns,
    _PlaneStats,
    _stat_value,
    joined,
    plane_stats,
)
from profan.trace.schema import load_schema
from profan.trace.space import Line, Plane, open_stream, read_planes
from profan.trace.storage import RemotePath, as_path, is_local_plain
from profan.trace.wire import EventArrays

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)")
_MODULE_WITH_ID = re.compile(r"^(.*)\((\d+)\)$")
_HLO_LINE_NAME = re.compile(r"^%?([^\s=]+)\s*=")


def _classes() -> dict[str, type[Message]]:
    return load_schema("xplane.proto")


def read_bytes(path: Path | RemotePath) -> bytes:
    """The file's bytes, gunzipped (within ``profan.gunzip``'s limit) when compressed."""
    if isinstance(path, Path):
        check_input(path, "trace file")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(str(path), f"cannot read: {error.strerror}") from None
    if path.name.endswith(".gz") or data[:2] == b"\x1f\x8b":
        try:
            data = gunzip(data)
        except GunzipLimitError as error:
            raise TraceError(str(path), str(error)) from None
        except (OSError, EOFError, ValueError, zlib.error) as error:
            raise TraceError(str(path), f"not a valid gzip file: {error}") from None
    return data


def read_host(
    path: str,
    host: str,
    keep: Collection[str] | None = None,
    part: tuple[int, int] | None = None,
    coded: bool = False,
) -> HostTrace:
    """Decode one host's xplane file (runs in a worker process for multi-host runs);
    ``keep``: the op columns to build (all when None).  ``part=(index, count)``: only that share
    of the host's op-bearing planes and lines (``merge_parts`` of every share is the whole
    host, as one read would give it: one big host is read by several processes).  ``coded``:
    the string columns of ``ops`` and ``async_ops`` as ``planes.Coded`` (to be sent)."""
    with open_planes(path) as planes:
        trace = _read_planes(planes, host, path, keep, part, coded)
    if part is None:
        _note_host_launches(trace)
    return trace


def merge_parts(parts: list[HostTrace]) -> HostTrace:
    """The host that the ``read_host(..., part=(i, n))`` of ``i = 0..n-1`` read together, in
    that order: what one ``read_host`` would give."""
    trace = parts[0]
    trace.ops = _joined_columns([part.ops for part in parts])
    trace.async_ops = _joined_columns([part.async_ops for part in parts])
    trace.module_runs = _joined_columns([part.module_runs for part in parts])
    for part in parts[1:]:
        trace.hlo_protos.update(part.hlo_protos)
        trace.step_marks.extend(part.step_marks)
        for program_id, name in part.module_names.items():
            trace.module_names.setdefault(program_id, name)
        for name, arrays in part.graph_kernels.items():
            trace.graph_kernels[name].extend(arrays)
        for name, arrays in part.kernels.items():
            trace.kernels[name].extend(arrays)
        trace.host_launches += part.host_launches
        for note in part.notes:  # a note of every device plane's share once
            _add_note(trace, note)
    _note_host_launches(trace)
    return trace


def _joined_columns(tables: list[dict[str, Any]]) -> dict[str, Any]:
    tables = [table for table in tables if table]
    if len(tables) < 2:
        return tables[0] if tables else {}
    return {name: joined([table.pop(name) for table in tables]) for name in list(tables[0])}


def _note_host_launches(trace: HostTrace) -> None:
    if trace.host_launches:
        trace.notes.append(
            f"{trace.host_launches} host-side events with hlo_op (kernel launches / dispatch on "
            "/host:CPU) were not counted as op executions: the device planes record those"
        )


def _share(weights: list[int], part: tuple[int, int] | None) -> set[int]:
    """The units (planes or lines, by index) of ``part=(index, count)``: consecutive units of
    about ``1/count`` of the total weight (bytes) each; all of them when ``part`` is None."""
    if part is None:
        return set(range(len(weights)))
    index, count = part
    total = sum(weights) or 1
    mine, before = set(), 0
    for unit, weight in enumerate(weights):
        # a unit belongs to the share its middle falls in
        if min(int((before + weight / 2) * count / total), count - 1) == index:
            mine.add(unit)
        before += weight
    return mine


@contextmanager
def open_planes(path: str) -> Iterator[list[Plane]]:
    """The planes of one xplane file, each decoded without its lines (``profan.trace.space``):
    a local plain file is read with seeks while the context is open."""
    file = as_path(path)
    local = is_local_plain(path)
    try:
        stream = open_stream(None if local else read_bytes(file), str(file) if local else None)
    except OSError as error:
        raise TraceError(path, f"cannot read: {error.strerror}") from None
    with stream:
        yield read_planes(stream, path)


def embedded_programs(plane: Plane) -> Iterator[tuple[str, int, bytes]]:
    """(module name, program id, serialized HloProto) of every program a ``/host:metadata``
    plane embeds (its event metadata ``name(program_id)`` with an ``Hlo Proto`` stat)."""
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    for meta in plane.event_metadata.values():
        proto = None
        program_id = None
        for stat in meta.stats:
            name = names.get(stat.metadata_id)
            if name == "Hlo Proto":
                proto = stat.bytes_value or stat.str_value.encode()
            elif name == "program_id":
                program_id = int(_stat_value(stat, names))
        match = _MODULE_WITH_ID.match(meta.name)
        module_name = match.group(1) if match else meta.name
        if program_id is None and match:
            program_id = int(match.group(2))
        if proto and program_id is not None:
            yield module_name, program_id, proto


def _read_planes(
    planes: list[Plane],
    host: str,
    path: str,
    keep: Collection[str] | None = None,
    part: tuple[int, int] | None = None,
    coded: bool = False,
) -> HostTrace:
    trace = HostTrace(host=host, path=path, planes=[plane.name for plane in planes])
    for plane in planes:
        for name in plane.copies:
            _add_note(
                trace,
                f"{plane.name}: line {name!r} is in the file twice, byte for byte (a copy, not "
                "a second timeline): its events were read once",
            )
    device_planes = []
    host_plane = None
    for plane in planes:
        match = _DEVICE_PLANE.match(plane.name)
        if match:
            device_planes.append((match.group(1), int(match.group(2)), plane))
        elif plane.name == "/host:CPU":
            host_plane = plane
        elif plane.name == "/host:metadata":
            # The programs' bytes go with one share only: the last, which the parent reads
            # (executors.map_local gives the first tasks to the workers), so they never cross
            # a process boundary.
            _read_metadata(plane, trace, with_protos=part is None or part[0] == part[1] - 1)
    timestamps = [
        line.timestamp_ns
        for _, _, plane in device_planes
        for line in plane.lines
        if line.has_events
    ]
    if host_plane is not None:
        timestamps += [line.timestamp_ns for line in host_plane.lines if line.has_events]
    trace.base_ns = min(timestamps, default=0)

    builder = _OpColumns(keep, EventBound(path))
    async_builder = _OpColumns()
    runs = _OpColumns()
    # What a share of the host reads: whole device planes (a GPU plane's kernels are grouped
    # across its lines), then the host plane's lines one by one.
    host_lines = host_plane.lines if host_plane is not None else []
    mine = _share(
        [sum(line.end - line.start for line in plane.lines) for _, _, plane in device_planes]
        + [line.end - line.start for line in host_lines],
        part,
    )
    my_lines = [line for i, line in enumerate(host_lines) if len(device_planes) + i in mine]
    if device_planes:
        kinds = {kind for kind, _, _ in device_planes}
        trace.kind = "TPU" if "TPU" in kinds else "GPU"
        if "GPU" in kinds:
            from profan.trace.gpu import HostLaunches, read_gpu_plane  # (GPU traces only)

            # the whole host plane's launches (read when a GPU plane needs them): a share
            # reading a GPU plane groups its kernels as the whole host's read does
            launches = HostLaunches(host_plane, path, trace.base_ns)
        for index, (kind, ordinal, plane) in enumerate(device_planes):
            trace.devices[ordinal] = plane_stats(plane)
            if index not in mine:
                continue
            if kind == "TPU":
                _read_tpu_plane(plane, ordinal, trace, builder, async_builder, runs, path)
            else:
                read_gpu_plane(plane, ordinal, trace, builder, path, launches)
        if host_plane is not None:
            _read_host_plane(host_plane, my_lines, trace, None, path)
    elif host_plane is not None:
        trace.kind = "CPU"
        _read_host_plane(host_plane, my_lines, trace, builder, path)
    trace.ops = builder.finish(coded)
    trace.async_ops = async_builder.finish(coded)
    trace.module_runs = runs.finish()
    return trace


def _read_metadata(plane: Plane, trace: HostTrace, with_protos: bool = True) -> None:
    for module_name, program_id, proto in embedded_programs(plane):
        if with_protos:
            trace.hlo_protos[program_id] = (module_name, proto)
        trace.module_names[program_id] = module_name


_TPU_LINES = ("XLA Ops", "Async XLA Ops", "XLA Modules", "Steps")
DEVICE_CLOCK_NOTE = (
    "TPU op times from the device's own clock (the events' device_offset_ps / "
    "device_duration_ps stats, as XProf reads them), not the host-synchronised timeline, "
    "which cuts some ops short or to zero length"
)
MOVED_ONTO_DEVICE_CLOCK_NOTE = (
    "TPU module runs, async spans and steps that the trace dates only on the host-"
    "synchronised timeline: moved onto the device's clock by the offset between the clocks "
    "at the op events they begin and end with"
)


def _add_note(trace: HostTrace, note: str) -> None:
    if note not in trace.notes:
        trace.notes.append(note)


def _read_tpu_plane(
    plane: Plane,
    ordinal: int,
    trace: HostTrace,
    ops: _OpColumns,
    async_ops: _OpColumns,
    runs: _OpColumns,
    path: str,
) -> None:
    stats = _PlaneStats(plane)
    wanted = (
        "hlo_op",
        "hlo_module",
        "program_id",
        "flops",
        "bytes_accessed",
        "model_flops",
        "source",
        "tf_op",
        "run_id",
        "step_num",
        "group_id",
        *DEVICE_CLOCK_STATS,
    )
    stat_ids = [stats.id(name) for name in wanted if stats.id(name) is not None]
    meta_stats = _metadata_stats(plane, wanted)
    offset_stat, duration_stat = (stats.id(name) for name in DEVICE_CLOCK_STATS)
    # The op line first: its events, on both clocks, move the other lines' events that only
    # the host timeline dates onto the device's clock.
    lines = sorted(
        (line for line in plane.lines if line.name in _TPU_LINES and line.has_events),
        key=lambda line: line.name != "XLA Ops",
    )
    on_both_clocks: list[tuple[np.ndarray, ...]] = []
    op_names: dict[str, int] = {}  # codes of the op names, shared by the anchors and spans
    clock: ClockAnchors | None = None
    for line in lines:
        if line.name != "XLA Ops" and clock is None and on_both_clocks:
            clock = ClockAnchors.of(
                *(np.concatenate(part) for part in zip(*on_both_clocks, strict=True))
            )
            on_both_clocks.clear()
        is_op_line = line.name in ("XLA Ops", "Async XLA Ops")
        for events in _line_chunks(line, path, wanted_stats=stat_ids):
            count = len(events)
            columns = _columns_with_metadata(plane, stats, events, meta_stats) if is_op_line else {}
            host_start = _line_times(line, events, trace.base_ns)
            times = event_times(events, offset_stat, duration_stat)
            start = times.offset_ps + (line.timestamp_ns - trace.base_ns) * 1000
            duration = times.duration_ps
            if line.name == "XLA Ops" and times.on_device.any():
                both = times.on_device
                names = columns["op_name"]
                code = name_codes(names.values, op_names)[names.codes[both]]
                on_both_clocks.append(
                    (host_start[both], events.duration_ps[both], start[both], duration[both], code)
                )
                _add_note(trace, DEVICE_CLOCK_NOTE)
            elif line.name != "XLA Ops" and clock is not None and not times.on_device.all():
                moved = ~times.on_device
                span_ops = None
                if is_op_line:  # an async span names its done op
                    names = columns["op_name"]
                    starts_with = [None if n is None else async_start_name(n) for n in names.values]
                    span_ops = (
                        name_codes(starts_with, op_names)[names.codes[moved]],
                        name_codes(names.values, op_names)[names.codes[moved]],
                    )
                moved_start, moved_duration = clock.spans(
                    host_start[moved], events.duration_ps[moved], span_ops
                )
                start[moved] = moved_start
                duration = duration.copy()
                duration[moved] = moved_duration
                _add_note(trace, MOVED_ONTO_DEVICE_CLOCK_NOTE)
            if line.name == "XLA Modules":
                names = np.empty(count, dtype=object)
                program = np.full(count, PROGRAM_NA, dtype=np.uint64)
                for key in np.unique(events.metadata_id):
                    meta = plane.event_metadata.get(int(key))
                    name = meta.name if meta is not None else str(key)
                    match = _MODULE_WITH_ID.match(name)
                    hit = events.metadata_id == key
                    names[hit] = match.group(1) if match else name
                    if match:
                        program[hit] = int(match.group(2))
                        trace.module_names.setdefault(int(match.group(2)), match.group(1))
                runs.add(
                    device=np.full(count, ordinal, dtype=np.int64),
                    module=names,
                    program_id=program,
                    start_ps=start,
                    duration_ps=duration,
                    run_id=stats.ints(events, "run_id", np.full(count, NA_INT, dtype=np.int64)),
                )
                continue
            if line.name == "Steps":
                numbers = stats.ints(events, "step_num", np.full(count, NA_INT, dtype=np.int64))
                for index in range(count):
                    number = int(numbers[index])
                    if number == NA_INT:
                        meta = plane.event_metadata.get(int(events.metadata_id[index]))
                        name = meta.name if meta is not None else ""
                        number = int(name) if name.isdigit() else NA_INT
                    if number != NA_INT:
                        end = int(start[index] + duration[index])
                        trace.step_marks.append((number, int(start[index]), end, "Steps line"))
                continue
            target = ops if line.name == "XLA Ops" else async_ops
            target.add(
                device=np.full(count, ordinal, dtype=np.int64),
                start_ps=start,
                duration_ps=duration,
                **columns,
            )


def _columns_with_metadata(
    plane: Message,
    stats: _PlaneStats,
    events: EventArrays,
    meta_stats: dict[int, dict[str, Any]],
) -> dict[str, Any]:
    """Per-event op columns: event-level stats win over event-metadata stats."""
    count = len(events)
    keys, inverse = np.unique(events.metadata_id, return_inverse=True)

    def from_metadata(name: str, dtype: Any, default: Any) -> np.ndarray:
        values = np.array(
            [meta_stats.get(int(k), {}).get(name, default) for k in keys], dtype=dtype
        )
        return values[inverse] if count else np.zeros(0, dtype=dtype)

    def coded_from_metadata(name: str) -> Coded:
        return Coded.by_key([meta_stats.get(int(k), {}).get(name) for k in keys], inverse)

    names: list[str | None] = []
    for key in keys:
        meta = plane.event_metadata.get(int(key))
        if meta is None:
            names.append(None)
        elif meta.display_name:
            names.append(meta.display_name)
        else:
            match = _HLO_LINE_NAME.match(meta.name)
            names.append(match.group(1) if match else meta.name)
    op_name = stats.coded(events, "hlo_op", Coded.by_key(names, inverse))
    program = from_metadata("program_id", object, None)
    program = np.array([PROGRAM_NA if p is None else int(p) for p in program], dtype=np.uint64)
    program = stats.uints(events, "program_id", program)
    module = stats.coded(events, "hlo_module", coded_from_metadata("hlo_module"))
    source = stats.coded(events, "source", coded_from_metadata("source"))
    flops = stats.floats(events, "flops", from_metadata("flops", np.float64, np.nan))
    bytes_accessed = stats.floats(
        events, "bytes_accessed", from_metadata("bytes_accessed", np.float64, np.nan)
    )
    model_flops = stats.floats(
        events, "model_flops", from_metadata("model_flops", np.float64, np.nan)
    )
    return {
        "op_name": op_name,
        "program_id": program,
        "module": module,
        "source": source,
        "trace_flops": flops,
        "trace_bytes_accessed": bytes_accessed,
        "trace_model_flops": model_flops,
    }


def _read_host_plane(
    plane: Plane, lines: list[Line], trace: HostTrace, ops: _OpColumns | None, path: str
) -> None:
    """CPU op events (when ``ops`` is given) and StepTraceAnnotation events of ``lines`` (of
    ``plane``); events with hlo_op are counted in ``trace.host_launches`` when ``ops`` is
    None."""
    stats = _PlaneStats(plane)
    hlo_op = stats.id("hlo_op")
    step_num = stats.id("step_num")
    require = [s for s in (hlo_op, step_num) if s is not None]
    if not require:
        return
    wanted = [
        stats.id(n)
        for n in ("hlo_op", "hlo_module", "program_id", "run_id", "device_ordinal", "step_num")
        if stats.id(n) is not None
    ]
    for line in lines:
        if not line.has_events:
            continue
        # (inexact: the events holding neither stat are told apart below, by their stats)
        chunks = _line_chunks(line, path, wanted_stats=wanted, require_stats=require, exact=False)
        for events in chunks:
            if not len(events):
                continue
            count = len(events)
            start = _line_times(line, events, trace.base_ns)
            has_step = np.zeros(count, dtype=bool)
            if step_num is not None:
                has_step[events.stat_event[events.stat_metadata_id == step_num]] = True
                numbers = stats.ints(events, "step_num", np.full(count, NA_INT, dtype=np.int64))
                for index in np.flatnonzero(has_step):
                    trace.step_marks.append(
                        (
                            int(numbers[index]),
                            int(start[index]),
                            int(start[index] + events.duration_ps[index]),
                            "StepTraceAnnotation",
                        )
                    )
            if hlo_op is None:
                continue
            is_op = np.zeros(count, dtype=bool)
            is_op[events.stat_event[events.stat_metadata_id == hlo_op]] = True
            if ops is None:
                trace.host_launches += int(is_op.sum())
                continue
            names = stats.coded(events, "hlo_op")
            # an hlo_op that names nothing (a reference to no stat metadata, a damaged
            # compressed string) is no op execution
            nameless = int((is_op & (names.codes < 0)).sum())
            if nameless:
                _add_note(
                    trace,
                    f"{terminal(plane.name)}: {nameless} event(s) whose hlo_op stat names nothing "
                    "(a reference to no stat metadata, or a damaged compressed string): not "
                    "counted as op executions",
                )
            rows = np.flatnonzero(is_op & (names.codes >= 0))
            if not rows.size:
                continue
            modules = stats.coded(events, "hlo_module")
            programs = stats.uints(
                events, "program_id", np.full(count, PROGRAM_NA, dtype=np.uint64)
            )
            run_ids = stats.ints(events, "run_id", np.full(count, NA_INT, dtype=np.int64))
            devices = stats.ints(events, "device_ordinal", np.full(count, NA_INT, dtype=np.int64))
            ops.add(
                device=devices[rows],
                module=modules.take(rows),
                program_id=programs[rows],
                op_name=names.take(rows),
                start_ps=start[rows],
                duration_ps=events.duration_ps[rows],
                run_id=run_ids[rows],
            )


__all__ = [
    "NA_INT",
    "PROGRAM_NA",
    "HostTrace",
    "embedded_programs",
    "is_local_plain",
    "merge_parts",
    "open_planes",
    "plane_stats",
    "read_bytes",
    "read_host",
]

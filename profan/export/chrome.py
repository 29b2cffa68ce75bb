"""Chrome Trace Event JSON (Perfetto UI, ``chrome://tracing``) of a profile with profan's
figures on every op.

Layout: one process per device (``host TPU:0`` when the profile has several hosts), one thread
per line the profiler wrote its ops on (TPU ``XLA Ops``, a GPU stream, a CPU thread), one
complete slice (``ph: X``) per op event carrying profan's figures as args (the same names as
the annotated xplane's stats), a ``Steps`` thread per device with one slice per step, and four
counter tracks per device (``ph: C``): FLOP/s and HBM bytes/s achieved and at the roofline
(``profan.export.counters``).  Metadata events (``ph: M``) name and order processes and
threads.  Times are microseconds since the profile's first op (``otherData.origin_ns`` is that
instant), rounded to the nanosecond; a slice's end is rounded the same way as its start, so
neighbours never overlap.

The file is written as a stream, a batch of events at a time; ``.gz`` targets are gzipped.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from profan.export.counters import Work, bin_edges, device_rates
from profan.export.events import LineOps, has_device_planes, plane_role
from profan.export.exportable import Exportable
from profan.export.figures import EFFICIENCY, UNKNOWN, op_args
from profan.export.tracks import device_steps, lanes
from profan.trace.space import line_events
from profan.trace.xplane import open_planes
from profan.version import __version__

_BATCH = 20000  # events joined and written at once
_THREADS_PER_PROCESS = 100_000  # thread ids of process p: p * this + 1, + 2, …
STEPS_THREAD = "Steps"
JSON_LINE = "ops"  # the thread of a host read from trace-viewer JSON (which has no lines)


@dataclass(slots=True)
class ChromeCount:
    """What the file holds."""

    slices: int = 0
    op_slices: int = 0  # slices of op events joined to an execution (with profan's args)
    counters: int = 0
    processes: int = 0
    threads: int = 0


@dataclass(slots=True)
class _Writer:
    """The ``traceEvents`` array, written a batch at a time."""

    out: IO[str]
    count: ChromeCount = field(default_factory=ChromeCount)
    batch: list[str] = field(default_factory=list)
    first: bool = True
    pids: dict[tuple[str, int], int] = field(default_factory=dict)
    tids: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, event: str) -> None:
        self.batch.append(event)
        if len(self.batch) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.batch:
            return
        text = ",\n".join(self.batch)
        self.out.write(text if self.first else ",\n" + text)
        self.first = False
        self.batch.clear()

    def process(self, host: str, device: int, label: str) -> int:
        key = (host, device)
        pid = self.pids.get(key)
        if pid is None:
            pid = self.pids[key] = len(self.pids) + 1
            self.add(_metadata("process_name", pid, None, {"name": label}))
            self.add(_metadata("process_sort_index", pid, None, {"sort_index": pid}))
            self.count.processes += 1
        return pid

    def slice(
        self, pid: int, tid: int, start_ps: int, duration_ps: int, name: str, cat: str, args: str
    ) -> None:
        start = _ns(start_ps)
        end = _ns(start_ps + duration_ps)
        self.add(
            f'{{"ph":"X","pid":{pid},"tid":{tid},"ts":{_us(start)},"dur":{_us(end - start)},'
            f'"name":{name},"cat":{cat},"args":{{{args}}}}}'
        )
        self.count.slices += 1

    def counter(self, pid: int, name: str, series: str, at_ps: int, value: float) -> None:
        ts = _us(_ns(at_ps))
        self.add(
            f'{{"ph":"C","pid":{pid},"ts":{ts},"name":"{name}","args":{{"{series}":{value:.6g}}}}}'
        )
        self.count.counters += 1

    def thread(self, pid: int, name: str) -> int:
        """The thread of ``name`` in process ``pid``: ids unique across processes and never a
        process's own id (which viewers take for its main thread)."""
        key = (pid, name)
        tid = self.tids.get(key)
        if tid is None:
            index = sum(1 for p, _ in self.tids if p == pid) + 1
            tid = self.tids[key] = pid * _THREADS_PER_PROCESS + index
            self.add(_metadata("thread_name", pid, tid, {"name": name}))
            self.add(_metadata("thread_sort_index", pid, tid, {"sort_index": index}))
            self.count.threads += 1
        return tid


def _metadata(name: str, pid: int, tid: int | None, args: dict[str, object]) -> str:
    event: dict[str, object] = {"ph": "M", "name": name, "pid": pid}
    if tid is not None:
        event["tid"] = tid
    event["args"] = args
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def _us(ns: int) -> str:
    """Nanoseconds as microseconds with three decimals (exact: no float rounding)."""
    sign = "-" if ns < 0 else ""
    whole, part = divmod(abs(ns), 1000)
    return f"{sign}{whole}.{part:03d}"


def _ns(ps: int) -> int:
    return (ps + 500) // 1000


def _number(value: float) -> str:
    """A JSON number to six significant digits; ``"unknown"`` where there is none."""
    return f"{value:.6g}" if math.isfinite(value) else json.dumps(UNKNOWN)


def _value(value: float | str) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else _number(value)


class _Ops:
    """The JSON text every slice of one op repeats (name, category and the op's figures up to
    the open ``args``), built on first use."""

    def __init__(self, export: Exportable) -> None:
        self.export = export
        self.texts: dict[int, str] = {}

    def text(self, op_index: int) -> str:
        found = self.texts.get(op_index)
        if found is None:
            op = self.export.figures.ops[op_index]
            args = [*op_args(op), ("profan_module", op.record.module)]
            found = self.texts[op_index] = (
                f'"name":{json.dumps(op.record.name, ensure_ascii=False)},'
                f'"cat":{json.dumps(op.record.category)},"args":{{'
                + ",".join(f"{json.dumps(name)}:{_value(value)}" for name, value in args)
            )
        return found


def _device_label(kind: str, device: int, host: str, hosts: int) -> str:
    name = f"{kind}:{device}" if device >= 0 else kind
    return f"{host} {name}" if hosts > 1 else name


def _line_slices(
    writer: _Writer,
    ops: _Ops,
    found: LineOps,
    host: str,
    kind: str,
    line: str,
    kernel_names: dict[int, str] | None,
    hosts: int,
) -> None:
    """The slices of one line's op events, a whole line at a time (half a million events make
    per-event Python work the cost: what can be is computed per line with numpy)."""
    start_ns = (found.start_ps + 500) // 1000
    end_ns = (found.start_ps + found.duration_ps + 500) // 1000
    lane = np.zeros(len(found.row), dtype=np.int64)
    tid = np.zeros(len(found.row), dtype=np.int64)
    pid = np.zeros(len(found.row), dtype=np.int64)
    for device in np.unique(found.device):
        mine = np.flatnonzero(found.device == device)
        lane[mine] = lanes(start_ns[mine], end_ns[mine])
        process = writer.process(host, int(device), _device_label(kind, int(device), host, hosts))
        pid[mine] = process
        for at in np.unique(lane[mine]):
            name = line if at == 0 else f"{line} [{at + 1}]"
            tid[mine[lane[mine] == at]] = writer.thread(process, name)
    known = found.row >= 0
    op_index = np.full(len(found.row), -1, dtype=np.int64)
    table = ops.export.table(found.spans)
    op_index[known] = table.figures.row_op[found.row[known]]
    efficiency = np.full(len(found.row), np.nan)
    efficiency[known] = table.efficiencies[found.row[known]]
    step = np.full(len(found.row), -1, dtype=np.int64)
    step[known] = table.steps[found.row[known]]
    texts = {int(i): ops.text(int(i)) for i in np.unique(op_index) if i >= 0}
    kernels = (
        [
            f',"kernel":{json.dumps(kernel_names.get(m, ""), ensure_ascii=False)}'
            for m in found.metadata_id.tolist()
        ]
        if kernel_names is not None
        else None
    )
    unknown = json.dumps(UNKNOWN)
    out = writer.batch
    for index, (p, t, start, end, op, value, number) in enumerate(
        zip(
            pid.tolist(),
            tid.tolist(),
            start_ns.tolist(),
            end_ns.tolist(),
            op_index.tolist(),
            efficiency.tolist(),
            step.tolist(),
            strict=True,
        )
    ):
        head = (
            f'{{"ph":"X","pid":{p},"tid":{t},"ts":{start / 1000:.3f},'
            f'"dur":{(end - start) / 1000:.3f},'
        )
        kernel = kernels[index] if kernels is not None else ""
        if op < 0:
            launched = kernel_names.get(int(found.metadata_id[index])) if kernel_names else None
            out.append(
                f'{head}"name":{json.dumps(launched or "op without an execution")},'
                f'"cat":"unjoined","args":{{}}}}'
            )
            continue
        shown = f"{value:.6g}" if math.isfinite(value) else unknown
        at_step = f',"step":{number}' if number >= 0 else ""
        out.append(f'{head}{texts[op]},"{EFFICIENCY}":{shown}{at_step}{kernel}}}}}')
    writer.count.slices += len(found.row)
    writer.count.op_slices += int((op_index >= 0).sum())
    if len(out) >= _BATCH:
        writer.flush()


def _processes(writer: _Writer, export: Exportable, hosts: int) -> None:
    """A process per device, in host and device order (before any event names one)."""
    frame = export.analysis.profile.ops
    devices = (
        frame[["host", "device", "device_kind"]]
        .astype({"host": object, "device_kind": object})
        .assign(device=frame["device"].fillna(-1).astype(int))
        .drop_duplicates()
        .sort_values(["host", "device"])
    )
    for host, device, kind in devices.itertuples(index=False):
        pid = writer.process(host, int(device), _device_label(kind, int(device), host, hosts))
        writer.thread(pid, STEPS_THREAD)  # first: the steps sit above the device's ops


def _xplane_host(writer: _Writer, ops: _Ops, host: str, file: str, hosts: int) -> None:
    matcher = ops.export.matcher(host)
    with open_planes(file) as planes:
        device_planes = has_device_planes(planes)
        for plane in planes:
            role = plane_role(plane, device_planes)
            if role is None:
                continue
            kernels = (
                {int(key): meta.name for key, meta in plane.event_metadata.items()}
                if role.kind == "GPU"
                else None
            )
            for line in plane.lines:
                if not line.has_events:
                    continue
                events = list(line_events(line, file))
                found = matcher.line_ops(role, line.name, line.timestamp_ns, events)
                del events
                if found is not None:
                    _line_slices(writer, ops, found, host, role.kind, line.name, kernels, hosts)


def _json_host(writer: _Writer, ops: _Ops, host: str, hosts: int) -> None:
    """A host read from trace-viewer JSON: its executions, on one thread per device."""
    profile = ops.export.analysis.profile
    frame = profile.ops
    mine = np.flatnonzero((frame["host"].astype(object) == host).to_numpy())
    found = LineOps(
        index=mine,
        row=mine,
        start_ps=np.rint(frame["start_s"].to_numpy(dtype=float)[mine] * 1e12).astype(np.int64),
        duration_ps=np.rint(frame["duration_s"].to_numpy(dtype=float)[mine] * 1e12).astype(
            np.int64
        ),
        device=frame["device"].to_numpy(dtype=np.int64, na_value=-1)[mine],
        metadata_id=np.zeros(len(mine), dtype=np.int64),
    )
    ops.export.executions.used[mine] = True
    _line_slices(writer, ops, found, host, profile.device.kind, JSON_LINE, None, hosts)


def _steps(writer: _Writer, export: Exportable) -> None:
    """One slice per step on the ``Steps`` thread of every device: the span of the device's
    own executions in the step, with the step's figures (over all devices) as args."""
    profile = export.analysis.profile
    scored = {step.step: step for step in export.analysis.score.steps}
    texts = {}
    for number, found in scored.items():
        args: dict[str, float] = {"step": number}
        for name in ("measured_s", "ideal_s", "efficiency", "mfu"):
            value = getattr(found, name)
            if isinstance(value, int | float) and math.isfinite(value):
                args[f"profan_step_{name}"] = float(value)
        texts[number] = json.dumps(args)[1:-1]
    hosts = profile.ops["host"].astype(object).to_numpy()
    devices = profile.ops["device"].to_numpy(dtype=np.int64, na_value=-1)
    for (host, device), pid in list(writer.pids.items()):
        tid = writer.thread(pid, STEPS_THREAD)
        rows = np.flatnonzero((hosts == host) & (devices == device))
        for number, start_s, end_s in device_steps(profile.ops, rows):
            start = round(start_s * 1e12)
            text = texts.get(number, f'"step":{number}')
            name = json.dumps(f"step {number}")
            writer.slice(pid, tid, start, round(end_s * 1e12) - start, name, '"step"', text)


def _counters(writer: _Writer, export: Exportable, bins: int) -> tuple[float, int]:
    """The counter tracks of every device; returns the bin width (seconds) and how many bin
    values were cut to the chip's peak."""
    profile = export.analysis.profile
    frame = profile.ops
    chip = export.analysis.score.chip
    peak_flops = max(chip.peak_flops.values()) / chip.devices_per_chip
    capped = 0
    if not len(frame):
        return 0.0, capped
    figures = export.figures
    per_op = figures.ops
    flops = np.array([_nan(op.flops) for op in per_op] + [math.nan])
    hbm = np.array([_nan(op.hbm_bytes) for op in per_op] + [math.nan])
    ideal = np.array([_nan(op.ideal_s) for op in per_op] + [math.nan])
    skip = np.array([op.asynchronous for op in per_op] + [True])
    op_of_row = np.where(figures.row_op >= 0, figures.row_op, len(per_op))
    op_of_row = np.where(skip[op_of_row], len(per_op), op_of_row)
    start = frame["start_s"].to_numpy(dtype=float)
    end = start + frame["duration_s"].to_numpy(dtype=float)
    edges = bin_edges(float(start.min()), float(end.max()), bins)
    hosts = frame["host"].astype(object).to_numpy()
    devices = frame["device"].to_numpy(dtype=np.int64, na_value=-1)
    for (host, device), pid in list(writer.pids.items()):
        mine = np.flatnonzero((hosts == host) & (devices == device))
        work = Work(start[mine], end[mine], flops[op_of_row[mine]], hbm[op_of_row[mine]],
                    ideal[op_of_row[mine]])  # fmt: skip
        at_ps = np.rint(edges * 1e12).astype(np.int64).tolist()
        rates, cut = device_rates(work, edges, peak_flops, chip.device_hbm_bytes_per_s)
        capped += cut
        for (name, series), values in rates.items():
            last = None
            for at, value in zip(at_ps, [*values.tolist(), 0.0], strict=True):
                if value != last:  # a counter holds its value until the next event
                    writer.counter(pid, name, series, at, value)
                    last = value
    return float(edges[1] - edges[0]), capped


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


@contextmanager
def _text_out(target: Path) -> Iterator[IO[str]]:
    if target.name.endswith(".gz"):
        with gzip.open(target, "wt", encoding="utf-8", compresslevel=6) as out:
            yield out
    else:
        with open(target, "w", encoding="utf-8", buffering=1 << 20) as out:
            yield out


def write_chrome(export: Exportable, target: Path, bins: int) -> ChromeCount:
    """Write the Chrome trace of ``export`` to ``target`` (a temporary file the caller moves
    into place; ``.gz`` in its name: gzipped)."""
    profile = export.analysis.profile
    header: dict[str, Any] = {
        "profan_version": __version__,
        "trace": str(profile.path),
        "run": profile.run,
        "chip": export.analysis.score.chip.name,
        "origin_ns": profile.origin_ns,
        "time_unit": "microseconds since origin_ns (the profile's first op)",
    }
    with _text_out(target) as out:
        writer = _Writer(out)
        out.write('{"displayTimeUnit":"ns","traceEvents":[\n')
        ops = _Ops(export)
        hosts = export.hosts
        _processes(writer, export, len(hosts))
        for host, file, fmt in hosts:
            if fmt == "xplane":
                _xplane_host(writer, ops, host, str(file), len(hosts))
            else:
                _json_host(writer, ops, host, len(hosts))
        _steps(writer, export)
        header["counter_bin_s"], header["counter_values_at_peak"] = _counters(writer, export, bins)
        header["counters"] = (
            "per device: FLOP/s and HBM bytes/s achieved and at the roofline, each the mean over "
            "a bin; executions faster than their roofline count at the roofline rate; async ops "
            "and ops of unknown cost add nothing; overlapping executions add up to at most the "
            "chip's peak (counter_values_at_peak: bin values cut to it)"
        )
        writer.flush()
        out.write("\n],\n")
        out.write(f'"otherData":{json.dumps(header, ensure_ascii=False)}}}\n')
    return writer.count

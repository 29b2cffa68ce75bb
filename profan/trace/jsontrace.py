"""Reading a trace-viewer JSON export (``*.trace.json.gz``, ``perfetto_trace.json.gz``).

Used only when a host has no ``*.xplane.pb``: the JSON keeps op names and a few string
arguments (``hlo_op``, ``hlo_module``, ``run_id``, ``device_ordinal``, ``step_num``) but drops
``program_id``, the embedded HLO and the per-op FLOP/byte stats, and the exporter caps the event
count — so the result is joined to HLO only when ``--hlo`` provides it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from profan.errors import TraceError
from profan.trace.planes import NA_INT, PROGRAM_NA, HostTrace, _OpColumns
from profan.trace.storage import as_path
from profan.trace.xplane import read_bytes

_DEVICE_PROCESS = re.compile(r"^/device:(TPU|GPU):(\d+)")


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return NA_INT


# Microseconds that fit int64 picoseconds (about 107 days): anything beyond is not a trace time.
_MAX_MICROSECONDS = float(2**63 - 1) / 1e6


def _picoseconds(value: Any, path: str, key: str) -> int:
    """A JSON time in microseconds as whole picoseconds; a number that is not finite or does
    not fit (``1e400``) is a ``TraceError`` naming the event and key (ValueError: not a number)."""
    microseconds = float(value)
    if not math.isfinite(microseconds) or abs(microseconds) >= _MAX_MICROSECONDS:
        raise TraceError(path, f"{key}: {value!r} µs; expected a finite time of at most 1e13 µs")
    return round(microseconds * 1e6)


def read_host_json(path: str, host: str) -> HostTrace:
    data = read_bytes(as_path(path))
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise TraceError(path, f"not valid trace JSON: {error}") from None
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise TraceError(path, "not a trace-viewer JSON file (no traceEvents list)")
    trace = HostTrace(host=host, path=path)
    processes: dict[Any, str] = {}
    threads: dict[tuple[Any, Any], str] = {}
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "M":
            args = event.get("args") or {}
            if event.get("name") == "process_name":
                processes[event.get("pid")] = str(args.get("name", ""))
            elif event.get("name") == "thread_name":
                threads[(event.get("pid"), event.get("tid"))] = str(args.get("name", ""))
    device_of = {}
    for pid, name in processes.items():
        match = _DEVICE_PROCESS.match(name)
        if match:
            device_of[pid] = (match.group(1), int(match.group(2)))
    trace.planes = sorted(set(processes.values()))
    trace.kind = (
        ("TPU" if any(k == "TPU" for k, _ in device_of.values()) else "GPU") if device_of else None
    )
    rows: dict[str, list[Any]] = {
        name: [] for name in ("device", "module", "op_name", "start", "dur", "run_id")
    }
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        args = event.get("args") or {}
        if not isinstance(args, dict):
            raise TraceError(path, f"traceEvents[{index}].args: expected an object, got {args!r}")
        pid = event.get("pid")
        try:
            start_ps = _picoseconds(event.get("ts", 0), path, f"traceEvents[{index}].ts")
            duration_ps = _picoseconds(event.get("dur", 0), path, f"traceEvents[{index}].dur")
        except (TypeError, ValueError):
            continue
        if duration_ps < 0:
            raise TraceError(
                path, f"traceEvents[{index}].dur: {event.get('dur')!r} µs; expected a duration >= 0"
            )
        if "step_num" in args:
            number = _int(args["step_num"])
            if number != NA_INT:
                trace.step_marks.append(
                    (number, start_ps, start_ps + duration_ps, "StepTraceAnnotation")
                )
        device = device_of.get(pid)
        line = threads.get((pid, event.get("tid")), "")
        if device is not None:
            if "hlo_op" not in args and not line.startswith("XLA Ops"):
                continue
            ordinal = device[1]
        elif device_of or "hlo_op" not in args:
            continue  # host-side events of device traces, or not an op
        else:
            ordinal = _int(args.get("device_ordinal"))
        rows["device"].append(ordinal)
        rows["module"].append(args.get("hlo_module"))
        rows["op_name"].append(args.get("hlo_op") or event.get("name"))
        rows["start"].append(start_ps)
        rows["dur"].append(duration_ps)
        rows["run_id"].append(_int(args.get("run_id")))
    if trace.kind is None and rows["start"]:
        trace.kind = "CPU"
    if rows["start"]:
        builder = _OpColumns()
        count = len(rows["start"])
        builder.add(
            device=np.array(rows["device"], dtype=np.int64),
            module=np.array(rows["module"], dtype=object),
            program_id=np.full(count, PROGRAM_NA, dtype=np.uint64),
            op_name=np.array(rows["op_name"], dtype=object),
            start_ps=np.array(rows["start"], dtype=np.int64),
            duration_ps=np.array(rows["dur"], dtype=np.int64),
            run_id=np.array(rows["run_id"], dtype=np.int64),
        )
        trace.ops = builder.finish()
        for ordinal in sorted({o for _, o in device_of.values()}):
            trace.devices[ordinal] = {}
    trace.notes.append(
        f"{as_path(path).name}: trace-viewer JSON (no program ids, no embedded HLO, no per-op "
        "FLOP/byte stats, event count capped by the exporter)"
    )
    return trace

"""Baseline entries and files: what one program did on one kind of machine, read from the JSON
report (``Report.to_dict()``, SCHEMA.md), one entry per ``"<device kind>/<chip>"`` in a file."""

from __future__ import annotations

import datetime
import fcntl
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from profan.errors import ConfigError
from profan.outputs import OutputError, os_reason, write_file
from profan.report.keys import base_name
from profan.report.model import Report
from profan.tomlschema import convert, read_config
from profan.version import __version__

FORMAT = "profan-baseline"
FORMAT_VERSION = 1
UPDATE_HINT = "record it with `pytest --profan-update-baseline`"


@dataclass(frozen=True, slots=True)
class OpFacts:
    """One op of the baseline; per execution unless the name says otherwise."""

    key: str
    name: str
    opcode: str
    category: str
    per_step: float  # executions per step, all devices together
    flops: float
    hbm_bytes: float
    ici_bytes: float
    collective: dict[str, Any] | None
    shape: str | None
    source: str | None  # not compared: lines move when code above them changes
    time_per_step_s: float  # per device; not compared exactly


@dataclass(frozen=True, slots=True)
class MemoryFacts:
    """One program's memory per device, from XLA's buffer assignment (the report's ``memory``)."""

    peak_bytes: float
    argument_bytes: float
    output_bytes: float
    temp_bytes: float
    peak_instruction: str | None  # not compared: where the peak is, for the message
    peak_source: str | None


MEMORY_QUANTITIES = ("peak_bytes", "argument_bytes", "output_bytes", "temp_bytes")


@dataclass(slots=True)
class Entry:
    """What one program did on one kind of machine."""

    machine: str
    device_kind: str
    chip: str
    device_count: int
    mesh: dict[str, dict[str, int]]
    steps: int
    step_min_s: float | None
    step_median_s: float | None
    step_max_s: float | None
    totals: dict[str, float]  # per step, all devices
    ops: dict[str, OpFacts] = field(default_factory=dict)
    # per program and memory space ("jit_step/device"); empty when the report has no memory
    memory: dict[str, MemoryFacts] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)  # profan version, date

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ops"] = [asdict(op) for op in self.ops.values()]
        return data


def machine_key(report: dict[str, Any]) -> str:
    """``"<device kind>/<chip>"`` of a JSON report, e.g. ``"CPU/cpu"`` or ``"TPU/v5e"``."""
    kind = str((report.get("device") or {}).get("kind") or "unknown")
    chip = str((report.get("chip") or {}).get("name") or "unknown")
    return f"{kind}/{chip}"


def relative_source(source: Any) -> str | None:
    """``file:line`` relative to the working directory when under it (the checkout, in CI), so
    that baselines and messages carry no machine's absolute paths."""
    if not isinstance(source, str) or not source:
        return None
    cwd = os.getcwd().rstrip("/") + "/"
    return source[len(cwd) :] if source.startswith(cwd) else source


def as_number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def step_time(value: Any) -> float | None:
    """A step time as recorded: a positive finite number of seconds, else None (zero-length or
    reversed step markers give none that means anything; the comparison says so)."""
    if isinstance(value, int | float) and math.isfinite(value) and value > 0:
        return float(value)
    return None


def _collective_facts(op: dict[str, Any]) -> dict[str, Any] | None:
    facts = op.get("collective")
    if not isinstance(facts, dict):
        return None
    # axis names are a reading of the mesh, not what ran; the mesh is compared on its own
    return {
        "kind": facts.get("kind"),
        "group_size": facts.get("group_size"),
        "groups": facts.get("groups", facts.get("num_groups")),
        "bytes": facts.get("bytes", facts.get("full_bytes")),
    }


def entry_from_report(report: Report | dict[str, Any]) -> Entry:
    """The baseline entry of a report (or of its JSON form)."""
    data = report.to_dict() if isinstance(report, Report) else report
    summary = data.get("summary") or {}
    steps = int(summary.get("step_count") or 0)
    per = max(steps, 1)
    devices = max(
        int(summary.get("device_count") or (data.get("device") or {}).get("count") or 1), 1
    )
    ops: dict[str, OpFacts] = {}
    totals = dict.fromkeys(
        (
            "flops_per_step",
            "hbm_bytes_per_step",
            "ici_bytes_per_step",
            "collectives_per_step",
            "collective_bytes_per_step",
        ),
        0.0,
    )
    for op in data.get("ops", []):
        runs = as_number(op.get("occurrences"))
        each = max(runs, 1.0)
        collective = _collective_facts(op)
        facts = OpFacts(
            key=str(op["key"]),
            name=str(op.get("name")),
            opcode=str(op.get("opcode")),
            category=str(op.get("category")),
            per_step=runs / per,
            flops=as_number(op.get("flops")) / each,
            hbm_bytes=as_number(op.get("hbm_bytes")) / each,
            ici_bytes=as_number(op.get("ici_bytes")) / each,
            collective=collective,
            shape=op.get("shape"),
            source=relative_source(op.get("source")),
            time_per_step_s=as_number(op.get("measured_s")) / per / devices,
        )
        ops[facts.key] = facts
        totals["flops_per_step"] += as_number(op.get("flops")) / per
        totals["hbm_bytes_per_step"] += as_number(op.get("hbm_bytes")) / per
        totals["ici_bytes_per_step"] += as_number(op.get("ici_bytes")) / per
        if collective is not None:
            totals["collectives_per_step"] += runs / per
            totals["collective_bytes_per_step"] += runs / per * as_number(collective["bytes"])
    mesh = {
        base_name(str(module)): {str(axis): int(size) for axis, size in shape.items()}
        for module, shape in (summary.get("mesh") or {}).items()
    }
    key = machine_key(data)
    memory = {
        f"{base_name(str(program.get('module')))}/{program.get('memory_space', 'device')}": (
            _memory_facts(program)
        )
        for program in data.get("memory") or []
        if isinstance(program, dict)
    }
    return Entry(
        machine=key,
        device_kind=key.split("/", 1)[0],
        chip=key.split("/", 1)[1],
        device_count=devices,
        mesh=mesh,
        steps=steps,
        step_min_s=step_time(summary.get("step_time_min_s")),
        step_median_s=step_time(summary.get("step_time_median_s")),
        step_max_s=step_time(summary.get("step_time_max_s")),
        totals=totals,
        ops=ops,
        memory=memory,
        recorded={"profan": __version__, "date": datetime.date.today().isoformat()},
    )


def _memory_facts(program: dict[str, Any]) -> MemoryFacts:
    at = program.get("peak_instruction")
    sources = [
        buffer.get("source")
        for buffer in program.get("top_buffers") or []
        if isinstance(buffer, dict) and str(buffer.get("name", "")).split("{")[0] == at
    ]
    return MemoryFacts(
        peak_bytes=as_number(program.get("peak_bytes")),
        argument_bytes=as_number(program.get("argument_bytes")),
        output_bytes=as_number(program.get("output_bytes")),
        temp_bytes=as_number(program.get("temp_bytes")),
        peak_instruction=at,
        peak_source=relative_source(next((s for s in sources if s), None)),
    )


# --------------------------------------------------------------------------------------------
# files


def is_baseline_file(path: str | Path) -> bool:
    """Whether ``path`` is a baseline file (not a JSON report); a file that cannot be decoded is
    not (reading it as a report then says why)."""
    try:
        data = read_config(path, what="the baseline", syntax="json")
    except ConfigError:
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def read_baselines(path: str | Path) -> dict[str, Entry]:
    """Every machine's entry of a baseline file (an empty dict when the file does not exist);
    a field of the wrong type or out of range raises ``ConfigError`` naming the file and field."""
    path = Path(path)
    if not path.exists():
        return {}
    data = read_config(path, what="the baseline", syntax="json")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f'{path}: not a profan baseline (no "format": "{FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ConfigError(
            f"{path}: version: must be a whole number (this profan reads {FORMAT_VERSION}), got "
            f"{json.dumps(version)}; {UPDATE_HINT}"
        )
    if version != FORMAT_VERSION:
        raise ConfigError(
            f"{path}: baseline version {version} is not supported "
            f"(this profan reads {FORMAT_VERSION}); {UPDATE_HINT}"
        )
    machines = data.get("machines")
    if not isinstance(machines, dict):
        raise ConfigError(
            f"{path}: malformed baseline: machines: must be a table of entries by machine; "
            f"{UPDATE_HINT}"
        )
    origin = f"{path}: malformed baseline"
    return {key: _entry(entry, origin, f"machines.{key}") for key, entry in machines.items()}


def _entry(data: Any, origin: str, key: str) -> Entry:
    """One machine's entry, its fields checked (types, ranges) against ``_EntryFields``."""
    fields = convert(data, _EntryFields, origin=origin, key=key)
    values = {name: getattr(fields, name) for name in fields.__struct_fields__}
    values["ops"] = {op.key: OpFacts(**msgspec.structs.asdict(op)) for op in fields.ops}
    values["memory"] = {
        name: MemoryFacts(**msgspec.structs.asdict(facts)) for name, facts in fields.memory.items()
    }
    return Entry(**values)


# What a baseline file holds per machine: Entry's and OpFacts's fields as the file spells them,
# with the ranges they can take (a count or a byte total below zero cannot have been recorded).
Count = Annotated[float, msgspec.Meta(ge=0)]
Seconds = Annotated[float, msgspec.Meta(ge=0)] | None


class _OpFields(msgspec.Struct, frozen=True):
    key: str
    name: str
    opcode: str
    category: str
    per_step: Count
    flops: Count
    hbm_bytes: Count
    ici_bytes: Count
    collective: dict[str, Any] | None
    shape: str | None
    source: str | None
    time_per_step_s: Count


class _MemoryFields(msgspec.Struct, frozen=True):
    peak_bytes: Count
    argument_bytes: Count
    output_bytes: Count
    temp_bytes: Count
    peak_instruction: str | None
    peak_source: str | None


class _EntryFields(msgspec.Struct, frozen=True):
    machine: str
    device_kind: str
    chip: str
    device_count: Annotated[int, msgspec.Meta(ge=1)]
    mesh: dict[str, dict[str, Annotated[int, msgspec.Meta(ge=1)]]]
    steps: Annotated[int, msgspec.Meta(ge=0)]
    step_min_s: Seconds
    step_median_s: Seconds
    step_max_s: Seconds
    totals: dict[str, Count]
    ops: list[_OpFields] = []
    memory: dict[str, _MemoryFields] = {}
    recorded: dict[str, Any] = {}


def write_baseline(
    path: str | Path, report: Report | dict[str, Any], versions: dict[str, str] | None = None
) -> Entry:
    """Record ``report`` as the baseline of its machine; other machines' entries are kept.
    ``versions``: of the software that made the program (e.g. jax, jaxlib), recorded with it.

    Runners of several machines may record into one file at once: the file is read, merged and
    replaced under an exclusive lock (``baseline_lock``), so no runner's entry is lost, and
    written whole (a temporary file renamed into place), so a failed write keeps the old file."""
    path = Path(path)
    entry = entry_from_report(report)
    entry.recorded.update(versions or {})
    with baseline_lock(path):
        entries = read_baselines(path)  # as it is now, with what other runners recorded
        entries[entry.machine] = entry
        data = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "machines": {key: entries[key].to_dict() for key in sorted(entries)},
        }
        write_file(path, json.dumps(data, indent=1, sort_keys=False) + "\n", "--baseline")
    return entry


@contextmanager
def baseline_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the baseline ``path``, held on a lock file beside it (the baseline
    itself is replaced by a rename, which a lock on its inode would not survive)."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as error:
        raise OutputError(
            f"--baseline {path}: cannot lock it ({lock}): {os_reason(error)}"
        ) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # (releases the lock)

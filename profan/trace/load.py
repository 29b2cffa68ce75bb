"""``load``: a trace path -> ``Profile`` (op executions joined to the HLO that ran).

Steps: find the run and its host files (``discover``), read each host (``xplane`` / ``jsontrace``;
hosts in parallel processes when there are several), merge, get the HLO of the modules that ran
(embedded ``HloProto`` or a ``--hlo`` dump/file), join every op execution to its instruction by
(program id or module name, op name), assign steps, and build the tables.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profan.errors import ProfanError, TraceError
from profan.escape import terminal
from profan.hlo.model import Module
from profan.hlo.stored import cached_module
from profan.trace.discover import Run, find_run
from profan.trace.executors import Progress, map_hosts, map_local, trim_heap
from profan.trace.hloproto import module_from_proto_bytes
from profan.trace.hosts import analyse_hosts, summarize_host
from profan.trace.join import as_category, coded_category, join_ops, module_key, spread_category
from profan.trace.options import LoadOptions
from profan.trace.planes import NA_INT, PROGRAM_NA, Coded, HostTrace, joined
from profan.trace.prefetch import claim, host_processes
from profan.trace.profile import OP_COLUMNS, OP_DTYPES, DeviceInfo, Profile, Unmatched
from profan.trace.schema import load_schema
from profan.trace.steps import assign_steps, finish_steps, steps_by_time
from profan.trace.xplane import merge_parts, read_host

MAX_EXAMPLES = 5
# A host file of SPLIT_HOST_BYTES or more, when it is the only one, is read by several
# processes at once (each a share of its planes and lines, ``xplane.read_host(part=)``), up to
# this many, unless its read was started ahead (``profan.trace.prefetch``).
MAX_HOST_SHARES = 4

# (path, host, format, columns to keep, share of the host or None)
ReadTask = tuple[str, str, str, frozenset[str] | None, tuple[int, int] | None]


def _read_one(task: ReadTask) -> HostTrace:
    path, host, fmt, keep, part = task
    if fmt == "xplane":
        return read_host(path, host, keep, part, coded=True)
    from profan.trace.jsontrace import read_host_json

    return read_host_json(path, host)


def _host_shares(
    tasks: list[ReadTask], sizes: list[int], workers: int | None, scheduler: str | None
) -> int:
    """How many processes read the one host of ``tasks`` (``prefetch.host_processes``), a
    share each; 1 for several hosts."""
    if len(tasks) != 1:
        return 1
    path, _, fmt, _, _ = tasks[0]
    return min(host_processes(path, fmt, sizes[0], workers, scheduler), MAX_HOST_SHARES)


def sizes_of(run: Run) -> list[int]:
    """Bytes of each host's file, in host order."""
    return [int(path.stat().st_size) for _, path in sorted(run.files.items())]


def load_events(
    path: str | os.PathLike[str],
    opts: LoadOptions,
    found: Run | None = None,
    progress: Progress | None = None,
    columns: tuple[str, ...] | None = None,
    dumped: list[Module] | None = None,
) -> Profile:
    """The events form: every op execution of every host (see ``profan.trace.pod``).

    ``columns``: only these columns of ``Profile.ops`` (and no ``async_ops``), for a caller that
    reduces the table at once (the map of the reduced form): the rest is never built.
    ``dumped``: the modules of ``opts.hlo``, when the caller parsed them already."""
    hlo, workers, use_cache = opts.hlo, opts.workers, opts.use_cache
    found = found or find_run(path, opts.run)
    sizes = sizes_of(found)
    progress = progress or Progress(len(sizes), sum(sizes), False)
    scheduler = opts.scheduler
    keep = _raw_columns(columns)
    tasks: list[ReadTask] = [
        (str(file), host, found.formats[host], keep, None)
        for host, file in sorted(found.files.items())
    ]
    started = claim(tasks[0][0], tasks[0][1]) if len(tasks) == 1 and keep is None else None
    shares = 1 if started is not None else _host_shares(tasks, sizes, workers, scheduler)
    if started is not None and dumped is None:  # read ahead in a worker: parse the dump now
        try:
            dumped = _dump_modules(hlo)
        except ProfanError:
            started.result()  # a damaged trace is reported first, as when it is read here
            raise
    if started is not None:
        hosts = [started.result()]
    elif shares > 1:  # one big host: read by several processes, a share each
        path_, host_, fmt, _, _ = tasks[0]
        parts = [(path_, host_, fmt, keep, (index, shares)) for index in range(shares)]
        hosts = [merge_parts(map_local(_read_one, parts, shares))]  # a TraceError pickles whole
    else:
        hosts = map_hosts(
            _read_one, tasks, sizes, workers=workers, scheduler=scheduler, progress=progress
        )
    trim_heap()  # the readers' temporaries, before the tables are built
    if found.hlo_beside:
        from profan.trace.jsonhlo import add_hlo_beside

        for host in hosts:
            if host.host in found.hlo_beside:
                add_hlo_beside(host, found.hlo_beside[host.host])
    notes = [f"skipped {item}" for item in found.skipped]
    for host in hosts:
        notes.extend(f"{host.host}: {note}" for note in host.notes)
    if dumped is None:
        dumped = _dump_modules(hlo)
    modules, keys_by_program, keys_by_name, program_bytes = _modules(hosts, dumped, use_cache)
    for host in hosts:
        if host.graph_kernels:
            _attribute_graph_kernels(host, modules, keys_by_program, keys_by_name, notes)
    with_ops = [h for h in hosts if h.ops]
    if not with_ops:
        # plane names are the trace's: a control character in one is shown, not sent
        planes = ", ".join(sorted({terminal(p) for h in hosts for p in h.planes})) or "none"
        raise TraceError(
            str(path),
            "no op executions in the trace: no /device:TPU or /device:GPU plane with op events "
            f"and no CPU op events with hlo_op on /host:CPU (planes found: {planes})",
        )
    kinds = {h.kind for h in with_ops}
    if len(kinds) > 1:
        notes.append(f"hosts disagree on the device kind: {sorted(map(str, kinds))}")
    kind = with_ops[0].kind or "CPU"

    base_ns = min(h.base_ns for h in with_ops)
    ops = _frame([(h, h.ops) for h in with_ops], base_ns, keep)
    async_ops = (
        _frame([(h, h.async_ops) for h in with_ops if h.async_ops], base_ns)
        if columns is None
        else pd.DataFrame()
    )
    for host in hosts:
        host.ops, host.async_ops = {}, {}  # in the frames now: one copy in memory, not two
    origin_ps = int(ops["_start_ps"].min())

    module_names = {}
    for host in hosts:
        module_names.update(host.module_names)
    unmatched_counter: dict[str, Counter[str]] = defaultdict(Counter)
    join_ops(ops, modules, keys_by_program, keys_by_name, module_names, unmatched_counter)
    if len(async_ops):
        join_ops(
            async_ops,
            modules,
            keys_by_program,
            keys_by_name,
            module_names,
            unmatched_counter,
            label=" (async span)",
        )

    trim_heap()
    steps = assign_steps(ops, hosts, base_ns, notes)
    trim_heap()
    if len(async_ops):
        async_ops["step"] = pd.array([pd.NA] * len(async_ops), dtype="Int64")
        if len(steps):
            steps_by_time(async_ops, steps)

    kernels = None
    if kind == "GPU":
        from profan.trace.kernels import kernel_frame

        def key_of(program: int, name: str | None) -> str | None:
            return module_key(program, name, modules, keys_by_program, keys_by_name)[0]

        kernels = kernel_frame(hosts, module_names, key_of)
    device = _device_info(kind, hosts, ops)
    table = _finish(ops, origin_ps, columns)
    del ops  # the reader-level frame: the public table replaces it
    trim_heap()
    profile = Profile(
        path=str(path),
        run=found.name,
        ops=table,
        steps=finish_steps(steps, origin_ps),
        device=device,
        modules=modules,
        unmatched=[
            Unmatched(
                reason,
                sum(examples.values()),
                [e for e, _ in examples.most_common()][:MAX_EXAMPLES],
            )
            for reason, examples in sorted(unmatched_counter.items())
        ],
    )
    profile.async_ops = _finish(async_ops, origin_ps) if len(async_ops) else None
    profile.hlo_protos = program_bytes
    profile.kernels = kernels
    profile.notes = notes
    profile.origin_ns = base_ns + origin_ps // 1000
    if len(with_ops) > 1:
        profile.hosts = analyse_hosts(
            [
                summarize_host(str(host), rows, profile.origin_ns, profile.instruction)
                for host, rows in profile.ops.groupby("host", observed=True, sort=True)
            ]
        )
    return profile


# ------------------------------------------------------------------------------ tables


# What ``_finish`` reads of the frame for each public column.
_SOURCES = {
    "start_s": ("_start_ps",),
    "duration_s": ("duration_ps",),
    "step": (),  # assigned after the frame is built
    "module_key": (),  # set by _join
    "matched": (),  # set by _join
    "module": ("module", "program_id"),
    "host": (),
    "device_kind": (),
}
_JOIN_SOURCES = ("program_id", "module", "op_name", "device", "run_id", "duration_ps")  # + steps


def _raw_columns(wanted: tuple[str, ...] | None) -> frozenset[str] | None:
    """The readers' columns that the table's ``wanted`` columns (and the join and the steps)
    are built from; None: all of them."""
    if wanted is None:
        return None
    keep = {"start_ps", *_JOIN_SOURCES}
    for name in wanted:
        keep.update(_SOURCES.get(name, (name,)))
    return frozenset(keep)


def _frame(
    parts: list[tuple[HostTrace, dict[str, np.ndarray]]],
    base_ns: int,
    keep: frozenset[str] | None = None,
) -> pd.DataFrame:
    """The hosts' reader columns as one frame sorted by start time (only ``keep``'s columns,
    from ``_raw_columns``; all when None).  Each reader column is taken out of its host's dict
    as the frame takes it, so no column is held twice (a host's columns are most of the
    memory of reading it)."""
    parts = [(host, columns) for host, columns in parts if columns]
    if not parts:
        return pd.DataFrame()
    names = list(dict.fromkeys(name for _, columns in parts for name in columns))
    names = [n for n in names if n != "start_ps" and (keep is None or n in keep)]
    counts = [len(columns["start_ps"]) for _, columns in parts]
    starts = joined([columns.pop("start_ps") + (host.base_ns - base_ns) * 1000
                      for host, columns in parts])  # fmt: skip
    order = np.argsort(starts, kind="stable")
    host_rows = np.repeat(np.arange(len(parts)), counts)[order]
    data = {
        "host": spread_category(
            np.array([host.host for host, _ in parts], dtype=object), host_rows
        ),
        "device_kind": spread_category(
            np.array([host.kind or "CPU" for host, _ in parts], dtype=object), host_rows
        ),
    }
    del host_rows
    for name in names:
        pieces = [
            columns.pop(name) if name in columns else Coded(np.full(count, -1, np.int32), [])
            for (_, columns), count in zip(parts, counts, strict=True)
        ]
        values = joined(pieces)
        del pieces
        # Strings become categorical here, once: the join, the steps and the table use the codes.
        if isinstance(values, Coded):
            data[name] = coded_category(values, order)
        else:
            data[name] = as_category(values[order]) if values.dtype == object else values[order]
    data["_start_ps"] = starts[order]
    del starts
    return pd.DataFrame(data, copy=False)


def _finish(
    frame: pd.DataFrame, origin_ps: int, columns: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """The public table: ``OP_DTYPES``' columns (or only ``columns``), times in seconds,
    declared dtypes."""
    build = {
        "host": lambda: frame["host"],
        "device": lambda: _nullable(frame["device"]),
        "device_kind": lambda: frame["device_kind"],
        "module": lambda: frame["module"],
        "module_key": lambda: frame["module_key"],
        "program_id": lambda: _nullable_program(frame["program_id"]),
        "op_name": lambda: frame["op_name"],
        "step": lambda: frame["step"],
        "start_s": lambda: (frame["_start_ps"].to_numpy() - origin_ps) / 1e12,
        "duration_s": lambda: frame["duration_ps"].to_numpy() / 1e12,
        "trace_flops": lambda: frame["trace_flops"],
        "trace_bytes_accessed": lambda: frame["trace_bytes_accessed"],
        "trace_model_flops": lambda: frame["trace_model_flops"],
        "source": lambda: frame["source"],
        "matched": lambda: frame["matched"],
        "run_id": lambda: _nullable(frame["run_id"]),
        "kernel_count": lambda: frame["kernel_count"],
    }
    names = tuple(OP_DTYPES) if columns is None else tuple(n for n in OP_DTYPES if n in columns)
    # Column by column, each converted once and taken as it is (a whole-frame constructor and
    # astype would copy every column twice more while the reader's frame is still held).
    out = pd.DataFrame(
        {name: pd.Series(build[name](), copy=False).astype(OP_DTYPES[name]) for name in names},
        copy=False,
    )
    assert columns is not None or tuple(out.columns[: len(OP_COLUMNS)]) == OP_COLUMNS
    return out


def _nullable_program(values: pd.Series) -> pd.Series:
    array = values.to_numpy(dtype=np.uint64)
    return pd.Series(pd.arrays.IntegerArray(array, array == PROGRAM_NA), index=values.index)


def _nullable(values: pd.Series) -> pd.Series:
    array = values.to_numpy(dtype=np.int64)
    return pd.Series(pd.arrays.IntegerArray(array, array == NA_INT), index=values.index)


# ------------------------------------------------------------------------------ modules


def _dump_modules(hlo: Any) -> list[Module]:
    """The modules of ``--hlo`` (none without it; parsed through the parse cache, as
    ``--no-cache`` keeps it)."""
    if hlo is None:
        return []
    from profan.trace.hlofiles import modules_from_path

    return modules_from_path(Path(hlo))


def _modules(
    hosts: list[HostTrace], dumped: list[Module], use_cache: bool
) -> tuple[dict[str, Module], dict[int, str], dict[str, list[str]], dict[str, bytes]]:
    """Modules keyed by name (``dumped``: those of ``--hlo``, which win) or
    ``name(program_id)`` (embedded HloProto of the other modules), lookups by program id and by
    module name, and the serialized HloProto of every program that ran, by
    ``name(program_id)``."""
    modules: dict[str, Module] = {}
    keys_by_program: dict[int, str] = {}
    keys_by_name: dict[str, list[str]] = defaultdict(list)
    program_bytes: dict[str, bytes] = {}
    for module in dumped:
        key = module.name
        if key in modules:
            continue
        modules[key] = module
        keys_by_name[module.name].append(key)
    # Embedded HLO covers the modules --hlo did not provide.
    given = set(modules)
    protos: dict[int, tuple[str, bytes, str]] = {}
    for host in hosts:
        for program_id, (name, data) in host.hlo_protos.items():
            protos.setdefault(program_id, (name, data, host.path))
    used_programs: set[int] = set()
    used_names: set[str] = set()
    for host in hosts:
        for columns in (host.ops, host.async_ops, host.graph_kernels):
            programs = columns.get("program_id", columns.get("program"))
            if programs is None or not len(programs):
                continue
            values = np.concatenate(programs) if isinstance(programs, list) else programs
            used_programs.update(int(p) for p in np.unique(values) if p != PROGRAM_NA)
            names = columns.get("module")
            if isinstance(names, Coded):
                used_names.update(n for n in names.used() if isinstance(n, str))
            elif names is not None and len(names):
                values = np.concatenate(names) if isinstance(names, list) else names
                used_names.update(n for n in set(values.tolist()) if isinstance(n, str))
    for program_id, (name, data, where) in sorted(protos.items()):
        key = f"{name}({program_id})"
        ran = program_id in used_programs or name in used_names
        if ran:
            program_bytes[key] = data  # kept for the memory analysis (its buffer assignment)
        if name in given:
            continue
        keys_by_name[name].append(key)
        keys_by_program[program_id] = key
        if not ran:
            continue  # a program that did not run in the profiled window: not converted
        modules[key] = _convert(data, f"{where}: HloProto of {key}", use_cache)
    return modules, keys_by_program, keys_by_name, program_bytes


def _convert(data: bytes, where: str, use_cache: bool) -> Module:
    """HloProto bytes -> Module, cached under the user's cache dir (see ``profan.hlo.stored``)."""

    def build() -> Module:
        return module_from_proto_bytes(data, where=where)

    return cached_module("hloproto", data, build) if use_cache else build()


# ------------------------------------------------------------------------ command buffers


def _instruction_ids(data: bytes) -> dict[int, str]:
    """HloProto instruction id -> name (what a kernel's ``unique_hlo_op_id`` refers to)."""
    proto = load_schema("hlo.proto")["xla.HloProto"].FromString(data)
    return {i.id: i.name for c in proto.hlo_module.computations for i in c.instructions}


def _attribute_graph_kernels(
    host: HostTrace,
    modules: dict[str, Module],
    keys_by_program: dict[int, str],
    keys_by_name: dict[str, list[str]],
    notes: list[str],
) -> None:
    """Attribute the kernels a host ran inside command buffers (``profan.trace.command_buffers``)
    and add them to ``host.ops`` as op executions."""
    from profan.trace.command_buffers import attribute  # (GPU traces only)
    from profan.trace.gpu import executions_of_kernels
    from profan.trace.kernels import add_parts, kernel_totals

    columns = {name: np.concatenate(parts) for name, parts in host.graph_kernels.items()}
    host.graph_kernels = {}
    ids: dict[int, dict[int, str]] = {}
    decisions: list[str] = []  # kernels named like several instructions: which one, and why
    resolved = np.full(len(columns["start"]), None, dtype=object)
    groups = pd.DataFrame(
        {"device": columns["device"], "program": columns["program"], "module": columns["module"]}
    ).groupby(["device", "program", "module"], sort=False, dropna=False)
    for (_, program, module_name), rows in groups.indices.items():
        key, _reason = module_key(int(program), module_name, modules, keys_by_program, keys_by_name)
        if key is None:
            continue
        if int(program) not in ids and int(program) in host.hlo_protos:
            ids[int(program)] = _instruction_ids(host.hlo_protos[int(program)][1])
        by_id = ids.get(int(program), {})
        around = [by_id.get(int(u)) if u != NA_INT else None for u in columns["around"][rows]]
        resolved[rows] = attribute(
            list(columns["kernel"][rows]),
            list(columns["name"][rows]),
            around,
            modules[key],
            decisions,
        )
    missing = np.array([r is None for r in resolved], dtype=bool)
    names = resolved.copy()
    names[missing] = [
        f"{b}/{k}"
        for b, k in zip(columns["name"][missing], columns["kernel"][missing], strict=True)
    ]
    total = len(names)
    notes.append(
        f"{host.host}: {total} kernels ran inside command buffers (CUDA graphs); "
        f"{total - int(missing.sum())} attributed to their instructions by kernel name and "
        "position (see profan.trace.command_buffers)"
    )
    notes.extend(f"{host.host}: {decision}" for decision in decisions)
    columns["name"] = names
    parts = []
    for device in np.unique(columns["device"]):
        mine = columns["device"] == device
        theirs = {n: v[mine] for n, v in columns.items()}
        parts.append(executions_of_kernels(theirs, int(device)))
        add_parts(host.kernels, kernel_totals(theirs, int(device)))
    for part in parts:
        if not host.ops:
            host.ops = part
            continue
        host.ops = {n: joined([host.ops[n], part[n]]) for n in host.ops}


# ------------------------------------------------------------------------------- device


def _device_info(kind: str, hosts: list[HostTrace], ops: pd.DataFrame) -> DeviceInfo:
    """The device of the first host's first device plane, counted over every host."""
    stats: dict[str, Any] = {}
    for host in hosts:
        for ordinal in sorted(host.devices):
            stats = host.devices[ordinal]
            break
        if stats:
            break
    device_count = sum(len(h.devices) for h in hosts)
    if not device_count:  # no device planes (CPU): the (host, device ordinal) pairs seen
        device_codes, devices = pd.factorize(ops["device"].to_numpy())
        pairs = ops["host"].array.codes.astype(np.int64) * (len(devices) + 1) + device_codes
        device_count = len(pd.unique(pairs))
    return DeviceInfo.from_stats(kind, stats, device_count, sorted({h.host for h in hosts}))

"""Loaded traces as cache entries: a ``Profile`` (what ``profan.load`` returns for the events
form) and one pod host's reduced result (what the pod map sends back).

A stored profile is its scalars and small tables in msgpack (device, unmatched reasons, notes,
the cross-host view, each HLO module field by field as ``profan.hlo.stored`` writes them)
and its tables (``ops``, ``steps``, ``async_ops``, ``kernels``) as raw columns
(``profan.cache.frames``); the serialized HloProtos of the programs that ran are blobs as they
are.  Reading one back checks every type (``msgspec``) and builds the tables on the entry's
buffer: it costs a fraction of a read of the xplane it came from (``benchmarks/README.md``).
Keys are made by the caller (``profan.trace.pod``) from ``profan.trace.fingerprint``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import numpy as np

from profan.cache.frames import Table, Unsupported, decode_frame, encode_frame
from profan.cache.store import read_entry, write_entry
from profan.hlo.model import Module
from profan.hlo.stored import encoded_module
from profan.trace.hosts import HostsAnalysis, HostSummary
from profan.trace.profile import DeviceInfo, Profile, Unmatched

Result = TypeVar("Result")


class _ProfileMeta(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    run: str | None
    device: DeviceInfo
    modules: dict[str, Module]
    unmatched: list[Unmatched]
    notes: list[str]
    origin_ns: int
    hosts: HostsAnalysis | None
    hlo_protos: dict[str, int]  # name -> blob index
    ops: Table
    steps: Table
    async_ops: Table | None
    kernels: Table | None


class _SummaryMeta(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    host: str
    devices: list[int]
    step_windows: dict[int, tuple[int, int]]
    collective_table: int  # blob index: int64 rows of 5
    collective_ops: tuple[str, ...]
    op_time_s: float
    busy_s: float
    span_s: float


class _HostMeta(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    host: str
    summary: _SummaryMeta
    step_time_median_s: float
    kind: str
    devices: int
    events: int


_PROFILE_DECODER = msgspec.msgpack.Decoder(_ProfileMeta)
_HOST_DECODER = msgspec.msgpack.Decoder(_HostMeta)
# What a damaged or foreign entry raises while it is decoded: each is a miss.
_DECODE_ERRORS = (msgspec.DecodeError, ValueError, TypeError, KeyError, IndexError)


def write_profile(key: str, profile: Profile, *, background: bool = False) -> bool:
    """Store ``profile`` under ``key``; False when it holds something the format does not.
    ``background``: its file is written by a thread (``store.write_entry``) while the caller
    goes on; the profile's tables must not change meanwhile (no caller changes them)."""
    blobs: list[Any] = []
    try:
        tables = {
            "ops": encode_frame(profile.ops, blobs),
            "steps": encode_frame(profile.steps, blobs),
            "async_ops": None
            if profile.async_ops is None
            else encode_frame(profile.async_ops, blobs),
            "kernels": None if profile.kernels is None else encode_frame(profile.kernels, blobs),
        }
    except Unsupported:
        return False
    protos = {}
    for name, data in profile.hlo_protos.items():
        protos[name] = len(blobs)
        blobs.append(data)
    meta = {
        "path": profile.path,
        "run": profile.run,
        "device": profile.device,
        "modules": {key: encoded_module(module) for key, module in profile.modules.items()},
        "unmatched": profile.unmatched,
        "notes": profile.notes,
        "origin_ns": int(profile.origin_ns),
        "hosts": profile.hosts,
        "hlo_protos": protos,
        **tables,
    }
    return write_entry("profiles", key, meta, blobs, background=background)


def read_profile(key: str) -> Profile | None:
    """The profile stored under ``key``, or None (a miss: absent, damaged or foreign)."""
    found = read_entry("profiles", key)
    if found is None:
        return None
    raw, blobs = found
    try:
        meta = _PROFILE_DECODER.decode(raw)
        return Profile(
            path=meta.path,
            run=meta.run,
            ops=decode_frame(meta.ops, blobs),
            steps=decode_frame(meta.steps, blobs),
            device=meta.device,
            modules=meta.modules,
            unmatched=meta.unmatched,
            async_ops=None if meta.async_ops is None else decode_frame(meta.async_ops, blobs),
            notes=meta.notes,
            origin_ns=meta.origin_ns,
            hosts=meta.hosts,
            hlo_protos={name: bytes(blobs[index]) for name, index in meta.hlo_protos.items()},
            kernels=None if meta.kernels is None else decode_frame(meta.kernels, blobs),
        )
    except _DECODE_ERRORS:
        return None


def write_host_result(key: str, result: Any) -> bool:
    """Store a pod host's reduced result (``profan.trace.pod.HostResult``) under ``key``."""
    summary: HostSummary = result.summary
    table = np.ascontiguousarray(summary.collective_table, dtype=np.int64)
    meta = _HostMeta(
        host=result.host,
        summary=_SummaryMeta(
            host=summary.host,
            devices=[int(device) for device in summary.devices],
            step_windows={
                int(step): (int(start), int(end))
                for step, (start, end) in summary.step_windows.items()
            },
            collective_table=0,
            collective_ops=tuple(summary.collective_ops),
            op_time_s=float(summary.op_time_s),
            busy_s=float(summary.busy_s),
            span_s=float(summary.span_s),
        ),
        step_time_median_s=float(result.step_time_median_s),
        kind=str(result.kind),
        devices=int(result.devices),
        events=int(result.events),
    )
    return write_entry("hosts", key, meta, [table])


def read_host_result(key: str, make: Callable[..., Result]) -> Result | None:
    """``make(host=, summary=, step_time_median_s=, kind=, devices=, events=)`` of the result
    stored under ``key``, or None (a miss)."""
    found = read_entry("hosts", key)
    if found is None:
        return None
    raw, blobs = found
    try:
        meta = _HOST_DECODER.decode(raw)
        stored = meta.summary
        table = np.frombuffer(blobs[stored.collective_table], dtype="<i8")
        if len(table) % 5:
            return None
        summary = HostSummary(
            host=stored.host,
            devices=stored.devices,
            step_windows=stored.step_windows,
            collective_table=table.reshape(-1, 5),
            collective_ops=stored.collective_ops,
            op_time_s=stored.op_time_s,
            busy_s=stored.busy_s,
            span_s=stored.span_s,
        )
        return make(
            host=meta.host,
            summary=summary,
            step_time_median_s=meta.step_time_median_s,
            kind=meta.kind,
            devices=meta.devices,
            events=meta.events,
        )
    except _DECODE_ERRORS:
        return None

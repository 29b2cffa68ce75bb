"""TPU op times come from the device's own clock (the events' ``device_offset_ps`` /
``device_duration_ps`` stats), as XProf reads them, on the v6e trace of the corpus.

The expected values are read here from the protobuf itself, with the schema that
``fixtures/inspect_xplane.py`` declares (no profan code): every op event's device stats, and
for the events the trace dates only on the host-synchronised timeline (async spans, module
runs) the op events they begin and end with.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import profan
from profan.trace.xplane import read_host
from tests.raw_xplane import inspect_xplane

TRACE = "traces/tpu_v6e_inference.xplane.pb"


@pytest.fixture(scope="module")
def trace_path(corpus_dir: Path) -> Path:
    path = corpus_dir / TRACE
    if not path.exists():
        pytest.skip(f"{path} is not there")
    return path


@pytest.fixture(scope="module")
def raw(trace_path: Path) -> dict[str, Any]:
    """Per TPU device: its XLA Ops events as (name, host start, host end, device start,
    device end) in ps from the line timestamps' zero, and its async spans as (done op, host
    start, host end); the base every reader measures from (the earliest line with events)."""
    inspect = inspect_xplane()
    space = inspect.read_xspace(str(trace_path))
    ops: dict[int, list[tuple[str, int, int, int, int]]] = defaultdict(list)
    spans: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    stamps = []
    for plane in space.planes:
        if plane.name.startswith("/device:TPU:") or plane.name == "/host:CPU":
            stamps += [line.timestamp_ns for line in plane.lines if line.events]
        if not plane.name.startswith("/device:TPU:"):
            continue
        device = int(plane.name.rsplit(":", 1)[1])
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            shift = line.timestamp_ns * 1000
            for event in line.events:
                stats = {names[s.metadata_id]: inspect.stat_value(s) for s in event.stats}
                host = (shift + event.offset_ps, shift + event.offset_ps + event.duration_ps)
                if line.name == "XLA Ops":
                    start = shift + stats["device_offset_ps"]
                    meta = plane.event_metadata[event.metadata_id]
                    name = meta.display_name or meta.name
                    ops[device].append((name, *host, start, start + stats["device_duration_ps"]))
                elif line.name == "Async XLA Ops":
                    done = stats["hlo_op"]
                    spans[device].append((names.get(done, done), *host))
    return {"ops": ops, "spans": spans, "base_ps": min(stamps) * 1000}


@pytest.fixture(scope="module")
def host(trace_path: Path) -> Any:
    return read_host(str(trace_path), "v6e")


def test_every_op_is_timed_by_the_device_stats(raw: dict[str, Any], host: Any) -> None:
    ops = host.ops
    assert len(ops["start_ps"]) == sum(len(events) for events in raw["ops"].values())
    for device, events in raw["ops"].items():
        mine = ops["device"] == device
        got = sorted(
            zip(ops["op_name"][mine], ops["start_ps"][mine], ops["duration_ps"][mine], strict=True)
        )
        want = sorted(
            (name, start - raw["base_ps"], end - start) for name, _, _, start, end in events
        )
        assert got == want, f"TPU:{device}"


def test_broadcast_add_fusion_takes_its_device_time(raw: dict[str, Any], trace_path: Path) -> None:
    """The regression: 23 of its 400 events last 0 ps on the host timeline (~8 ms on the
    device); the host timeline sums to 2.96 s, the device's clock to 3.19 s (XProf's too)."""
    events = [e for device in raw["ops"].values() for e in device if e[0] == "broadcast_add_fusion"]
    assert len(events) == 400
    device_ps = sum(end - start for _, _, _, start, end in events)
    host_ps = sum(end - start for _, start, end, _, _ in events)
    assert sum(1 for _, start, end, _, _ in events if start == end) == 23
    profile = profan.load(str(trace_path), use_cache=False)
    mine = profile.ops["op_name"] == "broadcast_add_fusion"
    total = float(profile.ops.loc[mine, "duration_s"].sum())
    assert total == pytest.approx(device_ps / 1e12, rel=1e-12)
    assert round(total, 2) == 3.19
    assert host_ps / 1e12 < 2.97  # the host timeline's sum, which profan no longer reports
    device_zero = sum(1 for d in raw["ops"].values() for e in d if e[3] == e[4])
    host_zero = sum(1 for d in raw["ops"].values() for e in d if e[1] == e[2])
    assert device_zero < host_zero
    assert int((profile.ops["duration_s"] == 0).sum()) == device_zero


def _start_of_done(corpus_dir: Path) -> dict[str, str]:
    """done op -> the start op it waits for, from the HLO text XLA printed for the trace's
    programs (``copy-done.2 = ... copy-done(copy-start.2)``)."""
    pairs = {}
    for text in (corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*.hlo"):
        found = re.findall(r"(\S+) = \S+ \S+-done\((\S+)\)", text.read_text(encoding="utf-8"))
        pairs.update(found)
    return pairs


def test_async_spans_run_from_their_start_to_their_done_on_the_device_clock(
    raw: dict[str, Any], host: Any, corpus_dir: Path
) -> None:
    """A span the trace dates only on the host timeline begins where its start op begins and
    ends where its done op ends (there); on the device's clock it runs from the start op's
    device start to the done's device end.  (The host timeline puts several ops at one
    instant: copy-start, copy-start.2, copy-start.4 and copy-done all begin at the same
    picosecond there, 0 to 19 ns apart on the device.)"""
    start_of = _start_of_done(corpus_dir)
    assert start_of["copy-done.2"] == "copy-start.2"
    spans = host.async_ops
    checked = 0
    for device, events in raw["spans"].items():
        ops = raw["ops"][device]
        starts = {(name, host_start): start for name, host_start, _, start, _ in ops}
        ends = {(name, host_end): end for name, _, host_end, _, end in ops}
        want = sorted(
            (
                done,
                starts[(start_of[done], host_start)] - raw["base_ps"],
                ends[(done, host_end)] - raw["base_ps"],
            )
            for done, host_start, host_end in events
        )
        mine = spans["device"] == device
        begin = spans["start_ps"][mine]
        got = sorted(
            zip(spans["op_name"][mine], begin, begin + spans["duration_ps"][mine], strict=True)
        )
        assert got == want, f"TPU:{device}"
        checked += len(got)
    assert checked == 600


def test_ops_stay_inside_their_module_runs_and_steps(host: Any, trace_path: Path) -> None:
    """Module runs carry no device stats; moved onto the device's clock, every op still lies
    inside a run of its device, and inside the step it is counted in."""
    ops, runs = host.ops, host.module_runs
    for device in np.unique(ops["device"]):
        mine = ops["device"] == device
        theirs = runs["device"] == device
        order = np.argsort(runs["start_ps"][theirs])
        run_start = runs["start_ps"][theirs][order]
        run_end = run_start + runs["duration_ps"][theirs][order]
        start = ops["start_ps"][mine]
        slot = np.searchsorted(run_start, start, side="right") - 1
        assert (slot >= 0).all()
        assert (start + ops["duration_ps"][mine] <= run_end[slot]).all(), f"TPU:{device}"
    profile = profan.load(str(trace_path), use_cache=False)
    stepped = profile.ops.dropna(subset=["step"])
    assert len(stepped) >= 400 * 4 * 3  # every run of jit_f: 15 ops on each of 4 devices
    windows = profile.steps.set_index("step")
    step = stepped["step"].astype(int)
    start = stepped["start_s"].to_numpy()
    end = start + stepped["duration_s"].to_numpy()
    assert (start >= windows.loc[step, "start_s"].to_numpy() - 1e-9).all()
    assert (end <= windows.loc[step, "end_s"].to_numpy() + 1e-9).all()

"""``profan export --output FILE.json[.gz]``: Chrome Trace Event JSON of real traces.

The file is checked against the Trace Event Format (the JSON Object Format: ``traceEvents``,
``displayTimeUnit``, ``otherData``; the fields each phase requires: complete events ``X``,
counters ``C``, metadata ``M``; and what trace viewers assume of complete events: on one thread
they nest, never partly overlap), its slices against the trace's op events and profan's own
figures, and its counters against the chip: nothing achieved above what the roofline allows.
``test_export_perfetto.py`` reads the same files with an independent parser.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from profan.cli import main
from profan.export import exportable
from profan.export.counters import SERIES
from profan.export.figures import EFFICIENCY, op_args
from tests.conftest import FIXTURES_DIR, REPO_ROOT, InCorpus, located, named_params

ROOT = REPO_ROOT
TPU_TRACE = InCorpus("traces/tpu_v6e_inference.xplane.pb")
TRACES: dict[str, Path | InCorpus] = {
    "cpu": FIXTURES_DIR / "transformer",
    "pod": FIXTURES_DIR / "multihost",
    "gpu": FIXTURES_DIR / "gpu_transformer",
    "tpu": TPU_TRACE,
}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name",
                  "thread_sort_index"}  # fmt: skip


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def trace_event_format_errors(document: Any) -> list[str]:
    """What breaks the Trace Event Format's rules in a JSON Object Format document (empty when
    nothing does)."""
    errors: list[str] = []
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents array"]
    if document.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        errors.append("displayTimeUnit must be ms or ns")
    if not isinstance(document.get("otherData", {}), dict):
        errors.append("otherData must be an object")
    for index, event in enumerate(document["traceEvents"]):
        where = f"event {index}"
        if not isinstance(event, dict):
            errors.append(f"{where}: not an object")
            continue
        phase = event.get("ph")
        if not isinstance(event.get("name"), str):
            errors.append(f"{where}: name must be a string")
        if not isinstance(event.get("pid"), int):
            errors.append(f"{where}: pid must be an integer")
        if "args" in event and not isinstance(event["args"], dict):
            errors.append(f"{where}: args must be an object")
        if phase == "X":
            if not isinstance(event.get("tid"), int):
                errors.append(f"{where}: X needs an integer tid")
            if not _is_number(event.get("ts")):
                errors.append(f"{where}: X needs a numeric ts")
            if not _is_number(event.get("dur")) or event["dur"] < 0:
                errors.append(f"{where}: X needs a non-negative numeric dur")
        elif phase == "C":
            if not _is_number(event.get("ts")):
                errors.append(f"{where}: C needs a numeric ts")
            args = event.get("args")
            if not isinstance(args, dict) or not args or not all(map(_is_number, args.values())):
                errors.append(f"{where}: C needs args of numbers")
        elif phase == "M":
            name = event.get("name")
            if name not in METADATA_NAMES:
                errors.append(f"{where}: unknown metadata event {name!r}")
                continue
            if name.startswith("thread") and not isinstance(event.get("tid"), int):
                errors.append(f"{where}: {name} needs an integer tid")
            args = event.get("args", {})
            if name.endswith("_name") and not isinstance(args.get("name"), str):
                errors.append(f"{where}: {name} needs args.name")
            if name.endswith("sort_index") and not isinstance(args.get("sort_index"), int):
                errors.append(f"{where}: {name} needs an integer args.sort_index")
        else:
            errors.append(f"{where}: phase {phase!r} is not one profan writes")
    return errors


def nesting_errors(events: list[dict[str, Any]]) -> list[str]:
    """Complete events of one thread that partly overlap (viewers expect them to nest); times
    compared in whole nanoseconds, as the file writes them."""
    errors = []
    by_thread: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for event in events:
        if event.get("ph") == "X":
            start = round(event["ts"] * 1000)
            by_thread[(event["pid"], event["tid"])].append(
                (start, start + round(event["dur"] * 1000))
            )
    for thread, spans in by_thread.items():
        open_ends: list[int] = []
        for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            if open_ends and end > open_ends[-1]:
                errors.append(
                    f"{thread}: [{start}, {end}] ns partly overlaps one ending {open_ends[-1]}"
                )
            open_ends.append(end)
    return errors


def test_the_validator_rejects_what_breaks_the_format() -> None:
    """Synthetic bad events, one per rule (the validator must be able to fail)."""
    bad = {
        "traceEvents": [
            {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": -1},
            {"ph": "C", "name": "c", "pid": 1, "ts": 0, "args": {"v": "x"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "args": {"name": "t"}},
            {"ph": "M", "name": "bogus", "pid": 1, "args": {}},
            {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 0},
        ],
        "displayTimeUnit": "s",
    }
    assert len(trace_event_format_errors(bad)) == 6
    overlapping = [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
    ]
    assert nesting_errors(overlapping)


@pytest.fixture(scope="module", params=named_params(dict(sorted(TRACES.items()))))
def chrome(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """(name, trace, the parsed document, the path written) of each trace's export."""
    trace = located(request, TRACES[request.param])
    suffix = ".json.gz" if request.param in ("cpu", "tpu") else ".json"
    target = tmp_path_factory.mktemp(f"chrome-{request.param}") / f"trace{suffix}"
    assert main(["export", str(trace), "--output", str(target)]) == 0
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(target, "rt", encoding="utf-8") as handle:
        document = json.load(handle)
    return request.param, trace, document, target


def test_the_file_follows_the_trace_event_format(chrome) -> None:  # type: ignore[no-untyped-def]
    _, _, document, target = chrome
    if target.name.endswith(".gz"):
        assert target.read_bytes()[:2] == b"\x1f\x8b"
    assert trace_event_format_errors(document) == []
    assert nesting_errors(document["traceEvents"]) == []
    phases = Counter(event["ph"] for event in document["traceEvents"])
    assert phases["X"] and phases["C"] and phases["M"]


def test_one_process_per_device_named_and_op_slices_carry_profans_args(chrome) -> None:  # type: ignore[no-untyped-def]
    name, trace, document, _ = chrome
    events = document["traceEvents"]
    export = exportable(str(trace))
    profile = export.analysis.profile
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    devices = profile.ops.groupby(["host", "device"], observed=True).ngroups
    assert len(processes) == devices
    if name == "pod":
        assert {label.split()[0] for label in processes.values()} == set(profile.device.hosts)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("name") == "thread_name"}  # fmt: skip
    ops = [e for e in events if e["ph"] == "X" and e.get("cat") != "step"]
    # one slice per op event: per execution on CPU and TPU (and per async span on TPU), per
    # kernel on GPU
    spans = profile.async_ops if profile.async_ops is not None else profile.ops.iloc[:0]
    if name == "gpu":
        assert len(ops) >= len(profile.ops)
        assert {e["args"]["kernel"] for e in ops} and all("kernel" in e["args"] for e in ops)
    else:
        assert len(ops) == len(profile.ops) + len(spans)
    if name == "tpu":
        assert len(spans)
    # (an async done's transfer span and wait are its own: not on every op's slices)
    only_some = {"profan_note", "profan_transfer_span_us", "profan_exposed_wait_us"}
    keys = {key for key, _ in op_args(export.figures.ops[0])} - only_some
    figures = {(op.record.module, op.record.name): dict(op_args(op)) for op in export.figures.ops}
    for event in ops:
        args = event["args"]
        assert keys <= set(args) and EFFICIENCY in args
        assert threads[(event["pid"], event["tid"])] != "Steps"
        expected = figures[(args["profan_module"], args["profan_op"])]
        assert event["name"] == args["profan_op"] and event["cat"] == expected["profan_category"]
        assert args["profan_bound"] == expected["profan_bound"]
        assert args["profan_flags"] == expected["profan_flags"]
        if isinstance(expected["profan_ideal_us"], float):
            assert args["profan_ideal_us"] == pytest.approx(expected["profan_ideal_us"], rel=1e-5)
    if name != "gpu":  # an execution in a step says which
        in_steps = int(profile.ops["step"].notna().sum()) + int(spans["step"].notna().sum())
        assert sum("step" in e["args"] for e in ops) == in_steps
    if name == "tpu":  # overlapping async spans take more lanes: "Async XLA Ops [2]", …
        lines = {thread.split(" [")[0] for thread in threads.values()}
        assert lines == {"XLA Ops", "Async XLA Ops", "Steps"}
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(steps) == len(profile.steps) * devices


def test_counters_never_exceed_the_roofline_or_the_chip(chrome) -> None:  # type: ignore[no-untyped-def]
    """Per device and bin: achieved <= at the roofline (an execution counts at most at its
    roofline rate), and FLOP/s at most the chip's peak for any dtype, bytes/s at most its HBM
    bandwidth; the achieved work integrated over time is the work of the executions."""
    _, trace, document, _ = chrome
    export = exportable(str(trace))
    chip = export.analysis.score.chip
    peak_flops = max(chip.peak_flops.values()) / chip.devices_per_chip
    peak_hbm = chip.device_hbm_bytes_per_s
    series: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    for event in document["traceEvents"]:
        if event["ph"] == "C":
            ((unit, value),) = event["args"].items()
            series[(event["pid"], f"{event['name']} {unit}")].append((event["ts"], value))
    expected = {f"{counter} {unit}" for counter, unit in SERIES}
    assert {key for _, key in series} == expected
    for (pid, key), points in series.items():
        assert points[-1][1] == 0  # every track ends at zero
        ceiling = peak_flops if "FLOP/s" in key else peak_hbm
        assert max(value for _, value in points) <= ceiling * (1 + 1e-6), (pid, key)
    for (pid, key), points in series.items():
        if not key.startswith("achieved"):
            continue
        roofline = dict(series[(pid, key.replace("achieved", "roofline"))])
        for ts, value in points:
            if ts in roofline:
                assert value <= roofline[ts] * (1 + 1e-5) + 1e-9, (pid, key, ts)
    # the achieved FLOPs, integrated over time, are the FLOPs of the synchronous executions
    # (each at most at its roofline rate), to the precision of six-digit values
    figures = export.figures
    total = 0.0
    for row, op_index in enumerate(figures.row_op):
        op = figures.ops[op_index]
        if op_index >= 0 and op.flops and not op.asynchronous and op.ideal_s:
            measured = float(figures.duration_s[row])
            total += op.flops * min(1.0, measured / max(op.ideal_s, 1e-30)) if measured > 0 else 0
    integrated = 0.0
    for (_, key), points in series.items():
        if key == "achieved FLOP/s":
            for (start, value), (end, _) in itertools.pairwise(points):
                integrated += value * (end - start) * 1e-6
    # bins where overlapping executions add up past the peak show the peak: less, never more
    assert integrated <= total * (1 + 2e-3) + 1e-9
    flops_capped = any(
        value >= peak_flops * (1 - 1e-6)
        for (_, key), points in series.items()
        if key == "achieved FLOP/s"
        for _, value in points
    )
    if total and not flops_capped:
        assert integrated == pytest.approx(total, rel=2e-3)


def test_a_trace_viewer_json_input_exports_its_executions(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A profile read from the trace viewer's JSON (no xplane beside it) has no lines to join:
    each device's executions go on one thread; it has no xplane to annotate (exit 2)."""
    (source,) = sorted((FIXTURES_DIR / "transformer" / "trace").rglob("*.trace.json.gz"))
    target = tmp_path / "from_json.json"
    assert main(["export", str(source), "--output", str(target)]) == 0
    document = json.loads(target.read_text(encoding="utf-8"))
    assert trace_event_format_errors(document) == []
    assert nesting_errors(document["traceEvents"]) == []
    export = exportable(str(source))
    ops = [e for e in document["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    assert len(ops) == len(export.analysis.profile.ops) > 0
    assert all("profan_bound" in e["args"] for e in ops)
    assert main(["export", str(source), "--output", str(tmp_path / "x.xplane.pb")]) == 2
    assert "no .xplane.pb to annotate" in capsys.readouterr().err

"""``profan export --output FILE.xplane.pb``: the annotated copy of real traces (the CPU
transformer fixture, the 3-host pod fixture, the H100 fixture with CUDA-graph kernels, the TPU
v6e corpus trace).

What is checked: the input is byte-for-byte unchanged (hash before and after); every op event of
the copy carries profan's stats and they are those of ``profan report``; apart from them the copy
is the original (every plane, line, event and metadata compares equal once profan's stats are
taken out); profan reads the copy as it reads the original; XProf's own ``trace_viewer``
converter shows profan's args on every op event it shows; the trace directory may be read-only
and nothing is ever written inside it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import stat
from pathlib import Path

import pytest

from profan.cli import main
from profan.export import exportable
from profan.export.figures import EFFICIENCY, UNKNOWN, op_args
from profan.trace import load
from profan.trace.schema import load_schema
from tests.conftest import FIXTURES_DIR, REPO_ROOT, InCorpus, located, named_params

ROOT = REPO_ROOT
TPU_TRACE = InCorpus("traces/tpu_v6e_inference.xplane.pb")


@functools.cache
def _names() -> frozenset[str]:
    """Every stat name an annotated op event carries."""
    report = exportable(str(FIXTURES_DIR / "transformer"))
    op = next(o for o in report.figures.ops if o.record.note is None)
    return frozenset({name for name, _ in op_args(op)} | {EFFICIENCY})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _host_files(trace: Path) -> list[Path]:
    return sorted(trace.rglob("*.xplane.pb")) if trace.is_dir() else [trace]


def _space(path: Path):  # type: ignore[no-untyped-def]
    return load_schema("xplane.proto")["tensorflow.profiler.XSpace"].FromString(path.read_bytes())


def _op_events(space) -> dict[tuple[str, str], int]:  # type: ignore[no-untyped-def]
    """Op events per (plane, line), by the trace's own marks (independently of profan's
    readers): TPU ``XLA Ops`` and ``Async XLA Ops`` events; GPU and CPU events holding an
    ``hlo_op`` stat."""
    device_planes = any(p.name.startswith("/device:") for p in space.planes)
    counts: dict[tuple[str, str], int] = {}
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            if plane.name.startswith("/device:TPU"):
                found = len(line.events) if line.name in ("XLA Ops", "Async XLA Ops") else 0
            elif plane.name.startswith("/device:GPU") or (
                plane.name == "/host:CPU" and not device_planes
            ):
                found = sum(
                    any(names.get(s.metadata_id) == "hlo_op" for s in event.stats)
                    for event in line.events
                )
            else:
                found = 0
            if found:
                counts[(plane.name, line.name)] = found
    return counts


def _annotated_events(space) -> dict[tuple[str, str], int]:  # type: ignore[no-untyped-def]
    counts: dict[tuple[str, str], int] = {}
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            found = sum(
                any(names.get(s.metadata_id) == "profan_category" for s in event.stats)
                for event in line.events
            )
            if found:
                counts[(plane.name, line.name)] = found
    return counts


def _without_profan(space, original):  # type: ignore[no-untyped-def]
    """The copy with profan's stats and stat metadata taken out."""
    for plane, before in zip(space.planes, original.planes, strict=True):
        added = {key for key in plane.stat_metadata if key not in before.stat_metadata}
        for line in plane.lines:
            for event in line.events:
                kept = [s for s in event.stats if s.metadata_id not in added]
                del event.stats[:]
                event.stats.extend(kept)
        for key in added:
            del plane.stat_metadata[key]
    return space


TRACES: dict[str, Path | InCorpus] = {
    "cpu": FIXTURES_DIR / "transformer",
    "pod": FIXTURES_DIR / "multihost",
    "gpu": FIXTURES_DIR / "gpu_transformer",
    "tpu": TPU_TRACE,
}


@pytest.fixture(scope="module", params=named_params(dict(sorted(TRACES.items()))))
def exported(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """(trace, {input file: its annotated copy}) for each trace, written by the CLI."""
    trace = located(request, TRACES[request.param])
    inputs = _host_files(trace)
    before = {path: _sha256(path) for path in inputs}
    out = tmp_path_factory.mktemp(f"export-{request.param}")
    if len(inputs) == 1:
        target = out / "annotated.xplane.pb"
        assert main(["export", str(trace), "--output", str(target)]) == 0
        copies = {inputs[0]: target}
    else:
        assert main(["export", str(trace), "--output", str(out), "--format", "xplane"]) == 0
        copies = {path: out / "plugins" / "profile" / path.parent.name / path.name
                  for path in inputs}  # fmt: skip
    assert {path: _sha256(path) for path in inputs} == before, "the input changed"
    return request.param, trace, copies


def test_every_op_event_carries_profans_stats(exported) -> None:  # type: ignore[no-untyped-def]
    _, _, copies = exported
    names = _names()
    for source, copy in copies.items():
        original, annotated = _space(source), _space(copy)
        expected = _op_events(original)
        assert expected, f"{source}: no op events found"
        assert _annotated_events(annotated) == expected
        for plane in annotated.planes:
            stat_names = {key: meta.name for key, meta in plane.stat_metadata.items()}
            for line in plane.lines:
                for event in line.events:
                    carried = {stat_names[s.metadata_id] for s in event.stats} & (
                        names | {"profan_note"}
                    )
                    assert not carried or names <= carried, (plane.name, line.name, carried)


def test_the_copy_is_the_original_plus_profans_stats(exported) -> None:  # type: ignore[no-untyped-def]
    _, _, copies = exported
    for source, copy in copies.items():
        original = _space(source)
        assert _without_profan(_space(copy), original) == original


def test_profan_reads_the_copy_as_the_original(exported, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _, trace, copies = exported
    hlo = trace / "hlo" if trace.is_dir() and (trace / "hlo").is_dir() else None
    columns = ["device", "module", "op_name", "start_s", "duration_s", "matched"]
    for source, copy in copies.items():
        before = load(source, hlo=hlo, use_cache=False)
        after = load(copy, hlo=hlo, use_cache=False)
        assert len(before.ops) and before.ops[columns].equals(after.ops[columns])


def _report_values(trace: Path) -> dict[tuple[str, str], dict[str, str]]:
    """profan's figures of every op (by module and op name) as text, the way XProf prints
    them: 6 significant digits."""
    export = exportable(str(trace))
    out: dict[tuple[str, str], dict[str, str]] = {}
    for op in export.figures.ops:
        out[(op.record.module, op.record.name)] = {
            name: value if isinstance(value, str) else f"{value:.6g}" for name, value in op_args(op)
        }
    return out


def _xprof_trace_viewer(copy: Path, tmp_path: Path) -> dict:  # type: ignore[type-arg]
    raw_to_tool_data = pytest.importorskip(
        "xprof.convert.raw_to_tool_data", reason="xprof is not installed (.[xprof])"
    )
    folder = tmp_path / "xprof"
    folder.mkdir(parents=True)
    private = folder / copy.name  # xprof may write caches beside its input
    shutil.copy(copy, private)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(private)], "trace_viewer", {})
    return json.loads(data)


def test_xprof_trace_viewer_shows_profans_args(exported, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """XProf converts the copy like any trace, and every op event it shows (XProf leaves out
    zero-length events, and shows TPU async spans only as lines it derives) has profan's args,
    equal to profan's own figures for that op."""
    name, trace, copies = exported
    source, copy = next(iter(copies.items()))
    viewer = _xprof_trace_viewer(copy, tmp_path)
    events = [e for e in viewer["traceEvents"] if e.get("ph") == "X"]
    threads = {
        (e["pid"], e.get("tid")): e["args"]["name"]
        for e in viewer["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    if name == "tpu":
        shown = [e for e in events if threads.get((e["pid"], e["tid"])) == "XLA Ops"]
    else:
        shown = [e for e in events if "hlo_op" in e.get("args", {})]
    assert shown
    with_args = [e for e in shown if "profan_category" in e["args"]]
    assert len(with_args) == len(shown)
    # XProf's view of the original shows the same op events, without profan's args
    original = _xprof_trace_viewer(source, tmp_path / "original")
    assert not any("profan_category" in e.get("args", {}) for e in original["traceEvents"])
    figures = _report_values(trace)
    for event in with_args:
        args = event["args"]
        module = args.get("hlo_module")
        op = args["profan_op"]
        expected = figures.get((module, op)) if module else None
        if expected is None:  # TPU events name their program in event metadata only
            expected = next(v for (m, o), v in figures.items() if o == op)
        for key in ("profan_category", "profan_bound", "profan_flags", "profan_source",
                    "profan_flops_source", "profan_bytes_source"):  # fmt: skip
            assert args[key] == expected[key], (op, key)
        if args["profan_ideal_us"] != UNKNOWN:
            assert float(args["profan_ideal_us"]) == pytest.approx(
                float(expected["profan_ideal_us"]), rel=1e-5
            )
        if name != "tpu" and not args["hlo_op"].startswith("command_buffer"):
            assert args["hlo_op"] == op  # the event was joined to its own op


def test_a_read_only_trace_directory_works_and_is_never_written(tmp_path) -> None:
    source = FIXTURES_DIR / "transformer"
    trace = tmp_path / "ro"
    shutil.copytree(source, trace)
    files = sorted(p for p in trace.rglob("*") if p.is_file())
    hashes = {p: _sha256(p) for p in files}
    for path in [*files, *sorted((p for p in trace.rglob("*") if p.is_dir()), reverse=True), trace]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        target = tmp_path / "out" / "copy.xplane.pb"
        assert main(["export", str(trace), "--output", str(target)]) == 0
        assert target.stat().st_size > 0
        inside = trace / "trace" / "copy.xplane.pb"
        assert main(["export", str(trace), "--output", str(inside)]) == 2
        (xplane,) = (p for p in files if p.name.endswith(".xplane.pb"))
        assert main(["export", str(xplane), "--output", str(xplane)]) == 2
        assert sorted(p for p in trace.rglob("*") if p.is_file()) == files
        assert {p: _sha256(p) for p in files} == hashes
    finally:
        for path in [trace, *trace.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_form_and_target_errors_are_one_line_with_exit_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    trace = str(FIXTURES_DIR / "transformer")
    assert main(["export", trace, "--output", str(tmp_path / "x.txt")]) == 2
    assert "cannot tell the form" in capsys.readouterr().err
    pod = str(FIXTURES_DIR / "multihost")
    assert main(["export", pod, "--output", str(tmp_path / "pod.xplane.pb")]) == 2
    assert "3 hosts" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_pod_read_reduced_is_a_clear_error(tmp_path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Above 256 MiB of host files profan reads a pod reduced (no per-event table for most
    hosts): export says so and how to export host by host, exit 2, nothing written."""
    import dataclasses

    from profan.trace import api

    real = api.load_run
    monkeypatch.setattr(
        api,
        "load_run",
        lambda path, found, opts, *dumped: real(
            path, found, dataclasses.replace(opts, form="reduced"), *dumped
        ),
    )
    target = tmp_path / "pod.json"
    assert main(["export", str(FIXTURES_DIR / "multihost"), "--output", str(target)]) == 2
    error = capsys.readouterr().err
    assert "read this pod reduced" in error and "one host at a time" in error
    assert not target.exists() and not list(tmp_path.iterdir())

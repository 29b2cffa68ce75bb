"""Bounded op event counts (issue 26, D17; ``profan.trace.bounds``) and ``file://`` URLs from
Python.  The tiny-event traces are synthetic (named so): the fixture mlp trace's planes and
metadata with its /host:CPU lines replaced by one line of N copies of one real op event's
stats, ``gap_ps`` apart."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import profan
from profan.errors import EXIT_BAD_INPUT, TraceError
from profan.trace.bounds import MIN_OP_SPACING_PS, SUSTAINED_EVENTS
from profan.trace.schema import load_schema
from profan.trace.wire import encode_varint
from tests.conftest import FIXTURES_DIR, REPO_ROOT

REPO = REPO_ROOT
MLP = FIXTURES_DIR / "mlp"
# stats of a real op event of the mlp trace: hlo_op, hlo_module, program_id, device_ordinal
_OP_STATS = bytes.fromhex("22040814381522040816200a220408172018220408182000")


pytestmark = pytest.mark.usefixtures("private_cache")


def synthetic_tiny_events(path: Path, count: int, gap_ps: int, duration_ps: int = 500) -> Path:
    """Write the synthetic trace (see the module's docstring) of ``count`` op events."""
    space_view = load_schema("xplane.proto")["tensorflow.profiler.XSpaceView"]
    (source,) = glob.glob(str(MLP / "trace" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    space = space_view.FromString(Path(source).read_bytes())
    offsets = np.arange(count, dtype=np.int64) * gap_ps
    # events grouped by the width of their offset's varint: each group is one uint8 matrix
    widths = np.ones(count, dtype=np.int64)
    for shift in range(7, 64, 7):
        widths += offsets >= (1 << shift)
    events = []
    for width in np.unique(widths).tolist():
        values = offsets[widths == width].astype(np.uint64)
        varint = np.stack(
            [
                ((values >> np.uint64(7 * i)) & np.uint64(0x7F)).astype(np.uint8)
                for i in range(width)
            ],
            axis=1,
        )
        varint[:, :-1] |= 0x80
        body_tail = b"\x18" + encode_varint(duration_ps) + _OP_STATS
        size = 3 + width + len(body_tail)
        head = np.frombuffer(b"\x22" + encode_varint(size) + b"\x08\x33\x10", dtype=np.uint8)
        tail = np.frombuffer(body_tail, dtype=np.uint8)
        rows = len(values)
        events.append(
            np.concatenate(
                [
                    np.broadcast_to(head, (rows, len(head))),
                    varint,
                    np.broadcast_to(tail, (rows, len(tail))),
                ],
                axis=1,
            ).tobytes()
        )
    out = bytearray()
    for plane in space.planes:
        if plane.name == "/host:CPU":
            timestamp_ns = plane.lines[0].timestamp_ns
            del plane.lines[:]
            line = b"\x12\x09synthetic\x18" + encode_varint(timestamp_ns) + b"".join(events)
            body = plane.SerializeToString() + b"\x1a" + encode_varint(len(line)) + line
        else:
            body = plane.SerializeToString()
        out += b"\x0a" + encode_varint(len(body)) + body
    path.write_bytes(bytes(out))
    return path


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "profan", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_synthetic_denser_than_any_device_is_refused_at_once(tmp_path: Path) -> None:
    # 1e6 events 1 ns apart: refused after the first 65,536, in seconds and little memory
    path = synthetic_tiny_events(tmp_path / "synthetic_dense.xplane.pb", 10**6, gap_ps=1000)
    started = time.monotonic()
    done = _cli("report", str(path), env={"PROFAN_WORKERS": "1"})
    elapsed = time.monotonic() - started
    assert done.returncode == EXIT_BAD_INPUT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "more than one op per 10 ns" in lines[0], done.stderr
    assert str(path) in lines[0] and "Traceback" not in done.stderr
    assert elapsed < 60  # (~9 s on a busy 2-core machine, imports included; was minutes)


def test_synthetic_just_sparse_enough_is_read(tmp_path: Path) -> None:
    count = SUSTAINED_EVENTS + 10
    path = synthetic_tiny_events(tmp_path / "synthetic_sparse.xplane.pb", count, MIN_OP_SPACING_PS)
    profile = profan.load(str(path), hlo=str(MLP / "hlo"))
    assert len(profile.ops) == count


def test_synthetic_count_above_max_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = synthetic_tiny_events(tmp_path / "synthetic_count.xplane.pb", 20_000, gap_ps=10**6)
    monkeypatch.setenv("PROFAN_MAX_EVENTS", "19999")
    with pytest.raises(TraceError) as caught:
        profan.load(str(path), hlo=str(MLP / "hlo"))
    assert "more than 19,999 op events" in str(caught.value)
    assert "PROFAN_MAX_EVENTS" in str(caught.value) and "\n" not in str(caught.value)
    monkeypatch.setenv("PROFAN_MAX_EVENTS", "20k")  # just enough
    assert len(profan.load(str(path), hlo=str(MLP / "hlo")).ops) == 20_000


def test_max_events_that_is_not_a_number(tmp_path: Path) -> None:
    done = _cli("report", str(MLP), env={"PROFAN_MAX_EVENTS": "lots"})
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stderr.strip().count("\n") == 0 and "PROFAN_MAX_EVENTS" in done.stderr


def test_real_traces_are_far_below_the_density_bound(corpus_dir: Path) -> None:
    # every real trace at hand: its densest device runs < 1/50 of the bound's op rate
    paths = [MLP, FIXTURES_DIR / "transformer", FIXTURES_DIR / "gpu_transformer"]
    paths += [corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"]
    for path in paths:
        ops = profan.load(str(path)).ops
        for _, device in ops.groupby(["host", "device"]):
            if len(device) < 100:
                continue
            span_s = (device["start_s"] + device["duration_s"]).max() - device["start_s"].min()
            assert len(device) * MIN_OP_SPACING_PS * 50 < span_s * 1e12, path


def test_file_url_from_python() -> None:
    # (failed before: 'no such file or directory' for profan.load and profan.report)
    url = f"file://{MLP}"
    assert len(profan.load(url).ops) == len(profan.load(str(MLP)).ops)
    report = profan.report(url)
    assert len(report.ops) == len(profan.report(str(MLP)).ops)
    hlo = profan.report(f"file://{MLP / 'trace'}", hlo=f"file://localhost{MLP / 'hlo'}")
    assert len(hlo.ops) == len(report.ops)

"""One big host read by several processes: the shares of its planes and lines, merged, are the
host that one read gives (``xplane.read_host(part=)``, ``xplane.merge_parts``), and a profile
loaded that way equals the one loaded by a single process.

Real traces of every kind: the project's CPU fixtures (op events on the host plane's thread
lines), the corpus's TPU trace (device planes with op, async and module lines beside a host
plane) and the GPU fixture (kernels grouped per op across a device plane's streams).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import profan
from profan.errors import TraceError
from profan.trace.xplane import merge_parts, read_host

from .conftest import FIXTURES_DIR, InCorpus, located, named_params

# the module (``profan.trace.load`` is also the name of the function it re-exports)
load_module = importlib.import_module("profan.trace.load")
prefetch_module = importlib.import_module("profan.trace.prefetch")


def _xplane(folder: Path) -> Path:
    return next(folder.rglob("*.xplane.pb"))


TRACES: dict[str, Path | InCorpus] = {
    "cpu-transformer": _xplane(FIXTURES_DIR / "transformer"),
    "cpu-mlp": _xplane(FIXTURES_DIR / "mlp"),
    "gpu-transformer": _xplane(FIXTURES_DIR / "gpu_transformer"),
    "tpu-v6e": InCorpus("traces/tpu_v6e_inference.xplane.pb"),
}


def _same_columns(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert pd.Series(a[name]).equals(pd.Series(b[name])), name


@pytest.mark.parametrize("name", named_params(TRACES))
@pytest.mark.parametrize("count", [2, 3, 5])
def test_merged_shares_are_the_whole_host(
    name: str, count: int, request: pytest.FixtureRequest
) -> None:
    path = located(request, TRACES[name])
    whole = read_host(str(path), "h")
    parts = [read_host(str(path), "h", part=(index, count)) for index in range(count)]
    if name.startswith("cpu"):  # op events on every thread line: each share reads some
        assert all(len(part.ops.get("start_ps", ())) for part in parts)
    merged = merge_parts(parts)
    assert whole.ops or whole.graph_kernels
    for field in ("ops", "async_ops", "module_runs"):
        _same_columns(getattr(whole, field), getattr(merged, field))
    assert merged.step_marks == whole.step_marks
    assert merged.module_names == whole.module_names
    assert merged.notes == whole.notes
    assert merged.devices == whole.devices
    assert (merged.kind, merged.base_ns) == (whole.kind, whole.base_ns)
    assert merged.hlo_protos.keys() == whole.hlo_protos.keys()
    assert dict(merged.graph_kernels).keys() == dict(whole.graph_kernels).keys()
    for column, arrays in whole.graph_kernels.items():
        assert np.array_equal(
            np.concatenate(arrays), np.concatenate(merged.graph_kernels[column])
        ), column


def test_a_big_host_is_read_in_shares_and_loads_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``profan.load`` of one host above ``SPLIT_HOST_BYTES`` (lowered here to the fixture's
    size) reads it in two processes; the profile equals a one-process read (``workers=1``)."""
    trace = FIXTURES_DIR / "transformer" / "trace"
    calls: list[tuple[int, int] | None] = []
    original = load_module._read_one

    def counting(task: tuple) -> object:  # what the parent reads (a worker has its own copy)
        calls.append(task[4])
        return original(task)

    monkeypatch.setattr(prefetch_module, "SPLIT_HOST_BYTES", 0)  # (host_processes' threshold)
    monkeypatch.setattr(load_module, "_read_one", counting)
    alone = profan.load(str(trace), workers=1, use_cache=False)
    assert calls == [None]
    shared = profan.load(str(trace), workers=2, use_cache=False)  # read again, not re-opened
    assert calls[1:] == [(1, 2)]  # the parent read the last share (with the programs)
    pd.testing.assert_frame_equal(alone.ops, shared.ops)
    pd.testing.assert_frame_equal(alone.steps, shared.steps)
    assert alone.notes == shared.notes
    assert [u.reason for u in alone.unmatched] == [u.reason for u in shared.unmatched]
    assert alone.hlo_protos == shared.hlo_protos


def test_a_damaged_host_read_in_shares_is_the_same_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A truncated file read in shares fails as a one-process read does: a TraceError naming
    the file (whichever process met the damage), never a traceback or a hang."""
    source = _xplane(FIXTURES_DIR / "transformer")
    damaged = tmp_path / "run" / "plugins" / "profile" / "2026_01_01_00_00_00" / "h.xplane.pb"
    damaged.parent.mkdir(parents=True)
    data = source.read_bytes()
    damaged.write_bytes(data[: len(data) * 2 // 3])  # cut inside the host plane's lines
    monkeypatch.setattr(prefetch_module, "SPLIT_HOST_BYTES", 0)  # (host_processes' threshold)
    errors = []
    for workers in (1, 2):
        with pytest.raises(TraceError) as caught:
            profan.load(str(tmp_path / "run"), workers=workers)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert str(damaged) in errors[1]

"""The cross-host view on the real multi-host fixture (3 JAX processes x 2 CPU devices, gloo
all-reduce across all of them; one process sleeps before every step, see its meta.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import profan
from profan.trace.schema import load_schema

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.fixture(scope="module")
def meta(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "multihost" / "meta.json").read_text())


@pytest.fixture(scope="module")
def profile(fixtures_dir: Path) -> profan.trace.Profile:
    return profan.load(fixtures_dir / "multihost" / "trace")


def test_every_host_and_its_devices(profile: profan.trace.Profile, meta: dict) -> None:
    assert profile.hosts is not None
    assert {row.host: row.devices for row in profile.hosts.hosts} == {
        h["host"]: h["devices"] for h in meta["hosts"]
    }
    assert profile.hosts.steps == list(range(meta["steps"]))


def test_the_sleeping_host_is_the_straggler_by_its_sleep(
    profile: profan.trace.Profile, meta: dict
) -> None:
    analysis = profile.hosts
    assert analysis.stragglers == [meta["slow_host"]]
    slow = next(row for row in analysis.hosts if row.host == meta["slow_host"])
    sleep = meta["sleep_s"]
    assert abs(slow.late_median_s - sleep) <= 0.2 * sleep
    for step, late in slow.late_s.items():
        assert abs(late - meta["slept_s"][step]) <= 0.2 * sleep, step
        assert abs(slow.arrival_late_s[step] - meta["slept_s"][step]) <= 0.2 * sleep
    for row in analysis.hosts:
        if row.host != meta["slow_host"]:
            assert abs(row.late_median_s) < 0.2 * sleep


def test_skew_and_waiting_follow_the_sleep(profile: profan.trace.Profile, meta: dict) -> None:
    analysis = profile.hosts
    sleep, others = meta["sleep_s"], meta["processes"] - 1
    for step in analysis.steps:
        assert abs(analysis.skew_s[step] - sleep) <= 0.2 * sleep
        # every other host waits for the sleeper inside the all-reduce
        assert abs(analysis.wait_s[step] - others * sleep) <= 0.25 * others * sleep
    assert "all-reduce" in " ".join(analysis.shared_collectives)
    assert "aligned on the ends" in analysis.alignment


def _shift_clock(source: Path, target: Path, shift_ns: int) -> None:
    space_type = load_schema("xplane.proto")["tensorflow.profiler.XSpace"]
    space = space_type.FromString(source.read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            if line.timestamp_ns:
                line.timestamp_ns += shift_ns
    target.write_bytes(space.SerializeToString())


def test_clock_offset_synthetic_shift_is_aligned_away(
    fixtures_dir: Path, tmp_path: Path, meta: dict, profile: profan.trace.Profile
) -> None:
    """A real trace whose host clock is moved 2 s ahead: the lateness must not change."""
    run = next((fixtures_dir / "multihost" / "trace" / "plugins" / "profile").iterdir())
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    _shift_clock(run / "host2.xplane.pb", copy / "host2.xplane.pb", 2_000_000_000)
    shifted = profan.load(copy).hosts
    by_host = {row.host: row for row in shifted.hosts}
    before = {row.host: row for row in profile.hosts.hosts}
    assert abs(by_host["host2"].clock_offset_s - before["host2"].clock_offset_s - 2.0) < 1e-3
    assert shifted.stragglers == [meta["slow_host"]]
    for host, row in by_host.items():
        assert abs(row.late_median_s - before[host].late_median_s) < 1e-3


def test_one_host_has_no_cross_host_view(fixtures_dir: Path) -> None:
    assert profan.load(fixtures_dir / "mlp" / "trace").hosts is None


def test_map_summary_equals_the_summary_of_every_event(fixtures_dir: Path) -> None:
    # The map of the reduced form builds only SUMMARY_COLUMNS; its summary must be the one the
    # full per-event table gives, host by host.
    import importlib

    from profan.trace.hosts import summarize_host
    from profan.trace.pod import summarize_file

    load = importlib.import_module("profan.trace.load")
    files = sorted((fixtures_dir / "multihost" / "trace").rglob("*.xplane.pb"))
    assert len(files) >= 2
    for file in files:
        result = summarize_file((str(file), file.name, None, False))
        full = load.load_events(file, profan.trace.LoadOptions(workers=1, use_cache=False))
        every_event = summarize_host(file.name, full.ops, full.origin_ns, full.instruction)
        assert result.summary == every_event
        assert result.summary.collectives and result.summary.step_windows
        assert result.events == len(full.ops)

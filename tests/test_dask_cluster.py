"""The per-host map on a real Dask cluster (LocalCluster, 2 worker processes on 127.0.0.1) gives
exactly what local processes give."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import profan
from profan.cli import main

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed (pip install 'profan[dask]')"
)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_report_json_is_byte_identical_on_the_cluster(
    fixtures_dir: Path, scheduler: str, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setenv("PROFAN_SCHEDULER", "")  # (one the environment names would be used)
    trace = str(fixtures_dir / "multihost" / "trace")
    # --no-cache: both runs read the hosts (the second would otherwise reuse the first's report)
    local = _report(["report", trace, "--format", "json", "--no-cache"], capsys)
    argv = ["report", trace, "--format", "json", "--scheduler", scheduler, "--no-cache"]
    on_dask = _report(argv, capsys)
    assert on_dask == local
    assert json.loads(local)["summary"]


def test_reduced_form_is_identical_on_the_cluster(fixtures_dir: Path, scheduler: str) -> None:
    trace = fixtures_dir / "multihost" / "trace"
    local = profan.load(trace, form="reduced", workers=2, use_cache=False)
    remote = profan.load(trace, form="reduced", scheduler=scheduler, use_cache=False)
    assert json.dumps(remote.hosts.to_dict()) == json.dumps(local.hosts.to_dict())
    assert remote.ops.equals(local.ops)
    assert remote.device.count == local.device.count == 2  # the median host's devices
    assert remote.device.hosts == ["host0", "host1", "host2"]


def test_scheduler_from_the_environment(
    fixtures_dir: Path, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROFAN_SCHEDULER", scheduler)
    profile = profan.load(fixtures_dir / "multihost" / "trace", form="reduced", use_cache=False)
    assert profile.hosts is not None and len(profile.hosts.hosts) == 3


def test_unreachable_scheduler_is_one_line_exit_2(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("PROFAN_SCHEDULER", "")
    monkeypatch.setattr("profan.trace.executors.CONNECT_TIMEOUT_S", 2)
    trace = str(fixtures_dir / "multihost" / "trace")
    code = main(["report", trace, "--scheduler", address, "--no-cache"])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "Dask scheduler" in error

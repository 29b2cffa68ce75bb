"""Remote traces fail fast and quietly: ``gs://`` and ``s3://`` against an endpoint on
127.0.0.1 that refuses connections, or that accepts them and never answers, end in one line
(exit 2) within seconds, no library's traceback or log on stderr; ``file://`` URLs are local
paths."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LIBRARIES = {"gs": "gcsfs", "s3": "s3fs"}
# Seconds a loaded machine may add to the start (importing gcsfs alone takes 1.4 s on a busy one)
SLACK_S = float(os.environ.get("PROFAN_TEST_SLACK_S", "2"))


def _environment(protocol: str, port: int) -> dict[str, str]:
    endpoint = f"http://127.0.0.1:{port}"
    if protocol == "gs":
        return {"STORAGE_EMULATOR_HOST": endpoint, "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "profan-test",
        "AWS_SECRET_ACCESS_KEY": "profan-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


def _needs(protocol: str) -> None:
    if importlib.util.find_spec(LIBRARIES[protocol]) is None:
        pytest.skip(f"{LIBRARIES[protocol]} is not installed (pip install 'profan[pod-test]')")


@pytest.fixture()
def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield int(sock.getsockname()[1])


def _report(url: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "profan", "report", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    return done, time.perf_counter() - started


def _assert_one_line(done: subprocess.CompletedProcess, url: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"profan: error: {url}: "), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("protocol", ["gs", "s3"])
def test_unreachable_endpoint_is_one_line_within_seconds(protocol: str, closed_port: int) -> None:
    _needs(protocol)
    url = f"{protocol}://profan-bucket/trace"
    # (gcsfs and botocore retry refused connections with back-off: the deadline ends them)
    env = {**_environment(protocol, closed_port), "PROFAN_REMOTE_TIMEOUT": "1"}
    done, seconds = _report(url, env)
    _assert_one_line(done, url)
    assert seconds < 5 + SLACK_S, f"{seconds:.1f} s"


@pytest.mark.parametrize("protocol", ["gs", "s3"])
def test_endpoint_that_never_answers_ends_at_the_timeout(protocol: str, silent_port: int) -> None:
    _needs(protocol)
    url = f"{protocol}://profan-bucket/trace"
    env = {**_environment(protocol, silent_port), "PROFAN_REMOTE_TIMEOUT": "1"}
    done, seconds = _report(url, env)
    _assert_one_line(done, url)
    assert "PROFAN_REMOTE_TIMEOUT" in done.stderr
    assert seconds < 5 + SLACK_S, f"{seconds:.1f} s"


def test_bad_timeout_value_is_refused(silent_port: int) -> None:
    _needs("s3")
    env = {**_environment("s3", silent_port), "PROFAN_REMOTE_TIMEOUT": "soon"}
    done, _ = _report("s3://profan-bucket/trace", env)
    assert done.returncode == 2 and "PROFAN_REMOTE_TIMEOUT" in done.stderr, done.stderr


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_file_urls_are_local_paths(fixtures_dir: Path, kind: str) -> None:
    trace = fixtures_dir / "mlp" / "trace"
    path = next(trace.rglob("*.xplane.pb")) if kind == "file" else trace
    done, _ = _report(f"file://{path}", {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"profan report: {path}\n"), done.stdout[:200]
    assert "device   8 × CPU" in done.stdout


def test_file_url_of_another_machine_is_refused() -> None:
    done, _ = _report("file://elsewhere/trace", {})
    assert done.returncode == 2 and "absolute local path" in done.stderr, done.stderr

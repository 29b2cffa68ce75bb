"""Limits on what an input may cost, and processes that end with their command.

* A gzip bomb (made here: synthetic) is refused quickly and small, wherever profan gunzips.
* A device or a FIFO given as any input is refused at once (exit 2), never read forever.
* SIGTERM ends the whole process tree of a multi-host report (pool workers included), and a
  worker killed under the command is one line naming its host.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from profan.gunzip import GunzipLimitError, Limit, gunzip, parse_limit

PROFAN = [sys.executable, "-m", "profan"]


def _profan(args: list[str], timeout: float = 30, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PROFAN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


def _zeros_gzip(size: int) -> bytes:
    """``size`` zero bytes, gzipped (level 9: ~1 KB per MB), made a MiB at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(2**20)
    parts = [packer.compress(block) for _ in range(size // len(block))]
    return b"".join([*parts, packer.flush()])


@pytest.fixture(scope="module")
def synthetic_bomb() -> bytes:
    """512 MiB of zeros in ~0.5 MB of gzip (synthetic: no profiler writes this)."""
    return _zeros_gzip(512 * 2**20)


def _peak_of(args: list[str]) -> tuple[int, float, str, float]:
    """(exit code, peak RSS in MB, stderr, seconds) of ``profan args`` run by a wrapper whose
    only child it is (``RUSAGE_CHILDREN`` is then that child's peak)."""
    wrapper = textwrap.dedent(
        """
        import json, resource, subprocess, sys, time
        started = time.perf_counter()
        done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(json.dumps([done.returncode, peak, done.stderr, seconds]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *PROFAN, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    code, peak, stderr, seconds = json.loads(done.stdout)
    return code, peak, stderr, seconds


@pytest.mark.parametrize(
    ("command", "name"),
    [("report", "synthetic_bomb.xplane.pb"), ("hlo", "synthetic_bomb_op_profile.json.gz")],
)
def test_gzip_bomb_refused_fast_and_small(
    tmp_path: Path, synthetic_bomb: bytes, command: str, name: str
) -> None:
    bomb = tmp_path / name
    bomb.write_bytes(synthetic_bomb)
    code, peak_mb, stderr, seconds = _peak_of([command, str(bomb)])
    assert code == 2, stderr
    assert stderr.count("\n") == 1 and "PROFAN_GUNZIP_LIMIT" in stderr, stderr
    assert str(bomb) in stderr
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB"
    assert seconds < 2 + _startup_allowance(), f"{seconds:.1f} s"


def _startup_allowance() -> float:
    """Seconds a loaded CI machine may add to a command's start (imports), beyond the 2 s."""
    return float(os.environ.get("PROFAN_TEST_SLACK_S", "2"))


def test_gunzip_limit_can_be_raised(tmp_path: Path, fixtures_dir: Path) -> None:
    source = next((fixtures_dir / "mlp").rglob("*.xplane.pb"))
    packed = tmp_path / source.name
    packed.write_bytes(gzip.compress(source.read_bytes()))
    # a cap below the trace's size refuses it; the default reads it
    low = _profan(["report", str(packed)], PROFAN_GUNZIP_LIMIT="1KiB")
    assert low.returncode == 2 and "more than" in low.stderr, low.stderr
    assert _profan(["report", str(packed)]).returncode == 0


def test_gunzip_matches_gzip_and_stops_at_the_cap() -> None:
    payload = os.urandom(300_000) + b"profan" * 50_000
    packed = gzip.compress(payload)
    assert gunzip(packed) == gzip.decompress(packed)
    assert gunzip(packed + packed) == payload * 2  # every member, as gzip reads them
    with pytest.raises(EOFError):
        gunzip(packed[:-10])
    with pytest.raises(GunzipLimitError):
        gunzip(_zeros_gzip(64 * 2**20), Limit(max_bytes=2**20, ratio=None))
    assert parse_limit("8GiB,200x") == Limit(8 * 2**30, 200.0)
    assert parse_limit("none") == Limit(None, None)
    with pytest.raises(ValueError):
        parse_limit("lots")


# ---- special files as inputs ------------------------------------------------------------


@pytest.fixture()
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.xplane.pb"
    os.mkfifo(path)
    return path


def _special_cases(trace: str, budget: str) -> list[list[str]]:
    return [
        ["report", "{}"],
        ["hlo", "{}"],
        ["memory", "{}"],
        ["check", trace, "--budget", "{}"],
        ["check", trace, "--budget", budget, "--baseline", "{}"],
        ["report", trace, "--config", "{}"],
        ["report", trace, "--hlo", "{}"],
        ["report", trace, "--chips", "{}"],
        ["report", trace, "--kernels", "{}"],
    ]


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
@pytest.mark.parametrize("case", range(9))
def test_special_file_inputs_refused(
    tmp_path: Path, fixtures_dir: Path, fifo: Path, kind: str, case: int
) -> None:
    special = "/dev/zero" if kind == "/dev/zero" else str(fifo)
    budget = tmp_path / "profan.toml"
    budget.write_text("[budget]\n")
    trace = str(fixtures_dir / "mlp" / "trace")
    args = [word.replace("{}", special) for word in _special_cases(trace, str(budget))[case]]
    started = time.perf_counter()
    try:
        done = _profan(args, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"profan {' '.join(args)} still running after 20 s")
    assert time.perf_counter() - started < 10
    assert done.returncode == 2, done.stderr
    expected = "character device" if kind == "/dev/zero" else "FIFO"
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert special in done.stderr


def test_special_file_in_environment_refused(fixtures_dir: Path) -> None:
    trace = str(fixtures_dir / "mlp" / "trace")
    done = _profan(["report", trace], timeout=20, PROFAN_KERNELS="/dev/zero")
    assert done.returncode == 2 and "$PROFAN_KERNELS" in done.stderr, done.stderr


# ---- processes end with their command ----------------------------------------------------


@pytest.fixture()
def many_hosts(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A run of 16 hosts, each a copy of the transformer fixture's host (read for ~2 s by two
    processes: long enough to signal them while they read)."""
    source = next((fixtures_dir / "transformer").rglob("*.xplane.pb"))
    run = tmp_path / "trace" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    for index in range(16):
        shutil.copyfile(source, run / f"host{index}.xplane.pb")
    return tmp_path / "trace"


def _processes() -> Iterator[tuple[int, list[str]]]:
    """Every process's pid and the fields of its /proc stat after the command name (state,
    ppid, pgrp, ...)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            yield int(entry), fields


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    return [child for child, fields in _processes() if int(fields[1]) == pid]


def _group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    return [
        member for member, fields in _processes() if int(fields[2]) == pgid and fields[0] != "Z"
    ]


def _start_reading(trace: Path) -> tuple[subprocess.Popen, int]:
    """profan reading ``trace`` with two processes, and its worker's pid once it is there."""
    command = [*PROFAN, "report", str(trace), "--workers", "2", "--no-cache"]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own process group, to find every process it made
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        children = _children(process.pid)
        if children:
            time.sleep(0.2)  # (the worker takes its first host)
            return process, children[0]
        if process.poll() is not None:
            break
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    pytest.fail(f"no worker process appeared (exit {process.poll()})")


def test_sigterm_ends_every_process_of_the_command(many_hosts: Path) -> None:
    process, _ = _start_reading(many_hosts)
    try:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=5)
        time.sleep(0.5)
        deadline = time.monotonic() + 5
        while _group(process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _group(process.pid) == [], "processes of the command outlived it"
        assert code in (143, -signal.SIGTERM), process.stderr.read() if process.stderr else ""
    finally:
        for pid in _group(process.pid):
            os.kill(pid, signal.SIGKILL)


def test_killed_worker_is_one_line_naming_its_host(many_hosts: Path) -> None:
    process, worker = _start_reading(many_hosts)
    try:
        os.kill(worker, signal.SIGKILL)  # as the out-of-memory killer does
        _, stderr = process.communicate(timeout=30)
    finally:
        for pid in _group(process.pid):
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 2, stderr
    assert stderr.count("\n") == 1, stderr
    # It names the host the worker said it was reading; on a busy machine the kill can come
    # before the worker has said (then "reading a host"): a race of the test's timing, not of
    # profan's, so both are accepted, and the host's name must be a real one when given.
    assert "--workers 1" in stderr, stderr
    named = re.search(r"reading host (host\d+)", stderr)
    assert named is not None or "reading a host" in stderr, stderr
    if named is not None:
        assert any(many_hosts.rglob(f"{named.group(1)}.xplane.pb")), stderr

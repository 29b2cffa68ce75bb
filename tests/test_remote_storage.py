"""Profiles in object storage: gs:// and s3:// through real protocol servers on 127.0.0.1
(gcp-storage-emulator for the GCS JSON API, moto in server mode for S3), started by the tests."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from profan.cli import main

SERVERS = {
    "gs": ("gcsfs", "gcp_storage_emulator", "gcs"),
    "s3": ("s3fs", "moto", "s3"),
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"server on port {port} did not start in {seconds} s")


def _start(protocol: str, port: int) -> subprocess.Popen:
    bin_dir = Path(sys.executable).parent
    if protocol == "gs":
        command = [str(bin_dir / "gcp-storage-emulator"), "start", "--host", "127.0.0.1",
                   "--port", str(port), "--in-memory"]  # fmt: skip
    else:
        command = [str(bin_dir / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _environment(protocol: str, port: int) -> dict[str, str]:
    if protocol == "gs":
        # The emulator has no storage-control API: gcsfs' bucket-type probe would wait 60 s.
        return {
            "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
            "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        }
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@pytest.fixture(scope="module", params=sorted(SERVERS))
def bucket(request: pytest.FixtureRequest, fixtures_dir: Path) -> Iterator[tuple[str, dict]]:
    """A bucket on a server on 127.0.0.1 holding fixtures/multihost/trace; yields its URL."""
    protocol = request.param
    client, server, extra = SERVERS[protocol]
    for package in (client, server):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (pip install 'profan[{extra}]' {server})")
    port = _free_port()
    process = _start(protocol, port)
    patch = pytest.MonkeyPatch()
    try:
        _wait_for(port, process)
        for name, value in _environment(protocol, port).items():
            patch.setenv(name, value)
        import fsspec

        fs, _ = fsspec.core.url_to_fs(f"{protocol}://profiles")
        fs.mkdir("profiles")
        local = fixtures_dir / "multihost" / "trace"
        for file in sorted(local.rglob("*.pb")):
            fs.pipe(f"profiles/pod/{file.relative_to(local).as_posix()}", file.read_bytes())
        fs.invalidate_cache()
        yield f"{protocol}://profiles/pod", _environment(protocol, port)
    finally:
        patch.undo()
        process.terminate()
        process.wait(timeout=30)


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_remote_report_is_byte_identical_to_the_local_one(
    bucket: tuple[str, dict], fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = bucket
    local_path = str(fixtures_dir / "multihost" / "trace")
    code, local, _ = _report(["report", local_path, "--format", "json"], capsys)
    assert code == 0
    code, remote, err = _report(["report", url, "--format", "json"], capsys)
    assert code == 0, err
    # The only difference allowed is the path the user gave, which the JSON echoes.
    assert remote.replace(url, "PATH") == local.replace(local_path, "PATH")
    assert url in remote


def test_remote_reduced_form_reads_every_host(bucket: tuple[str, dict]) -> None:
    import profan

    profile = profan.load(bucket[0], form="reduced", workers=1)
    assert [row.host for row in profile.hosts.hosts] == ["host0", "host1", "host2"]
    assert profile.hosts.stragglers == ["host1"]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("profiles", "no trace files found"),
        ("profiles/nothing-here", "no such"),
        ("no-such-bucket/x", "no such"),
    ],
)
def test_missing_remote_paths_are_one_line_exit_2(
    bucket: tuple[str, dict], capsys: pytest.CaptureFixture[str], where: str, expected: str
) -> None:
    protocol = bucket[0].split("://")[0]
    code, _, err = _report(["report", f"{protocol}://{where}"], capsys)
    assert code == 2
    assert err.strip().count("\n") == 0 and expected in err, err


def test_network_down_is_one_line_exit_2(
    bucket: tuple[str, dict], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol = bucket[0].split("://")[0]
    dead = _free_port()  # nothing listens there
    for name, value in _environment(protocol, dead).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    import fsspec

    fsspec.config.conf.setdefault(protocol, {})
    fs_class = fsspec.get_filesystem_class(protocol)
    fs_class.clear_instance_cache()
    code, _, err = _report(["report", f"{protocol}://profiles/pod"], capsys)
    fs_class.clear_instance_cache()
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    assert "secret" not in err.lower() and "testing" not in err


def test_remote_profile_reopens_from_the_cache_without_a_download(
    bucket: tuple[str, dict],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-opened remote profile is keyed by what the listing says of each object (GCS
    generation, S3 ETag): no object is downloaded again, for the report nor for the profile
    it was built from; an object written again with other bytes is read again."""
    import fsspec

    import profan
    from profan.cache import store
    from profan.trace.storage import RemotePath

    monkeypatch.setenv("PROFAN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PROFAN_WORKERS", "1")  # every host read here, where downloads are seen
    url, _ = bucket
    downloads: list[str] = []
    download = RemotePath.read_bytes

    def counted(self: RemotePath) -> bytes:
        downloads.append(self.name)
        return download(self)

    monkeypatch.setattr(RemotePath, "read_bytes", counted)
    code, first, err = _report(["report", url, "--format", "json"], capsys)
    assert code == 0, err
    assert sorted(downloads) == ["host0.xplane.pb", "host1.xplane.pb", "host2.xplane.pb"]
    reduced = profan.load(url, form="reduced")
    downloads.clear()
    code, again, _ = _report(["report", url, "--format", "json"], capsys)
    assert again == first and not downloads  # the stored report
    store.clear(["reports"])
    code, again, _ = _report(["report", url, "--format", "json"], capsys)
    assert again == first and not downloads  # the stored profile
    assert profan.load(url, form="reduced").hosts == reduced.hosts and not downloads

    fs, root = fsspec.core.url_to_fs(url)
    host0 = next(p for p in fs.find(root) if p.endswith("host0.xplane.pb"))
    original = fs.cat_file(host0)
    host1 = next(p for p in fs.find(root) if p.endswith("host1.xplane.pb"))
    try:
        fs.pipe(host0, fs.cat_file(host1))  # other bytes: a new generation and ETag
        fs.invalidate_cache()
        code, changed, _ = _report(["report", url, "--format", "json"], capsys)
        assert code == 0 and "host0.xplane.pb" in downloads and changed != first
    finally:
        fs.pipe(host0, original)
        fs.invalidate_cache()

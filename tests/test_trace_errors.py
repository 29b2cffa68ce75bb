"""Unusable traces give one clear TraceError (CLI exit 2), never a traceback or a stray file."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import profan
from profan.errors import EXIT_BAD_INPUT, TraceError
from profan.trace.schema import load_schema

pytestmark = pytest.mark.usefixtures("private_cache")


def _tpu(corpus_dir: Path) -> Path:
    return corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"


def _load_error(path: Path, **kwargs) -> TraceError:
    before = sorted(p.name for p in path.parent.iterdir()) if path.exists() else None
    with pytest.raises(TraceError) as caught:
        profan.load(str(path), **kwargs)
    if before is not None:
        assert sorted(p.name for p in path.parent.iterdir()) == before  # nothing written
    error = caught.value
    assert error.exit_code == EXIT_BAD_INPUT
    assert "\n" not in str(error) and str(path) in str(error)
    return error


def test_corrupt_utf8_mangled(corpus_dir: Path) -> None:
    error = _load_error(corpus_dir / "traces" / "corrupt_utf8_mangled.xplane.pb")
    assert "not a readable XSpace" in str(error)


def test_truncated_xplane(corpus_dir: Path, tmp_path: Path) -> None:
    data = _tpu(corpus_dir).read_bytes()
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(data[: len(data) // 2])
    assert "damaged or truncated" in str(_load_error(path))


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"")
    assert "empty" in str(_load_error(path))


def test_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    assert "no trace files" in str(_load_error(tmp_path / "logs"))


def test_directory_with_only_host_planes(corpus_dir: Path, tmp_path: Path) -> None:
    # synthetic: the real TPU trace with its /device planes removed
    space_type = load_schema("xplane.proto")["tensorflow.profiler.XSpace"]
    space = space_type.FromString(_tpu(corpus_dir).read_bytes())
    kept = space_type()
    kept.planes.extend(p for p in space.planes if not p.name.startswith("/device:"))
    run = tmp_path / "plugins" / "profile" / "2025_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "synthetic_host_only.xplane.pb").write_bytes(kept.SerializeToString())
    error = _load_error(tmp_path)
    assert "no op executions" in str(error) and "/host:CPU" in str(error)


def test_gzip_that_is_not_gzip(tmp_path: Path) -> None:
    path = tmp_path / "host.trace.json.gz"
    path.write_bytes(b'{"traceEvents": []}')
    assert "not a valid gzip file" in str(_load_error(path))


def test_gzip_of_garbage_json(tmp_path: Path) -> None:
    path = tmp_path / "host.trace.json.gz"
    path.write_bytes(gzip.compress(b"\x00\x01 not json"))
    assert "not valid trace JSON" in str(_load_error(path))


def test_not_a_trace_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    assert "not a trace file" in str(_load_error(path))


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        profan.load(str(tmp_path / "missing"))


def test_cli_exit_code_two_without_traceback(
    corpus_dir: Path, repo_root: Path, tmp_path: Path
) -> None:
    # the damaged file, copied into a read-only directory: one message, exit 2, nothing written
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(corpus_dir / "traces" / "corrupt_utf8_mangled.xplane.pb", folder)
    folder.chmod(0o555)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "profan", "report", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(repo_root)},
        )
        assert sorted(p.name for p in folder.iterdir()) == ["corrupt_utf8_mangled.xplane.pb"]
    finally:
        folder.chmod(0o755)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert "not a readable XSpace" in result.stderr + result.stdout


def test_damaged_host_among_many(fixtures_dir: Path, corpus_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    good = next((fixtures_dir / "matmul" / "trace").rglob("*.xplane.pb"))
    shutil.copy(good, run / "host-a.xplane.pb")
    shutil.copy(corpus_dir / "traces" / "corrupt_utf8_mangled.xplane.pb", run / "host-b.xplane.pb")
    with pytest.raises(TraceError, match=r"host-b\.xplane\.pb: not a readable XSpace"):
        profan.load(str(tmp_path), workers=2)

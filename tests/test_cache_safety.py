"""profan's cache owns only what it made and trusts its directory no more than the user's own
files (issue 26, A1 A2 A3 A9): eviction and ``cache clear`` remove only entries profan wrote;
no symbolic link is followed; a directory profan did not make, another user's, or one others
can write is not used; an entry that is not a regular file, or not signed with this cache's
key, is a miss, never a hang."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from profan.cache import store, trust
from profan.cli import main
from profan.commands.check import CheckOutput
from profan.report.stored import read_output, write_output

# A budget the matmul fixture cannot meet: its check fails (exit 1).
_FAILING_BUDGET = "[budget]\nmfu_min = 0.999\n"


def _report(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", str(fixtures_dir / "matmul"), "--format", "json"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _entries(root: Path) -> list[Path]:
    return sorted(root.glob(f"*/*{store.SUFFIX}"))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# A1: eviction deletes only the store's own entries


def test_a_report_leaves_the_users_files_in_the_cache_folders(
    private_cache: Path, fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The probe's reproduction: a file of the user's in a folder named like a kind."""
    (private_cache / "reports").mkdir(parents=True)
    keep = private_cache / "reports" / "keep.csv"
    keep.write_text("x\n")
    code, out, err = _report(fixtures_dir, capsys)
    assert code == 0 and out.startswith("{") and not err
    assert keep.read_text() == "x\n"
    assert _entries(private_cache)  # the directory held only a kind folder: adopted, and used


def test_eviction_removes_only_entries_the_store_wrote(private_cache: Path) -> None:
    """Under a bound of nothing, every entry goes; a file named like an entry that profan did
    not write (its header is not that key's), and any other file, stay."""
    assert store.write_entry("reports", "mine", {"n": 1}, [b"x" * 1000])
    foreign = private_cache / "reports" / "notmine.entry"
    foreign.write_bytes(b"a file of the user's, named like an entry")
    renamed = private_cache / "reports" / "renamed.entry"  # an entry of another key, renamed
    renamed.write_bytes((private_cache / "reports" / "mine.entry").read_bytes())
    other = private_cache / "hlo" / "old.pickle"
    other.parent.mkdir()
    other.write_bytes(b"x")
    store.evict(0)
    assert not (private_cache / "reports" / "mine.entry").exists()
    assert foreign.exists() and renamed.exists() and other.exists()


def test_eviction_recognises_the_header_it_writes() -> None:
    """What ``owned`` looks for after the prefix is the start of the header as msgspec encodes
    it (a three-field array whose first field is the key)."""
    header = store._Header("k" * 40, [(0, 3)], msgspec.Raw(b"\xc0"))
    encoded = msgspec.msgpack.encode(header)
    assert encoded.startswith(b"\x93" + msgspec.msgpack.encode("k" * 40))
    assert msgspec.msgpack.decode(encoded)[0] == "k" * 40


# A2: no symbolic link is followed


def test_a_kind_folder_that_is_a_link_is_neither_written_nor_evicted_through(
    private_cache: Path, fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("the user's\n")
    assert _report(fixtures_dir, capsys)[0] == 0  # a cache profan made...
    shutil.rmtree(private_cache / "reports")
    (private_cache / "reports").symlink_to(target)  # ...one of whose folders becomes a link
    code, out, err = _report(fixtures_dir, capsys)
    assert code == 0 and out.startswith("{")
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    lines = err.splitlines()
    assert (
        len(lines) == 1
        and "symbolic link" in lines[0]
        and str(private_cache / "reports") in lines[0]
    )
    assert _entries(private_cache)  # the other kinds are still cached
    assert main(["cache", "clear"]) == 0
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_an_entry_that_is_a_link_is_a_miss(private_cache: Path, tmp_path: Path) -> None:
    assert store.write_entry("reports", "k", {"n": 1})
    entry = private_cache / "reports" / "k.entry"
    elsewhere = tmp_path / "k.entry"
    entry.rename(elsewhere)  # an intact entry of key k, reached through a link
    entry.symlink_to(elsewhere)
    assert store.read_entry("reports", "k") is None
    assert not store.entry_exists("reports", "k")


# A3: `cache clear` removes nothing from a directory profan did not make


def test_clear_refuses_a_directory_without_the_marker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistaken ``PROFAN_CACHE_DIR=$HOME``: one line, exit 2, every file still there."""
    home = tmp_path / "home"
    for name in ("Documents/notes.txt", "reports/q3.csv", "hlo/dump.txt"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(name)
    before = _tree(home)
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(home))
    assert main(["cache", "clear"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and trust.MARKER in err and str(home) in err
    assert _tree(home) == before


def test_a_command_does_not_use_a_directory_profan_did_not_make(
    tmp_path: Path,
    fixtures_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "notes.txt").write_text("notes")
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(home))
    code, out, err = _report(fixtures_dir, capsys)
    assert code == 0 and out.startswith("{")
    assert len(err.splitlines()) == 1 and "PROFAN_CACHE_DIR" in err
    assert sorted(p.name for p in home.iterdir()) == ["Documents"]  # nothing written


def test_clear_removes_the_entries_and_nothing_else(
    private_cache: Path, fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _report(fixtures_dir, capsys)[0] == 0
    keep = private_cache / "reports" / "keep.csv"
    keep.write_text("x\n")
    entries = _entries(private_cache)
    assert main(["cache", "clear"]) == 0
    assert f"removed {len(entries)} files" in capsys.readouterr().out
    assert not _entries(private_cache) and keep.exists()
    marker = (private_cache / trust.MARKER).read_bytes()
    assert marker.startswith(b"Signature: 8a477f597d28d172789f06886806bc55")  # CACHEDIR.TAG


# A9: a cache directory is trusted no more than the user's own files


def test_a_forged_entry_cannot_pass_a_check(
    private_cache: Path,
    fixtures_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An entry made by profan's own writer elsewhere (checksum and all), copied over the
    check's stored output, is a miss: the check fails as it should."""
    budget = tmp_path / "profan.toml"
    budget.write_text(_FAILING_BUDGET)
    argv = ["check", str(fixtures_dir / "matmul"), "--budget", str(budget)]
    assert main(argv) == 1
    failed = capsys.readouterr().out
    stems = [p.stem for p in (private_cache / "reports").glob(f"*{store.SUFFIX}")]
    (stem,) = [s for s in stems if read_output(s, CheckOutput) is not None]
    forger = tmp_path / "forger"
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(forger))
    assert write_output(stem, CheckOutput(0, "PASS (forged)\n", None))
    forged = (forger / "reports" / f"{stem}{store.SUFFIX}").read_bytes()
    (private_cache / "reports" / f"{stem}{store.SUFFIX}").write_bytes(forged)
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(private_cache))
    assert main(argv) == 1
    assert capsys.readouterr().out == failed


def test_a_fifo_in_place_of_every_entry_is_a_miss_not_a_hang(
    private_cache: Path, fixtures_dir: Path, tmp_path: Path
) -> None:
    """Run in a child with a time limit: a read that waits for a writer fails the test."""
    argv = [sys.executable, "-m", "profan", "report", str(fixtures_dir / "matmul")]
    argv += ["--format", "json"]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
    entries = _entries(private_cache)
    assert entries
    for entry in entries:
        entry.unlink()
        os.mkfifo(entry)
    try:
        again = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("profan waited on a FIFO planted as a cache entry")
    assert again.returncode == 0 and again.stdout == first.stdout
    # missed, so stored again (which of the keys recur depends on the code's stat index)
    assert any(stat.S_ISREG(e.lstat().st_mode) for e in entries)


def test_an_entry_bigger_than_the_bound_is_a_miss(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store.write_entry("reports", "big", {}, [b"x" * 100_000])
    assert store.read_entry("reports", "big") is not None
    monkeypatch.setenv(store.MAX_BYTES_ENV, "50K")
    assert store.read_entry("reports", "big") is None


def test_the_key_is_the_users_alone(private_cache: Path) -> None:
    assert store.write_entry("reports", "k", {"n": 1})
    key = private_cache / trust.KEY_FILE
    assert key.stat().st_size == trust.KEY_BYTES
    assert stat.S_IMODE(key.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(private_cache.stat().st_mode) & 0o077 == 0  # made 0700


def test_a_cache_others_can_write_is_not_used(
    private_cache: Path, fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(fixtures_dir, capsys)
    assert code == 0
    before = {p: p.stat().st_mtime_ns for p in _entries(private_cache)}
    private_cache.chmod(0o775)
    code, again, err = _report(fixtures_dir, capsys)
    assert code == 0 and again == out
    lines = err.splitlines()
    assert len(lines) == 1 and f"chmod go-w {private_cache}" in lines[0]
    assert {
        p: p.stat().st_mtime_ns for p in _entries(private_cache)
    } == before  # not read, not written
    assert main(["cache", "clear"]) == 2
    assert "chmod go-w" in capsys.readouterr().err and _entries(private_cache)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_cache_of_another_user_is_not_used(
    private_cache: Path, fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(fixtures_dir, capsys)
    assert code == 0
    before = {p: p.stat().st_mtime_ns for p in _entries(private_cache)}
    os.chown(private_cache, 12345, -1)
    code, again, err = _report(fixtures_dir, capsys)
    assert code == 0 and again == out
    lines = err.splitlines()
    assert len(lines) == 1 and "belongs to another user (uid 12345)" in lines[0]
    assert {p: p.stat().st_mtime_ns for p in _entries(private_cache)} == before


def test_a_cache_an_older_profan_made_is_adopted_and_its_entries_evicted_synthetic(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Synthetic: an older profan's cache (kind folders only, no marker) holding an entry of
    format 1 (the same layout, another magic).  ``cache clear`` does not mark it; the first
    write does, and the old entry is a miss to read but the store's own to evict."""
    assert store.write_entry("reports", "old", {"n": 1}, [b"x" * 1000])
    entry = private_cache / "reports" / "old.entry"
    data = bytearray(entry.read_bytes())
    data[7] = 1  # format 1's magic
    entry.write_bytes(bytes(data))
    (private_cache / trust.MARKER).unlink()
    (private_cache / trust.KEY_FILE).unlink()
    monkeypatch.setattr(trust, "_VERIFIED", {})  # a new process
    assert main(["cache", "clear"]) == 2
    assert "next cached command marks it" in capsys.readouterr().err and entry.exists()
    assert store.read_entry("reports", "old") is None
    assert trust.is_marked(private_cache) and (private_cache / trust.KEY_FILE).exists()
    store.evict(0)
    assert not entry.exists()

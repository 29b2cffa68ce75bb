"""profan's caches hold data only, are keyed by everything that makes an entry, stay bounded, and
treat anything they did not write (garbage, a truncated or flipped entry, another key's entry,
a pickle) as a miss: never code, never a traceback."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import shutil
import stat
import threading
import time
from collections import Counter
from pathlib import Path
from typing import BinaryIO

import msgspec
import pytest

import profan
from profan.cache import keys, store, trust
from profan.cache.keys import file_input
from profan.cli import main
from profan.hlo import parse_file, views
from profan.hlo.stored import cache_key, decode_module, encode_module
from profan.hlo.stored_tables import open_grammar_cached
from profan.report.analysis.pipeline import request_for
from profan.trace.fingerprint import hlo_inputs

LALR = {"parser": "lalr", "lexer": "contextual", "maybe_placeholders": False}


class _Planted:
    """Unpickling this would create ``marker``: the proof that a cache entry ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (Path.touch, (self.marker,))


def _entries(root: Path, kind: str | None = None) -> list[Path]:
    return sorted(root.glob(f"{kind or '*'}/*{store.SUFFIX}"))


def _damaged(entry: Path, other: Path, marker: Path) -> dict[str, bytes]:
    """Every way an entry can be wrong: what each leaves in its place."""
    data = entry.read_bytes()
    middle = len(data) // 2
    return {
        "garbage": os.urandom(len(data)),
        "empty": b"",
        "truncated": data[:middle],
        "flipped": data[:middle] + bytes([data[middle] ^ 0x40]) + data[middle + 1 :],
        "foreign": other.read_bytes(),  # another key's intact entry under this name
        "pickle": pickle.dumps(_Planted(marker)),
        "pickle-behind-magic": data[:32] + pickle.dumps(_Planted(marker)),
    }


def test_no_code_loading_module_in_profan() -> None:
    """Nothing in profan imports a module that can run code from data (pickle, marshal, shelve,
    dill): every cache entry is read as msgpack and raw numbers."""
    import ast

    package = Path(profan.__file__).parent
    loaders = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle"}
    for source in package.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not names & loaders, f"{source}: imports {names & loaders}"


def test_entry_round_trip_and_every_damage_is_a_miss(private_cache: Path, tmp_path: Path) -> None:
    blob = bytes(range(256)) * 100
    assert store.write_entry("reports", "k1", {"figures": [1, 2.5, "x"]}, [blob, b"abc"])
    assert store.write_entry("reports", "k2", {"figures": []}, [])
    meta, blobs = store.read_entry("reports", "k1")
    assert bytes(blobs[0]) == blob and bytes(blobs[1]) == b"abc"
    assert msgspec.msgpack.decode(meta) == {"figures": [1, 2.5, "x"]}
    assert store.read_entry("reports", "k3") is None
    entry, other = _entries(private_cache, "reports")
    marker = tmp_path / "executed"
    for name, content in _damaged(entry, other, marker).items():
        entry.write_bytes(content)
        assert store.read_entry("reports", entry.stem) is None, name
    assert not marker.exists()


def test_an_entry_written_in_the_background_is_read_back_whole(private_cache: Path) -> None:
    """Within ``writing_behind``, ``write_entry(background=True)`` returns at once; reading the
    entry, listing the store and the end of the scope wait for it; the file is the one a plain
    write makes."""
    blob = bytes(range(256)) * 40_000  # 10 MB: the checksum and the write take a while
    assert store.write_entry("profiles", "plain", {"n": 1}, [blob])
    with store.writing_behind():
        assert store.write_entry("profiles", "soon", {"n": 1}, [blob], background=True)
        assert store._PENDING
        meta, blobs = store.read_entry("profiles", "soon")
        assert msgspec.msgpack.decode(meta) == {"n": 1} and bytes(blobs[0]) == blob
        plain, soon = (private_cache / "profiles" / f"{k}{store.SUFFIX}" for k in ("plain", "soon"))
        assert soon.stat().st_size == plain.stat().st_size
        assert store.write_entry("profiles", "later", {"n": 2}, [blob], background=True)
        expected = {"plain", "soon", "later"}
        assert {f.path.stem for f in store.stored_files(["profiles"])} == expected
        assert store.write_entry("profiles", "last", {"n": 3}, [blob], background=True)
    assert not store._PENDING and store.read_entry("profiles", "last") is not None
    # outside any scope a background write is done at once
    assert store.write_entry("profiles", "now", {"n": 4}, [blob], background=True)
    assert not store._PENDING


def test_a_file_the_cache_has_not_seen_is_told_apart_without_hashing(
    private_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``known_digest`` answers from the stat index alone: None for a new or changed file (so
    a read can start before its hash), the recorded hash once ``file_digest`` took it."""
    monkeypatch.setattr(keys, "_RACY_NS", 0)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"a" * 1000)
    assert keys.known_digest(path) is None and not _entries(private_cache, "inputs")
    digest = keys.file_digest(path)
    assert keys.known_digest(path) == digest
    path.write_bytes(b"b" * 1000)
    assert keys.known_digest(path) is None
    assert keys.known_digest(tmp_path / "missing") is None


def test_module_codec_round_trips_a_large_module(corpus_dir: Path) -> None:
    path = (
        corpus_dir / "hlo" / "xla" / "xla__backends__cpu__benchmarks__hlo__gemma2_2b_keras_jax.hlo"
    )
    module = parse_file(path)
    assert not module.has_memos()  # just built: encoded by msgspec itself, memos at defaults
    data = encode_module(module)
    back = decode_module(data)
    assert back == module and not back.has_memos()
    assert [c.name for c in back.computations] == [c.name for c in module.computations]
    # a module whose views were used: its memos (name indexes, decoded metadata and backend
    # configs) are left out, and the module reads back the same
    used = decode_module(data)
    used.computation(used.entry.name).get(used.entry.root.name)
    for instruction in used.instructions():
        views.metadata(instruction)
        views.backend_config(instruction)
    assert used.has_memos()
    data = encode_module(used)
    assert b"_by_name" not in data and b"_backend_config" not in data
    again = decode_module(data)
    assert again == module and not again.has_memos()
    with pytest.raises(msgspec.ValidationError):
        decode_module(msgspec.msgpack.encode({"name": 3}))


@pytest.mark.parametrize("owner", ["module", "computation", "instruction"])
def test_every_memo_of_the_model_counts_as_set(fixtures_dir: Path, owner: str) -> None:
    """``Module.has_memos`` names the memo fields one by one (a module is encoded by msgspec
    itself, memo fields and all, only while none is set): each private field of the model, set
    away from its default, must count, so a memo added later without it fails here."""
    module = parse_file(next((fixtures_dir / "mlp" / "hlo").glob("*after_optimizations.txt")))
    assert not module.has_memos()
    target = {
        "module": module,
        "computation": module.entry,
        "instruction": module.entry.root,
    }[owner]
    private = [f for f in dataclasses.fields(target) if f.name.startswith("_")]
    assert private
    for item in private:
        default = getattr(target, item.name)
        setattr(target, item.name, object())  # set: equal to no default
        assert module.has_memos(), item.name
        setattr(target, item.name, default)
        assert not module.has_memos(), item.name


def test_hlo_caches_reuse_entries_and_miss_on_damage(
    private_cache: Path, fixtures_dir: Path, tmp_path: Path
) -> None:
    trace = str(fixtures_dir / "matmul" / "trace")
    fresh = profan.load(trace, use_cache=False)
    first = profan.load(trace)
    converted = _entries(private_cache, "hloproto")
    assert converted, "loading a trace with embedded HloProtos should fill the module cache"
    # Each entry is the module as data: a planted module under the right key is served...
    planted = store.read_entry("hloproto", converted[0].stem)
    assert planted is not None and decode_module(planted[0]).name
    store.write_entry("hloproto", converted[0].stem, {"name": "planted"})
    shutil.rmtree(private_cache / "profiles")  # the loaded profile holds the modules too
    assert "planted" in {m.name for m in profan.load(trace).modules.values()}
    # ...and damage of any kind is a miss: the module is converted again.
    marker = tmp_path / "executed"
    for name, content in _damaged(converted[0], converted[-1], marker).items():
        if name == "foreign" and len(converted) == 1:
            continue
        converted[0].write_bytes(content)
        shutil.rmtree(private_cache / "profiles")
        again = profan.load(trace)
        assert {k: m.name for k, m in again.modules.items()} == {
            k: m.name for k, m in fresh.modules.items()
        }, name
    assert not marker.exists()
    assert first.modules == fresh.modules


def test_module_key_changes_with_content_version_and_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import profan.hlo.stored as modules

    key = cache_key(b"HloModule m")
    assert cache_key(b"HloModule n") != key
    monkeypatch.setattr(modules, "_CODE_HASH", "another-build-of-profan")
    changed_code = cache_key(b"HloModule m")
    monkeypatch.setattr(modules, "__version__", "99.0")
    assert len({key, changed_code, cache_key(b"HloModule m")}) == 3


def test_keys_change_with_version_and_code(monkeypatch: pytest.MonkeyPatch) -> None:
    key = keys.versioned("report", ["inputs"])
    assert keys.versioned("report", ["other inputs"]) != key
    assert keys.versioned("profile", ["inputs"]) != key
    monkeypatch.setattr(keys, "_CODE_DIGEST", "another-build-of-profan")
    changed_code = keys.versioned("report", ["inputs"])
    monkeypatch.setattr(keys, "__version__", "99.0")
    assert len({key, changed_code, keys.versioned("report", ["inputs"])}) == 3


def test_code_digest_covers_the_package_and_its_data(
    private_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed source file, data table or grammar changes the digest (of a copy of the
    package, changed file by file), also when the digest of the files before was recorded
    under their stat signatures and a change keeps a file's size and modification time."""
    import profan.paths

    monkeypatch.setattr(keys, "_RACY_NS", 0)  # (the copy is new: record its digest anyway)
    package = Path(profan.__file__).parent
    copy = tmp_path / "profan"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(profan.paths.grammar_path("hlo.lark").parent, tmp_path / "grammars")
    monkeypatch.setattr(profan.paths, "PACKAGE_DIR", copy)
    monkeypatch.setattr(keys, "_CODE_DIGEST", None)
    digests = {keys.code_digest()}
    assert _entries(private_cache, "inputs"), "the digest of the files as they are is recorded"
    opened: list[str] = []

    def counted_open(path: str, mode: str) -> BinaryIO:
        opened.append(path)
        return open(path, mode)

    monkeypatch.setattr(keys, "open", counted_open, raising=False)
    monkeypatch.setattr(keys, "_CODE_DIGEST", None)
    assert keys.code_digest() in digests and not opened, "reused while no file changed"
    for changed in ("report/model/report.py", "data/chips.toml", "../grammars/hlo.lark"):
        with (copy / changed).open("a") as handle:
            handle.write("\n")
        monkeypatch.setattr(keys, "_CODE_DIGEST", None)
        digests.add(keys.code_digest())
    assert len(digests) == 4 and opened, "read again once a file changed"
    # same size, modification time put back: the change time moved
    target = copy / "report" / "model" / "report.py"
    before = target.stat()
    time.sleep(0.01)
    target.write_bytes(target.read_bytes().replace(b"\n\n", b"\n#", 1))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert target.stat().st_size == before.st_size
    monkeypatch.setattr(keys, "_CODE_DIGEST", None)
    assert keys.code_digest() not in digests
    digests.add(keys.code_digest())
    (copy / "cache" / "__pycache__").mkdir()
    (copy / "cache" / "__pycache__" / "keys.cpython-311.pyc").write_bytes(b"compiled")
    monkeypatch.setattr(keys, "_CODE_DIGEST", None)
    assert keys.code_digest() in digests  # compiled files are not the code


def test_file_digest_follows_content_not_the_stat_record(
    private_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat shortcut: a recorded hash is reused while the file's signature is unchanged,
    and a rewrite of the same size with the modification time put back is still seen (its
    change time moved)."""
    # A file changed in the last 2 s is never recorded (below); the test cannot age a file's
    # change time, so it shortens that window.
    monkeypatch.setattr(keys, "_RACY_NS", 0)
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(b"a" * 1000)
    first = keys.file_digest(path)
    assert _entries(private_cache, "inputs"), "the hash of an old file is recorded"
    assert keys.file_digest(path) == first
    before = path.stat()
    time.sleep(0.01)
    path.write_bytes(b"b" * 1000)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert keys.file_digest(path) != first
    # A file written just now is hashed but not recorded: its next change may share the tick.
    monkeypatch.undo()
    fresh = tmp_path / "fresh.xplane.pb"
    fresh.write_bytes(b"c")
    recorded = len(_entries(private_cache, "inputs"))
    keys.file_digest(fresh)
    assert len(_entries(private_cache, "inputs")) == recorded


def test_a_hash_taken_behind_is_the_files_sha256_and_read_once(
    private_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``digest_behind`` hashes in a thread what ``file_digest`` then takes: the SHA-256 of
    the bytes (``hashlib`` over the file, independently), each file read once; a file changed
    since its hash started is hashed again; no thread is left after ``finish_digests``."""
    monkeypatch.setattr(keys, "_RACY_NS", 0)
    hashed: list[Path] = []
    hash_and_record = keys._hash_and_record

    def counted(file: Path, *args: object) -> tuple[str, bool]:
        hashed.append(file)
        return hash_and_record(file, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(keys, "_hash_and_record", counted)
    kept, changed = tmp_path / "kept.xplane.pb", tmp_path / "changed.xplane.pb"
    kept.write_bytes(os.urandom(3 * 2**20))
    changed.write_bytes(b"a" * 1000)
    keys.digest_behind([kept, changed, tmp_path / "missing", "gs://bucket/remote.xplane.pb"])
    assert keys.file_digest(kept) == hashlib.sha256(kept.read_bytes()).hexdigest()
    time.sleep(0.01)
    changed.write_bytes(b"b" * 1001)
    assert keys.file_digest(changed) == hashlib.sha256(b"b" * 1001).hexdigest()
    keys.finish_digests()
    assert hashed == [kept, changed, changed]
    assert not [t for t in threading.enumerate() if t.name == "profan cache: hash"]
    assert keys.known_digest(kept) == keys.file_digest(kept) and len(hashed) == 3
    keys.digest_behind([kept])  # known to the stat index now: nothing to hash
    keys.finish_digests()
    assert len(hashed) == 3


def test_hlo_inputs_cover_every_hlo_file(tmp_path: Path, fixtures_dir: Path) -> None:
    dump = tmp_path / "dump"
    shutil.copytree(fixtures_dir / "mlp" / "hlo", dump)
    before = hlo_inputs(dump)
    assert before is not None and len(before) > 1
    text = next(dump.rglob("*after_optimizations.txt"))
    text.write_text(text.read_text() + "\n")
    assert hlo_inputs(dump) != before
    assert hlo_inputs(tmp_path / "missing") is None
    assert hlo_inputs(None) == ["none"]
    assert file_input(tmp_path / "missing.xplane.pb") is None


def test_reports_are_keyed_on_the_user_tables_profan_reads(
    tmp_path: Path, fixtures_dir: Path, private_cache: Path
) -> None:
    """The user's chip and kernel files a command puts in force (its options, else their
    environment variables: ``RunOptions.from_environment``) are those its report is keyed on,
    by content."""
    from profan.trace.options import CHIPS_ENV, KERNELS_ENV, RunOptions

    chips, kernels = tmp_path / "chips.toml", tmp_path / "kernels.toml"
    chips.write_text("# no chips\n")
    kernels.write_text("# no kernels\n")
    options = RunOptions.from_environment({CHIPS_ENV: str(chips), KERNELS_ENV: str(kernels)})
    assert (options.chips, options.kernels) == (str(chips), str(kernels))
    trace = fixtures_dir / "matmul"
    plain = request_for(trace).report_key()
    keyed = request_for(trace, options=options).report_key()
    assert plain is not None and keyed is not None and plain != keyed
    kernels.write_text("# other kernels\n")
    assert request_for(trace, options=options).report_key() not in (plain, keyed)


def test_a_command_fingerprints_each_input_once(
    tmp_path: Path,
    fixtures_dir: Path,
    private_cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``check`` (a report's key, the profile's, the check's own output key), cold and then
    warm: every input file (the trace's, ``--hlo``'s, the budget) is fingerprinted once."""
    digests: Counter[str] = Counter()
    original = keys.file_digest

    def counting(path: str | os.PathLike[str]) -> str:
        digests[str(path)] += 1
        return original(path)

    monkeypatch.setattr(keys, "file_digest", counting)
    budget = tmp_path / "profan.toml"
    budget.write_text("[budget]\nstep_time_s = 10.0\n")
    for _ in ("cold", "warm"):
        digests.clear()
        assert main(["check", str(fixtures_dir / "matmul"), "--budget", str(budget)]) == 0
        assert str(budget) in digests and max(digests.values()) == 1, digests
    capsys.readouterr()


def test_least_recently_used_entries_go_first(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blob = b"x" * 10_000
    for name in ("a", "b", "c"):
        assert store.write_entry("reports", name, {}, [blob])
    entries = {e.stem: e for e in _entries(private_cache, "reports")}
    for age, name in ((30, "a"), (20, "b"), (10, "c")):
        old = time.time() - age
        os.utime(entries[name], (old, old))
    assert store.read_entry("reports", "a") is not None  # a hit makes "a" the most recent
    monkeypatch.setenv(store.MAX_BYTES_ENV, "25k")
    assert store.write_entry("reports", "d", {}, [blob])
    assert sorted(e.stem for e in _entries(private_cache, "reports")) == ["a", "d"]
    # a temporary file a writer left an hour ago goes; a file the store did not write stays
    # (the pickles older versions of profan wrote are not recognisably its own)
    stale = private_cache / "reports" / ".profan-abcd1234.tmp"
    stale.write_bytes(entries["a"].read_bytes()[:100])
    os.utime(stale, (time.time() - 7200,) * 2)
    pickled = private_cache / "hlo" / "0123-0.1.0-abcd.pickle"
    pickled.parent.mkdir(exist_ok=True)
    pickled.write_bytes(b"x")
    monkeypatch.setenv(store.MAX_BYTES_ENV, "0")  # nothing is written
    assert not store.write_entry("reports", "e", {}, [blob])
    monkeypatch.setenv(store.MAX_BYTES_ENV, "1G")
    store.evict(store.max_bytes())
    assert not stale.exists() and pickled.exists()


def test_a_command_evicts_once_at_its_end(
    private_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within ``writing_behind`` (a command) the writes do not each list the store: it is
    evicted once, when the scope ends, and then holds the bound."""
    blob = b"x" * 10_000
    monkeypatch.setenv(store.MAX_BYTES_ENV, "25k")
    scans: list[int] = []
    evict = store.evict
    monkeypatch.setattr(store, "evict", lambda bound: scans.append(bound) or evict(bound))
    with store.writing_behind():
        for name in ("a", "b", "c", "d"):
            assert store.write_entry("reports", name, {}, [blob], background=name != "a")
        store.finish_writes()
        assert (
            scans == [] and len(_entries(private_cache, "reports")) == 4
        )  # over the bound meanwhile
    assert len(scans) == 1
    assert sum(e.stat().st_size for e in _entries(private_cache, "reports")) <= 25_000
    assert store.write_entry("reports", "e", {}, [blob])  # outside a scope: at once
    assert len(scans) == 2


@pytest.mark.parametrize(
    ("text", "size"), [("2G", 2 * 2**30), ("500M", 500 * 2**20), ("1.5KiB", 1536), ("42", 42)]
)
def test_size_bound_parses(text: str, size: int) -> None:
    assert store.parse_size(text) == size


def test_cache_command_info_and_clear(
    private_cache: Path, fixtures_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    assert main(["report", str(fixtures_dir / "matmul"), "--format", "json"]) == 0
    capsys.readouterr()
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert str(private_cache) in out and "bound 2.0 GiB" in out
    assert "reports" in out and "profiles" in out
    files = [p for p in private_cache.rglob("*") if p.is_file()]
    assert main(["cache", "clear"]) == 0
    # every entry goes; the marker and the key that say the directory is profan's stay
    kept = {private_cache / trust.MARKER, private_cache / trust.KEY_FILE}
    assert f"removed {len(set(files) - kept)} files" in capsys.readouterr().out
    assert {p for p in private_cache.rglob("*") if p.is_file()} == kept
    monkeypatch.setenv(store.MAX_BYTES_ENV, "lots")
    assert main(["cache", "info"]) == 2
    assert "PROFAN_CACHE_MAX_BYTES" in capsys.readouterr().err


def test_read_only_trace_is_never_written_and_reopens_from_the_cache(
    private_cache: Path, fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "ro"
    shutil.copytree(fixtures_dir / "mlp", copy)
    paths = [copy, *copy.rglob("*")]
    before = sorted((str(p), p.stat().st_mtime_ns) for p in paths)
    for path in paths:
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
    try:
        outputs = []
        for argv in (["report", str(copy)], ["report", str(copy)], ["annotate", str(copy)]) * 2:
            assert main(argv) == 0
            outputs.append(capsys.readouterr().out)
        assert outputs[0] == outputs[1]
        assert outputs[2] == outputs[5]
        assert sorted((str(p), p.stat().st_mtime_ns) for p in [copy, *copy.rglob("*")]) == before
        assert _entries(private_cache, "reports") and _entries(private_cache, "profiles")
    finally:
        for path in paths:
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def test_cache_directory_that_cannot_be_written_only_costs_speed(
    tmp_path: Path, fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(blocked))
    assert main(["report", str(fixtures_dir / "matmul"), "--format", "json"]) == 0
    assert capsys.readouterr().out.startswith("{")


def test_parser_tables_are_data_and_parse_as_built(private_cache: Path, tmp_path: Path) -> None:
    """The HLO parser's LALR tables come back from the cache as msgpack (never Lark's pickle)
    and parse exactly as freshly built ones; damaged tables are built again."""
    options = LALR
    lines = [
        "%fusion.3 = bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)} fusion(bf16[32,32,8192]{2,1,0} "
        "%p), kind=kCustom, calls=%all-reduce-scatter.3",
        "ROOT %t = (f32[2]{0}, s32[]) tuple(f32[2]{0} %a, s32[] %b)",
    ]
    built = open_grammar_cached("hlo.lark", start="instruction_line", **options)
    (entry,) = _entries(private_cache, "lark")
    assert not entry.read_bytes().count(b"\x80\x04\x95")  # no pickle protocol-4 frame inside
    loaded = open_grammar_cached("hlo.lark", start="instruction_line", **options)
    assert loaded is not built
    assert [loaded.parse(line) for line in lines] == [built.parse(line) for line in lines]
    marker = tmp_path / "executed"
    for content in _damaged(entry, entry, marker).values():
        entry.write_bytes(content)
        again = open_grammar_cached("hlo.lark", start="instruction_line", **options)
        assert [again.parse(line) for line in lines] == [built.parse(line) for line in lines]
    assert not marker.exists()


def test_every_kind_of_entry_damaged_is_a_miss_end_to_end(
    private_cache: Path, fixtures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fill every kind (inputs, modules, profiles, pod hosts, reports, annotated text, parser
    tables), damage every entry the same way, and run again: the same output, nothing run."""
    trace = str(fixtures_dir / "multihost")
    runs = (["report", trace, "--format", "json"], ["annotate", trace])

    def outputs() -> list[str]:
        texts = []
        for argv in runs:
            assert main(argv) == 0
            texts.append(capsys.readouterr().out)
        reduced = profan.load(fixtures_dir / "multihost" / "trace", form="reduced")
        texts.append(repr(reduced.hosts.to_dict()))
        # the parser tables (a process builds its parsers once: read them here each time)
        line = open_grammar_cached("hlo.lark", start="instruction_line", **LALR)
        texts.append(str(line.parse("%a = f32[2]{0} parameter(0)")))
        return texts

    expected = outputs()
    dump = fixtures_dir / "mlp" / "hlo"
    parse_file(sorted(dump.glob("*after_optimizations.txt"))[0])  # the parse caches too
    kinds = {entry.parent.name for entry in _entries(private_cache)}
    assert {"inputs", "hloproto", "profiles", "hosts", "reports", "hlo", "lark"} <= kinds
    pristine = tmp_path / "pristine"
    shutil.copytree(private_cache, pristine)
    marker = tmp_path / "executed"
    for damage in ("garbage", "empty", "truncated", "flipped", "foreign", "pickle"):
        shutil.rmtree(private_cache)
        shutil.copytree(pristine, private_cache)
        entries = _entries(private_cache)
        for entry, other in zip(entries, entries[1:] + entries[:1], strict=True):
            content = _damaged(entry, other, marker)[damage]
            entry.write_bytes(content)
        assert outputs() == expected, damage
    for entry in _entries(private_cache):  # intact frames with the right key and the wrong contents
        store.write_entry(entry.parent.name, entry.stem, {"not": ["what", "it", "holds"]})
    assert outputs() == expected
    assert not marker.exists()

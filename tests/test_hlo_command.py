"""``profan hlo FILE`` on the fixture dumps and on broken input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.cli import main
from profan.hlo import parse_file


def _dump(fixtures_dir: Path, name: str) -> Path:
    meta_path = fixtures_dir / name / "meta.json"
    if not meta_path.is_file():
        pytest.skip(f"fixture {name} not present")
    meta = json.loads(meta_path.read_text())
    return meta_path.parent / meta["hlo_files"][0]["file"]


def test_json_summary_counts_and_collective_groups(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _dump(fixtures_dir, "mlp")
    meta = json.loads((fixtures_dir / "mlp" / "meta.json").read_text())
    assert main(["hlo", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    counts = meta["hlo_files"][0]["xla_counts"]
    assert summary["computations"] == counts["computations"]
    assert summary["instructions"] == counts["instructions"]
    assert sum(summary["opcodes"].values()) == counts["instructions"]
    # The fixture generator recorded each collective's replica groups; sizes must agree.
    recorded = {c["name"]: c["groups"] for c in meta["hlo_collectives"]}
    found = {c["name"]: c for c in summary["collectives"]}
    assert set(recorded) <= set(found)
    assert found["all-reduce"]["groups"] == 4 and found["all-reduce"]["group_size"] == 2
    assert found["all-reduce.4"]["groups"] == 2 and found["all-reduce.4"]["group_size"] == 4
    assert recorded["all-reduce"] == "replica_groups={{0,1},{2,3},{4,5},{6,7}}"


def test_text_summary_lists_opcodes(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _dump(fixtures_dir, "collectives")
    module = parse_file(path)
    assert main(["hlo", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(module.computations)} computations" in out
    for opcode in ("all-gather", "reduce-scatter", "all-to-all", "collective-permute"):
        assert opcode in out
    assert "source-target pairs" in out


def test_chip_adds_a_roofline_table(fixtures_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("profan.roofline")
    path = _dump(fixtures_dir, "matmul")
    assert main(["hlo", str(path), "--chip", "tpu-v5e", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    matmuls = [row for row in summary["roofline"] if row["category"] == "matmul"]
    # The fixture multiplies f32[256,512] by f32[512,1024]: 2*M*K*N FLOPs.
    assert [row["flops"] for row in matmuls] == [2 * 256 * 512 * 1024]


def test_json_roofline_rows_are_the_records(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each ``--json`` roofline row is one ``ModuleOpRecord``: its fields as keys, in order,
    with its figures exactly (pandas' writer, used before, printed a time under 5e-11 s as 0.0:
    an op that moves bytes in no time), a missing intensity null."""
    import dataclasses

    from profan.roofline import ModuleOpRecord, score_module
    from profan.sharding import describe

    path = _dump(fixtures_dir, "scan_layers")
    assert main(["hlo", str(path), "--chip", "tpu-v5e", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["roofline"]
    module = parse_file(path)
    ops = score_module(module, "tpu-v5e", sharding=describe(module))
    fields = [field.name for field in dataclasses.fields(ModuleOpRecord)]
    assert len(rows) == len(ops) > 0
    assert any(op.intensity is None for op in ops)
    for row, op in zip(rows, ops, strict=True):
        assert list(row) == fields
        for name in fields:
            value = getattr(op, name)
            assert row[name] == value, name
        if op.hbm_bytes > 0:  # the scan's small ops take picoseconds: never printed as 0
            assert row["t_hbm_s"] > 0, op.name


def test_unparseable_input_exits_2_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "synthetic_broken.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT a = f32[] add(\n")
    assert main(["hlo", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_broken.hlo:3:" in err and "Traceback" not in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hlo", str(tmp_path / "absent.hlo")]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("width", [80, 100, 160])
def test_chip_table_is_formatted_like_the_report(
    fixtures_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    width: int,
) -> None:
    """scan_layers runs its 3 layers in one while loop (meta.json: while_trip_count 3): every
    body op's n is the trip count; the text table shows units, fits the width, and each row's
    ideal and FLOPs are score_module's, formatted as the report formats them."""
    from profan.report.format import seconds, si
    from profan.roofline import score_module
    from profan.sharding import describe

    path = _dump(fixtures_dir, "scan_layers")
    meta = json.loads((fixtures_dir / "scan_layers/meta.json").read_text())
    trips = meta["truth"]["while_trip_count"]
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["hlo", str(path), "--chip", "tpu-v5e", "--top", "6"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("roofline on tpu-v5e: top 6 of") :].splitlines()
    assert all(len(line) <= width for line in table), [x for x in table if len(x) > width]
    header = next(line for line in table if line.startswith("op "))
    for column in ("op", "category", "n", "ideal", "bound"):
        assert column in header.split()
    assert "e-0" not in out and "e+" not in out  # no raw floats
    module = parse_file(path)
    ops = score_module(module, "tpu-v5e", sharding=describe(module))[:6]
    body = table[table.index(header) + 2 :]
    for op in ops:
        name = op.name
        # the name's row: its whole name, or (wrapped) its first piece up to a separator
        row = next(
            line
            for line in body
            if line.split()
            and (
                line.split()[0] == name
                or (line.split()[0][-1] in "._-/" and name.startswith(line.split()[0]))
            )
        )
        assert seconds(op.roofline_s) in row
        if width >= 100:
            assert si(op.flops) in row
        assert op.occurrences in (1, trips)
    body_ops = [op for op in ops if op.computation != module.entry.name]
    assert len(body_ops) and all(op.occurrences == trips for op in body_ops)


@pytest.mark.slow
def test_async_collectives_carry_their_bytes_where_their_time_is(corpus_dir: Path) -> None:
    """Every XLA test module with an async collective (a `*-done`) that XLA accepts: the row that
    carries the interconnect time (the done) carries the bytes sent too; no row shows t_ici > 0
    beside ici_bytes 0, in what `profan hlo --chip` prints."""
    from profan.errors import ProfanError
    from profan.roofline import score_module

    pattern = re.compile(r"(all-reduce|all-gather|collective-permute)-done")
    manifest = [
        json.loads(line)
        for line in (corpus_dir / "hlo/xla/MANIFEST.jsonl").read_text().splitlines()
        if line.strip()
    ]
    accepted = {row["file"] for row in manifest if row.get("xla_parses")}
    checked = 0
    for path in sorted((corpus_dir / "hlo/xla").glob("*.hlo")):
        if path.name not in accepted or not pattern.search(path.read_text()):
            continue
        try:
            ops = score_module(parse_file(path), "tpu-v5e")
        except ProfanError:
            continue  # a module profan cannot read is the parser's concern (its own tests)
        timed = [op for op in ops if op.t_ici_s > 0]
        assert all(op.ici_bytes > 0 for op in timed), (
            path.name,
            [(op.name, op.ici_bytes) for op in timed],
        )
        dones = [op for op in ops if op.opcode.endswith("-done") and op.category == "collective"]
        checked += len(dones)
    assert checked >= 100

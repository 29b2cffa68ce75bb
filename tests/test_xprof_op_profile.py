"""XProf's op profile read back as HLO: the golden v5p profile (``../shared/corpus``), one that
XProf itself writes from the v6e corpus trace (``.[xprof]``), and ``profan hlo`` on both.

The v6e op profile keeps XProf's measurements: its per-op FLOPs and HBM bytes (the compiler's
figures) are an independent check of the reader, the rebuilt modules and profan's costs."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from profan.cli import main
from profan.cost import CostModel
from profan.xprof import (
    OpProfileError,
    find_op,
    op_module,
    program_module,
    read_op_profile,
)

GOLDEN = Path("traces") / "tpu_v5_training_golden" / "op_profile.expressions.json.gz"


@pytest.fixture(scope="module")
def golden(corpus_dir: Path):
    return read_op_profile(corpus_dir / GOLDEN)


def test_golden_programs_ops_and_duplicate_groups(golden) -> None:
    assert golden.device_type == "TPU"
    by_name = {p.name: p for p in golden.programs}
    train = by_name["jit_train_step"]
    assert train.program_id == "2041036616644817336"
    # XProf folds ops with one fused computation into "X and its duplicate(s)": every member is
    # an op of its own, with its own line and body
    first, second = find_op(train, "copy.488"), find_op(train, "copy.489")
    assert first is not None and second is not None and first.has_duplicates
    assert "%fusion.637" in second.line and "%fusion.636" in first.line
    fused = find_op(train, "fusion.728")
    assert fused is not None and not fused.has_duplicates
    # the body: its fused instructions, a nested fusion with its own children
    nested = [line for line in fused.body if line.children]
    assert len(fused.body) == 4 and len(nested) == 2
    assert sum(len(p.ops) for p in golden.programs) == 339 + 6 + 7


def test_golden_rebuilt_fusion_has_its_parameters_and_root(golden) -> None:
    train = next(p for p in golden.programs if p.name == "jit_train_step")
    op = find_op(train, "fusion.728")
    module = op_module(op)
    body = module.computation("fused_computation.431")
    # 19 operands: the ones the lines read (param_N.M) and the pass-through flags
    assert [p.parameter_number for p in body.params] == list(range(19))
    root = body.root
    assert root.opcode == "tuple" and len(root.operands) == 17
    # the convolution is output 0; the in-flight all-gather lands on output 2, aliased to an
    # operand, and operand 0 passes through to output 1
    assert root.operands[0].name == "convolution.138"
    assert root.operands[1].name == "param_0.1494"
    assert root.operands[2].name == "all-gather.244"


def test_every_golden_op_rebuilds_and_costs(golden) -> None:
    for program in golden.programs:
        module = program_module(program)
        model = CostModel(module)
        costs = [model.estimate(i) for i in module.entry.instructions if i.opcode != "parameter"]
        assert len(costs) == len(program.ops)
        unknown = [c for c in costs if c.flops is None]
        assert not unknown, [c.derivation for c in unknown]


def test_hlo_command_lists_and_costs_an_op_profile(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hlo", str(corpus_dir / GOLDEN), "--chip", "tpu-v5p", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    programs = {p["program"]: p for p in out["programs"]}
    assert set(programs) == {"jit_train_step", "jit_raw_generate_synthetic_data", "jit_fold_in"}
    rows = {row["name"]: row for row in programs["jit_train_step"]["roofline"]}
    assert len(rows) == 339
    # every row has its bytes per memory space: a VMEM prefetch's done writes VMEM only
    assert all(row["bytes_by_space"]["hbm"] == row["hbm_bytes"] for row in rows.values())
    assert rows["copy-done.7"]["bytes_by_space"] == {"hbm": 0, "vmem": 2048 * 2048 * 2}
    # a matmul: 2 x 2048 x 2048 x 7168 FLOPs, plus the 4 x 2048 x 2048 of its fused norm
    # scaling (fusion.732: convert, multiply, convert, multiply), compute-bound on v5p
    assert rows["fusion.728"]["flops"] == 2 * 2048 * 2048 * 7168 + 4 * 2048 * 2048
    assert rows["fusion.728"]["bound_by"] == "compute"
    assert "measured" not in programs["jit_train_step"]  # this file's metrics were removed


def test_hlo_command_text_names_each_program(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hlo", str(corpus_dir / GOLDEN), "--chip", "tpu-v5p", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "op profile program jit_train_step (2041036616644817336): 339 ops" in out
    assert out.count("roofline on tpu-v5p: top 3 of 339 ops") == 1


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("synthetic_not_json.json", b"{not json", "not JSON: line 1:2"),
        ("synthetic_list.json", b"[1, 2]", "the JSON is not an object"),
        ("synthetic_no_tree.json", b'{"deviceType": "TPU"}', "no 'byProgram' or 'byCategory'"),
        ("synthetic_empty.json", b'{"byProgram": {"children": []}}', "lists no op"),
        ("synthetic_bad.json.gz", b"\x1f\x8b\x08\x00garbage", "not a readable gzip file"),
    ],
)
def test_bad_op_profiles_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["hlo", str(path)]) == 2
    err = capsys.readouterr().err
    assert name in err and expected in err and "Traceback" not in err
    with pytest.raises(OpProfileError):
        read_op_profile(path)


def test_an_op_line_that_does_not_parse_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = {"byProgram": {"name": "by_program", "children": [{"name": "jit_f(7)", "children": [
        {"name": "loop fusion", "children": [{"name": "add.1", "xla": {
            "expression": "%add.1 = f32[4]{0} add(f32[4]{0} %p, f32[4]{0}"}}]}]}]}}  # fmt: skip
    path = tmp_path / "synthetic_bad_line.json.gz"
    path.write_bytes(gzip.compress(json.dumps(profile).encode()))
    assert main(["hlo", str(path)]) == 2
    err = capsys.readouterr().err
    assert "synthetic_bad_line.json.gz (program jit_f)" in err and "HLO syntax error" in err


@pytest.fixture(scope="module")
def v6e_op_profile(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XProf's op profile of the v6e corpus trace, written by XProf itself (on a copy: it
    writes caches beside its input)."""
    raw = pytest.importorskip("xprof.convert.raw_to_tool_data", reason="needs .[xprof]")
    work = tmp_path_factory.mktemp("v6e-op-profile")
    trace = work / "tpu_v6e_inference.xplane.pb"
    shutil.copy(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb", trace)
    data, _ = raw.xspace_to_tool_data([str(trace)], "op_profile", {})
    path = work / "op_profile.json"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def test_v6e_op_profile_costs_agree_with_xprofs_measurements(v6e_op_profile: Path) -> None:
    profile = read_op_profile(v6e_op_profile)
    checked, host_halves = 0, 0
    for program in profile.programs:
        for op in program.ops:
            assert op.metrics is not None and op.metrics.occurrences > 0
            module = op_module(op)
            cost = CostModel(module).estimate(module.entry.root)
            assert cost.flops == pytest.approx(op.metrics.flops, rel=0.01), op.name
            # a host <-> HBM DMA: its HBM bytes are on the half that touches HBM (the start
            # reads the source, the done writes the destination), the other half's in host
            # memory, which XProf's breakdown (HBM, on-chip) does not list
            assert cost.hbm_bytes == pytest.approx(op.metrics.hbm_bytes, rel=0.01), op.name
            if cost.host_transfer:
                host_halves += 1
                moved = cost.bytes_by_space.get("host", 0.0) + cost.hbm_bytes
                assert moved == pytest.approx(5 * 1024 * 1024 * 256 * 4), op.name
            checked += 1
    assert checked == 17 and host_halves == 12


def test_v6e_op_profile_measured_figures_in_hlo_json(
    v6e_op_profile: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hlo", str(v6e_op_profile), "--json"]) == 0
    programs = json.loads(capsys.readouterr().out)["programs"]
    measured = {m["name"]: m for p in programs for m in p.get("measured", [])}
    assert measured["all-reduce"]["occurrences"] == 12
    assert measured["broadcast_add_fusion"]["flops"] == 5 * 1024 * 1024 * 256
    # XProf's breakdown of the v6e ops lists no on-chip bytes (host memory is not on chip)
    assert all(m["on_chip_read_bytes"] == m["on_chip_write_bytes"] == 0 for m in measured.values())

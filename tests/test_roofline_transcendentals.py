"""The transcendental term of the compute roofline: the chip catalogue's rates (the TPU's EUP, a
GPU's special function units) and the ops they time, on real traces.

``fixtures/state_steps``' ``jit_mish`` (three transcendentals per element, XLA's own cost
analysis counts them) is bound by its transcendentals on the CPU chip's figures; the MI300X,
H100 and H200 traces show their exp/tanh fusions' and attention kernels' transcendental time
beside a longer HBM or FLOP term; the TPU v5 golden's measured times stay above the v5p estimate.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from functools import cache
from pathlib import Path

import pytest

from profan.chips import catalogue, get_chip
from profan.cost import CostModel
from profan.hlo.opcodes import TRANSCENDENTAL_OPCODES
from profan.hlo.parser import parse_instruction
from profan.report.analysis.build import Analysis, build_report
from profan.report.analysis.pipeline import analyse
from profan.roofline import OpRecord, op_times
from tests.conftest import FIXTURES_DIR, gpu_fixtures

STATE_STEPS = FIXTURES_DIR / "state_steps"


@cache
def _analysis(path: Path) -> Analysis:
    return analyse(path)


def _op(path: Path, module: str, opcode: str = "fusion") -> OpRecord:
    ops = _analysis(path).score.ops
    rows = [op for op in ops if op.module.startswith(module) and op.opcode == opcode]
    return max(rows, key=lambda op: op.t_transcendental_s)


def test_every_chip_has_a_rate_with_its_derivation_or_says_it_is_unknown() -> None:
    for chip in catalogue().values():
        source = chip.sources.get("transcendentals", "")
        if chip.transcendentals_per_s is None:
            assert source.startswith("unknown"), chip.name
            assert chip.transcendentals_source().startswith("unknown")
        else:
            assert chip.transcendentals_per_s > 0 and len(source) > 40, chip.name
            assert chip.name in chip.transcendentals_source()
    assert get_chip("tpu-v6e").transcendentals_per_s is None  # no published or derivable rate
    estimated = {n for n, c in catalogue().items() if "ESTIMATE" in c.sources["transcendentals"]}
    assert {"tpu-v5p", "tpu-v5e", "mi300x", "cpu"} <= estimated
    assert not {"tpu-v4", "h100", "a100"} & estimated


@pytest.mark.parametrize(
    ("name", "flops_per_transcendental"),
    # The catalogue's f32 FLOP/s (datasheets) per transcendental a cycle (the SM/CU count x clock
    # derivation): Ampere GA100 has 64 FP32 lanes (2 FLOPs each) per 16 SFU results, Hopper and
    # Blackwell 128; a CDNA3 CU 64 lanes issuing transcendentals at a quarter rate, and its
    # catalogue f32 figure is the packed (2 per lane) one.
    [("a100", 8), ("h100", 16), ("h200", 16), ("b200", 16), ("mi300x", 16)],
)
def test_gpu_rates_agree_with_the_datasheets_fp32_rates(
    name: str, flops_per_transcendental: int
) -> None:
    chip = get_chip(name)
    assert chip.transcendentals_per_s == pytest.approx(
        chip.peak_flops["f32"] / flops_per_transcendental, rel=0.01
    )


def test_device_and_core_rates() -> None:
    v3, v5p = get_chip("tpu-v3"), get_chip("tpu-v5p")
    assert v3.device_transcendentals_per_s == v3.transcendentals_per_s / 2  # a device per core
    assert v5p.device_transcendentals_per_s == v5p.transcendentals_per_s  # megacore: one device
    assert v5p.per_core().transcendentals_per_s == v5p.transcendentals_per_s / 2
    assert get_chip("tpu-v6e").per_core().device_transcendentals_per_s is None


def test_mish_counts_what_xla_counts_and_is_bound_by_its_transcendentals() -> None:
    meta = json.loads((STATE_STEPS / "meta.json").read_text())
    (program,) = [p for p in meta["programs"] if p["name"] == "mish"]
    assert program["cost_analysis"]["transcendentals"] == program["truth"]["transcendentals"]
    profile = _analysis(STATE_STEPS).profile
    (key,) = [k for k in profile.modules if k.startswith("jit_mish")]
    module = profile.modules[key]
    fusion = next(i for i in module.entry.instructions if i.opcode == "fusion")
    cost = CostModel(module).estimate(fusion)
    assert cost.transcendentals == program["truth"]["transcendentals"] == 786_432

    cpu = get_chip("cpu")
    times = op_times(cost, cpu)
    assert times.bound_by == "transcendental"
    assert times.t_transcendental_s == pytest.approx(786_432 / cpu.transcendentals_per_s)
    assert times.roofline_s == times.t_transcendental_s > times.t_hbm_s > times.t_compute_s
    assert any("7.86e+05 transcendentals at 2e+10/s" in note for note in times.notes)
    # a chip without a rate times FLOPs (and bytes) alone, and says so
    unknown = op_times(cost, dataclasses.replace(cpu, transcendentals_per_s=None))
    assert unknown.t_transcendental_s == 0 and unknown.bound_by == "hbm"
    assert any("not timed" in note and "no transcendental rate" in note for note in unknown.notes)


def test_the_report_names_the_transcendental_bound_and_stays_below_the_measured_time() -> None:
    row = _op(STATE_STEPS, "jit_mish")
    assert row.bound_by == "transcendental"
    assert row.roofline_s == row.t_transcendental_s > row.t_hbm_s
    assert row.roofline_s <= row.measured_s and row.faster_executions == 0
    report = build_report(_analysis(STATE_STEPS))
    data = json.loads(json.dumps(report.to_dict()))
    (entry,) = [op for op in data["ops"] if op["program"].startswith("jit_mish")]
    assert entry["bound_by"] == "transcendental"
    assert entry["t_transcendental_s"] == pytest.approx(row.t_transcendental_s)
    assert data["summary"]["time_by_bound_s"]["transcendental"] > 0
    assert data["chip"]["transcendentals_per_s_device"] == 2e10
    assert data["chip"]["figure_sources"]["transcendentals_per_s"] == "catalogue"
    assert any(step["share_transcendental"] > 0 for step in data["steps"])


def test_mi300x_tanh_shows_its_transcendental_time_beside_its_longer_hbm_time(
    corpus_dir: Path,
) -> None:
    row = _op(corpus_dir / "traces" / "mi300x_jax08_attention.xplane.pb", "jit_tanh")
    rate = get_chip("mi300x").transcendentals_per_s
    # bf16[4,2048,4096]: one tanh per element
    assert row.t_transcendental_s == pytest.approx(4 * 2048 * 4096 * row.occurrences / rate)
    assert 0 < row.t_transcendental_s < row.t_hbm_s and row.bound_by == "hbm"
    assert "transcendentals at 1.02e+13/s" in row.derivation


@pytest.mark.parametrize("name", gpu_fixtures("gpu_kernels"))
def test_gpu_attention_kernels_show_their_softmax_exponentials(
    fixtures_dir: Path, name: str
) -> None:
    ops = _analysis(fixtures_dir / name).score.ops
    attention = [op for op in ops if op.name.startswith("dot_product_attention_fwd")]
    assert len(attention) == 2
    for row in attention:
        assert 0.3 < row.t_transcendental_s / row.roofline_s < 1, row.name
        assert row.roofline_s <= row.measured_s


def _golden_transcendentals(corpus_dir: Path) -> list[tuple[str, float, float]]:
    """(op, transcendentals of its fused body, measured time per execution in s) of every op
    of XProf's TPU v5 training golden (dev half) with transcendentals."""
    golden = corpus_dir / "traces" / "tpu_v5_training_golden"
    with gzip.open(golden / "op_profile.expressions.json.gz") as file:
        profile = json.load(file)
    with gzip.open(golden / "hlo_stats.dev_half.json.gz") as file:
        stats = json.load(file)
    labels = [c["label"] for c in stats["cols"]]
    nodes: dict[tuple[str, str], dict] = {}

    def walk(node: dict, program: str | None) -> None:
        name = node.get("name", "")
        if program is None and name.startswith("jit") and "(" in name:
            program = name.split("(")[1].rstrip(")")
        if "xla" in node and program:
            nodes.setdefault((program, name), node)
        for child in node.get("children") or []:
            walk(child, program)

    def count(node: dict) -> float:
        total = 0.0
        for child in node.get("children") or []:
            line = child["xla"]["expression"]
            instruction = parse_instruction(line)
            if instruction.opcode in TRANSCENDENTAL_OPCODES:
                total += instruction.shape.num_elements
            total += count(child)
        return total

    walk(profile["byProgram"], None)
    found = []
    for row in stats["rows"]:
        value = dict(zip(labels, (cell["v"] for cell in row["c"]), strict=True))
        node = nodes.get((value["Program id"], value["HLO op name"]))
        if node is not None and (transcendentals := count(node)):
            found.append((value["HLO op name"], transcendentals, value["Avg. time (us)"] * 1e-6))
    return found


def test_tpu_v5_golden_runs_no_faster_than_the_v5p_estimate(corpus_dir: Path) -> None:
    """Each golden op's transcendentals, split over both TensorCores at the v5p chip rate (the
    fastest they could run), take no longer than XProf measured for the op."""
    found = _golden_transcendentals(corpus_dir)
    assert len(found) >= 10
    rate = get_chip("tpu-v5p").transcendentals_per_s
    for name, transcendentals, measured in found:
        assert transcendentals / rate <= measured, name
    # the most exp-heavy fusion: 65.5M exponentials in 104 us, a third of it at this rate
    name, transcendentals, measured = max(found, key=lambda f: f[1] / f[2])
    assert transcendentals == 65_536_000 and 0.2 < transcendentals / rate / measured < 0.5

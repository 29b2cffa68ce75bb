"""Cross-check profan's per-op FLOPs and bytes against xprof's own tools, on every corpus trace.

xprof (``pip install '.[xprof]'``) converts a trace into its ``roofline_model`` tool: one row per
(program, op) with ``model_flop_rate`` (GFLOP/s), ``measured_memory_bw`` (GiB/s) and the op's
average time (us), so one execution's FLOPs are ``rate x avg_time`` and its bytes
``bandwidth x avg_time``.  ``measured_memory_bw`` counts every memory space (xprof's
``MEMORY_SPACE_ALL``), so it is held to profan's bytes in every space (``bytes_by_space``).
xprof writes its caches next to its input, so it runs on a private copy.
Two figures agree when they are within 10% of each other (both 0 agree).  Every op that disagrees
is listed, with its reason, in docs/xprof_crosscheck.md; this test fails when one is not.

On GPU traces xprof counts FLOPs in another convention: XLA's GPU cost analysis charges each
elementwise op the clock cycles its op profile gives per element (3 when it has none), where
profan, like ``HloCostAnalysis``, counts 1.  So the MI300X figures are also compared in xprof's
convention (``xla_gpu_flops``): profan's own walk of each op (which instructions, how many
elements, how many reducer applications) weighted with the cycles xprof itself uses, read from
the op-profile table compiled into xprof.

    .venv/bin/python tests/test_xprof_crosscheck.py   # prints the table the document holds
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from profan.cost import CostModel
from profan.cost.context import elements
from profan.hlo.model import Instruction
from profan.hlo.opcodes import ELEMENTWISE_OPCODES
from profan.hlo.views import called_computations
from tests.conftest import REPO_ROOT

ROOT = REPO_ROOT
DOC = ROOT / "docs" / "xprof_crosscheck.md"
CORPUS_TRACES = ("tpu_v6e_inference", "mi300x_jax08_gemm", "mi300x_jax08_attention",
                 "mi300x_jax_conv", "mi300x_jax_conv_legacy")  # fmt: skip
TOLERANCE = 0.10
# The op profile XLA's GPU cost analysis falls back to when it is given no device description,
# as xprof gives it none (``HloOpProfiles``' default profile); ops it lists no cycles for cost 3.
XLA_GPU_DEFAULT_PROFILE = "sm_86"
XLA_GPU_DEFAULT_CYCLES = 3


@dataclass(frozen=True, slots=True)
class OpCheck:
    trace: str
    program: str
    op: str
    xprof_flops: float
    xprof_bytes: float
    profan_flops: float | None
    profan_bytes: float | None
    # profan's FLOPs in xprof's GPU convention (None on TPU traces, where xprof reads the
    # compiler's own per-op figures from the trace)
    profan_flops_xla_gpu: float | None = None

    @property
    def xprof_reports(self) -> bool:
        """xprof has a figure for this op (on GPU traces without cost stats it has none)."""
        return self.xprof_flops > 0 or self.xprof_bytes > 0

    @property
    def flops_agree(self) -> bool:
        return _close(self.profan_flops, self.xprof_flops)

    @property
    def bytes_agree(self) -> bool:
        return _close(self.profan_bytes, self.xprof_bytes)

    @property
    def flops_agree_in_xla_gpu_convention(self) -> bool:
        return _close(self.profan_flops_xla_gpu, self.xprof_flops)


def _close(ours: float | None, theirs: float) -> bool:
    if ours is None:
        return False
    return abs(ours - theirs) <= TOLERANCE * max(abs(ours), abs(theirs))


def xprof_rows(trace: Path, workdir: Path) -> tuple[list[dict], dict]:
    """The roofline_model tool's op rows for a private copy of ``trace``, and its properties."""
    from xprof.convert import raw_to_tool_data

    copy = workdir / trace.stem.removesuffix(".xplane") / trace.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(trace, copy)
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "roofline_model", {})
    table = json.loads(data)[0]
    columns = [column["id"] for column in table["cols"]]
    rows = [
        dict(zip(columns, [cell.get("v") if isinstance(cell, dict) else cell for cell in row["c"]],
                 strict=True))
        for row in table["rows"]
    ]  # fmt: skip
    ops = [row for row in rows if row["step"] == "Total" and row["category"] != "Program"]
    return ops, table.get("p", {})


@functools.cache  # the libraries are tens of MB: read them once, not once per GPU trace
def xla_gpu_op_cycles(profile: str = XLA_GPU_DEFAULT_PROFILE) -> dict[tuple[str, str], int]:
    """(opcode, element type) -> clock cycles per element, from the op-profile table (a text
    proto) compiled into the installed xprof: the figures its GPU cost analysis charges."""
    import xprof

    found = {}
    for library in Path(xprof.__file__).parent.rglob("*.so"):
        data = library.read_bytes()
        start = data.find(f'key: "{profile}"'.encode())
        if start < 0:
            continue
        end = data.find(b'key: "', start + 1)
        block = data[start : end if end > 0 else len(data)].decode("ascii", "replace")
        entry = re.compile(
            r'opcode: "([\w-]+)"\s*shape \{ element_type: (\w+) \}\s*\}\s*clock_cycles: (\d+)'
        )
        found = {(m[1], m[2].lower()): int(m[3]) for m in entry.finditer(block)}
        if found:
            break
    if not found:
        pytest.fail(f"no {profile} op profile found in xprof's libraries: has xprof changed?")
    return found


def xla_gpu_flops(
    instruction: Instruction, model: CostModel, cycles: dict[tuple[str, str], int]
) -> float:
    """One execution's FLOPs as XLA's GPU cost analysis counts them, on profan's walk of the op:
    elementwise ops cost their cycles per output element, a reduce its reducer's per
    application, a concatenate 6 per element; everything else (dots, convolutions, custom
    calls, data movement) what profan counts.  Every fused instruction counts once (the
    analysis' utilization is 1 when no computed value is broadcast, as in these fusions)."""
    opcode = instruction.opcode
    shape = instruction.shape
    first = shape.tuple_shapes[0] if shape.is_tuple else shape
    if opcode in ("fusion", "reduce"):
        body = model.callee(called_computations(instruction)[0])
        per_body = sum(xla_gpu_flops(inner, model, cycles) for inner in body.instructions)
        if opcode == "fusion":
            return per_body
        return per_body * (elements(model.operand_shape(instruction, 0)) - elements(first))
    if opcode in ELEMENTWISE_OPCODES:
        weight = cycles.get((opcode, str(first.dtype)), XLA_GPU_DEFAULT_CYCLES)
        return float(weight * elements(shape))
    if opcode == "concatenate":
        return 6.0 * elements(shape)
    return model.estimate(instruction).flops or 0.0


def crosscheck(corpus: Path, name: str, workdir: Path) -> list[OpCheck]:
    """One ``OpCheck`` per op xprof lists for the trace ``name`` of the corpus at ``corpus``."""
    import profan
    from profan import roofline

    trace = corpus / "traces" / f"{name}.xplane.pb"
    rows, _ = xprof_rows(trace, workdir)
    profile = profan.load(str(trace))
    score = roofline.score(profile)
    cycles = xla_gpu_op_cycles() if profile.device.kind == "GPU" else None
    models: dict[str, CostModel] = {}
    ours: dict[tuple[str, str], tuple[float | None, float | None, float | None]] = {}
    for record in score.ops:
        program = str(record.module_key or "").rsplit("(", 1)[-1].rstrip(")")
        runs = max(int(record.occurrences), 1)
        flops = (
            None if record.flops is None or record.flops != record.flops else record.flops / runs
        )
        in_xla_gpu_convention = None
        instruction = profile.instruction(str(record.module_key), str(record.name))
        if cycles is not None and instruction is not None:
            key = str(record.module_key)
            model = models.setdefault(key, CostModel(profile.modules[key]))
            in_xla_gpu_convention = xla_gpu_flops(instruction, model, cycles)
        # measured_memory_bw counts every memory space: profan's bytes in all of them
        moved = sum(record.bytes_by_space.values()) / runs
        ours[(program, str(record.name))] = (flops, moved, in_xla_gpu_convention)
    checks = []
    seen = set()
    for row in rows:
        key = (str(row["hlo_module_id"]), str(row["operation"]))
        if key in seen:  # xprof lists some ops twice within its "Total" rows
            continue
        seen.add(key)
        seconds = float(row["avg_time"]) * 1e-6
        xprof_flops = float(row["model_flop_rate"]) * 1e9 * seconds
        xprof_bytes = float(row["measured_memory_bw"]) * 2**30 * seconds
        flops, hbm, in_xla_gpu_convention = ours.get(
            (str(row["hlo_module_id"]), str(row["operation"])), (None, None, None)
        )
        checks.append(OpCheck(name, str(row["hlo_module_id"]), str(row["operation"]),
                              xprof_flops, xprof_bytes, flops, hbm,
                              in_xla_gpu_convention))  # fmt: skip
    return checks


def documented_disagreements() -> set[tuple[str, str, str]]:
    """(trace, program, op) rows of the document's disagreement table."""
    listed = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in CORPUS_TRACES:
            listed.add((cells[0], cells[1], cells[2]))
    return listed


@pytest.fixture(scope="module")
def checks(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[OpCheck]]:
    pytest.importorskip("xprof", reason="xprof not installed (pip install '.[xprof]')")
    workdir = tmp_path_factory.mktemp("xprof")
    return {name: crosscheck(corpus_dir, name, workdir) for name in CORPUS_TRACES}


def test_xprof_and_profan_agree_on_tpu_v6e(checks: dict[str, list[OpCheck]]) -> None:
    reported = [check for check in checks["tpu_v6e_inference"] if check.xprof_reports]
    assert len(reported) >= 15
    flops_rate = sum(check.flops_agree for check in reported) / len(reported)
    bytes_rate = sum(check.bytes_agree for check in reported) / len(reported)
    assert flops_rate >= 0.95 and bytes_rate >= 0.90, (flops_rate, bytes_rate)


def test_every_disagreement_is_in_the_document(checks: dict[str, list[OpCheck]]) -> None:
    listed = documented_disagreements()
    missing = [
        (check.trace, check.program, check.op)
        for trace_checks in checks.values()
        for check in trace_checks
        if check.xprof_reports and not (check.flops_agree and check.bytes_agree)
        and (check.trace, check.program, check.op) not in listed
    ]  # fmt: skip
    assert not missing, f"disagreements not explained in {DOC.name}: {missing}"


def test_mi300x_agree_on_bytes_and_on_flops_in_xprofs_convention(
    checks: dict[str, list[OpCheck]],
) -> None:
    """On the MI300X traces xprof costs ops with XLA's GPU cost analysis, which charges each
    elementwise op its clock cycles per element (at least 3) where profan, like XLA's
    HloCostAnalysis, counts 1 FLOP.  Bytes must agree as they are; FLOPs must agree once
    profan's walk of each op is weighted as xprof weighs it, and every raw disagreement must be
    xprof counting at least 2.9x more; the gemm custom calls, which xprof leaves at 0, are
    costed by profan."""
    reported = [c for name in CORPUS_TRACES[1:] for c in checks[name] if c.xprof_reports]
    assert len(reported) >= 30
    assert sum(check.bytes_agree for check in reported) / len(reported) >= 0.90
    matched = sum(check.flops_agree_in_xla_gpu_convention for check in reported)
    assert matched / len(reported) >= 0.95, [
        check for check in reported if not check.flops_agree_in_xla_gpu_convention
    ]
    for check in reported:
        if not check.flops_agree:
            assert check.profan_flops and check.xprof_flops / check.profan_flops >= 2.9, check
    silent = [c for name in CORPUS_TRACES[1:] for c in checks[name] if not c.xprof_reports]
    assert silent and all(check.op.startswith("custom-call") for check in silent)
    assert all(check.profan_flops and check.profan_flops > 0 for check in silent)


def test_xla_gpu_convention_weighs_transcendentals_above_arithmetic() -> None:
    """The table read out of xprof is the op profile it costs with: a transcendental costs far
    more cycles than the default 3 (a table of other ops, or none, would fail here)."""
    pytest.importorskip("xprof", reason="xprof not installed (pip install '.[xprof]')")
    cycles = xla_gpu_op_cycles()
    assert len(cycles) >= 40
    assert cycles[("tanh", "f32")] > 10 * XLA_GPU_DEFAULT_CYCLES
    assert cycles[("sqrt", "f32")] > 10 * XLA_GPU_DEFAULT_CYCLES
    assert ("add", "f32") not in cycles  # f32 add: the default 3


def _table(all_checks: dict[str, list[OpCheck]]) -> str:
    lines = []
    for name, trace_checks in all_checks.items():
        reported = [check for check in trace_checks if check.xprof_reports]
        flops = sum(check.flops_agree for check in reported)
        converted = sum(check.flops_agree_in_xla_gpu_convention for check in reported)
        hbm = sum(check.bytes_agree for check in reported)
        silent = sorted({check.op for check in trace_checks if not check.xprof_reports})
        lines.append(f"{name}: {len(trace_checks)} ops, xprof reports figures for "
                     f"{len(reported)}; FLOPs agree {flops}/{len(reported)} (in xprof's GPU "
                     f"convention {converted}/{len(reported)}), bytes agree "
                     f"{hbm}/{len(reported)}; no xprof figures: {silent}")  # fmt: skip
        for check in trace_checks:
            if check.xprof_reports and not (check.flops_agree and check.bytes_agree):
                lines.append(f"| {name} | {check.program} | `{check.op}` | FLOPs profan "
                             f"{check.profan_flops} (xprof's convention "
                             f"{check.profan_flops_xla_gpu}) xprof {check.xprof_flops:.6g}; "
                             f"bytes profan "
                             f"{check.profan_bytes} xprof {check.xprof_bytes:.6g} |")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    import tempfile

    from tests.conftest import CORPUS_DIR

    with tempfile.TemporaryDirectory() as directory:
        found = {name: crosscheck(CORPUS_DIR, name, Path(directory)) for name in CORPUS_TRACES}
        print(_table(found))
    sys.exit(0)

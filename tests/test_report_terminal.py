"""The terminal report fitted to the terminal's width, profile-wide findings in their own group,
and the sharding column's per-dim mesh splits, on real fixture traces and the corpus."""

from __future__ import annotations

import io
import json
import math
import re
import sys
from pathlib import Path

import pytest

from profan.report.analysis.build import build_report
from profan.report.analysis.pipeline import analyse
from profan.report.model import Report
from profan.report.render import html, layout, markdown, terminal
from tests.conftest import gpu_fixtures

_CACHE: dict[str, Report] = {}
KEY_COLUMNS = ("op", "category", "measured", "ideal", "bound", "eff")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _report(path: Path) -> Report:
    if str(path) not in _CACHE:
        _CACHE[str(path)] = build_report(analyse(path))
    return _CACHE[str(path)]


def _traces(fixtures_dir: Path, corpus_dir: Path | None = None) -> dict[str, Path]:
    found = {"mlp": fixtures_dir / "mlp", "transformer": fixtures_dir / "transformer"}
    if corpus_dir is not None:
        found["mi300x"] = corpus_dir / "traces/mi300x_jax_conv.xplane.pb"
        found["tpu_v6e"] = corpus_dir / "traces/tpu_v6e_inference.xplane.pb"
    return found


def _table(text: str) -> tuple[str, list[str]]:
    """(header line, body lines) of the top-ops table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"op\s+(│ )?category", line))
    end = lines.index("", start)
    body = lines[start + 2 : end]
    note = next((i for i, line in enumerate(body) if line.startswith("(not shown")), len(body))
    return lines[start], body[:note]


def _header_cells(header: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"\s{2,}|│", header) if cell.strip()]


def _check_fits(report: Report, width: int, colour: bool) -> str:
    text = terminal.render(report, top=20, colour=colour, width=width)
    plain = _ANSI.sub("", text)
    too_wide = [line for line in plain.splitlines() if len(line) > width]
    assert not too_wide, f"{len(too_wide)} lines wider than {width}: {too_wide[:3]}"
    header, body = _table(plain)
    cells = _header_cells(header)
    for key in KEY_COLUMNS:
        assert key in cells, (width, cells)
    # the op column, read back down the table, holds every top op's full name in order
    op_width = header.index("category") - (3 if colour else 2)
    op_text = "".join(
        line[:op_width].strip()
        for line in body
        if not line.startswith(("  flags:", "  note:", "  kernel:"))
        and not line.startswith("       ")
    )
    names = [op.label for op in report.ops[:20]]
    assert op_text == "".join(names)
    # a GPU op's heaviest kernel: one line under the op, a long name cut with an ellipsis
    kernel_lines = [i for i, line in enumerate(body) if line.startswith("  kernel: ")]
    with_kernels = [op for op in report.ops[:20] if op.kernels]
    assert len(kernel_lines) == len(with_kernels)
    for i, op in zip(kernel_lines, with_kernels, strict=True):
        top = op.kernels[0]
        assert i + 1 == len(body) or not body[i + 1].startswith("          "), body[i : i + 2]
        shown = body[i][len("  kernel: ") :].split(f"×{top['count']}")[0]
        assert shown == top["name"] or (
            shown.endswith("…") and top["name"].startswith(shown[:-1])
        ), (shown, top["name"])
    return plain


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("colour", [False, True])
def test_terminal_fits_width_fixtures(fixtures_dir: Path, width: int, colour: bool) -> None:
    for path in _traces(fixtures_dir).values():
        _check_fits(_report(path), width, colour)


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 100, 200])
def test_terminal_fits_width_corpus(fixtures_dir: Path, corpus_dir: Path, width: int) -> None:
    for name in ("mi300x", "tpu_v6e"):
        _check_fits(_report(_traces(fixtures_dir, corpus_dir)[name]), width, colour=False)


def test_narrow_moves_flags_under_the_op_and_drops_totals_first(fixtures_dir: Path) -> None:
    report = _report(fixtures_dir / "mlp")
    flagged = next(op for op in report.ops if op.flags)
    wide = _check_fits(report, 200, colour=False)
    wide_cells = _header_cells(_table(wide)[0])
    assert {"FLOPs", "bytes", "sharding", "source", "flags"} <= set(wide_cells)
    assert "(not shown" not in wide

    narrow = _check_fits(report, 100, colour=False)
    header, body = _table(narrow)
    cells = _header_cells(header)
    assert "flags" not in cells and "source" in cells
    assert "FLOPs" not in cells and "bytes" not in cells
    # the flags line follows the flagged op's row (and no other op's row comes between)
    row = next(i for i, line in enumerate(body) if line.startswith(flagged.name + " "))
    flag_line = next(i for i in range(row, len(body)) if body[i].startswith("  flags:"))
    assert all(body[i].startswith(" ") for i in range(row + 1, flag_line))
    assert all(flag in " ".join(body[flag_line : flag_line + 2]) for flag in flagged.flags)
    hidden = narrow[narrow.index("(not shown at 100 columns") :].split(";")[0]
    assert "FLOPs" in hidden and "bytes" in hidden and "flags" not in hidden


def test_terminal_width_honours_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert terminal.terminal_width(io.StringIO()) == 100
    monkeypatch.delenv("COLUMNS")
    if not sys.__stdout__.isatty():
        assert terminal.terminal_width(io.StringIO()) == terminal.DEFAULT_WIDTH


def test_wrap_pieces_keeps_every_character() -> None:
    pieces = ["f32[8192/axis0,1024/(axis1,axis2)]", "× f32[1024,4096/axis1]", "-> f32[8,4]"]
    for width in (10, 16, 24, 80):
        lines = layout.wrap_pieces(pieces, width, "words")
        assert all(len(line) <= width for line in lines)
        assert "".join(lines).replace(" ", "") == "".join(pieces).replace(" ", "")


@pytest.mark.slow
def test_profile_findings_in_their_own_group(corpus_dir: Path) -> None:
    """The MI300X trace idles between steps: ``idle-gaps`` (no op) heads the section instead of
    sitting under the last op's group, in terminal, Markdown and HTML."""
    report = _report(corpus_dir / "traces/mi300x_jax_conv.xplane.pb")
    profile_rules = [f for f in report.findings if f.op is None]
    op_findings = [f for f in report.findings if f.op is not None]
    assert any(f.rule == "idle-gaps" for f in profile_rules) and op_findings

    text = terminal.render(report, width=120)
    section = text[text.index("Suspicious (") : text.index("Unmatched:")].splitlines()
    assert section[1].strip().startswith("profile")
    first_op = next(
        i for i, line in enumerate(section) if line.startswith("  " + op_findings[0].name)
    )
    idle_lines = [i for i, line in enumerate(section) if "idle-gaps:" in line]
    assert len(idle_lines) == len([f for f in profile_rules if f.rule == "idle-gaps"])
    assert max(idle_lines) < first_op  # none nested under an op

    md = markdown.render(report)
    md_section = md[md.index("## Suspicious ops") : md.index("## Unmatched")]
    assert md_section.index("**profile**") < md_section.index("idle-gaps")
    assert md_section.rindex("idle-gaps") < md_section.index(f"`{op_findings[0].name}`")

    page = html.render(report)
    html_section = page[page.index("Suspicious ops") : page.index("<h2>Unmatched")]
    assert html_section.index("<b>profile</b>") < html_section.index("idle-gaps")
    assert html_section.rindex("idle-gaps") < html_section.index(op_findings[0].name)


def test_sharding_splits_match_the_partition_specs(fixtures_dir: Path) -> None:
    """The MLP fixture's inputs were placed with known PartitionSpecs (meta.json): x by ``data``,
    W1 column-split and W2 row-split by ``model``.  Each matmul operand with an input's global
    shape must show exactly those dims split, along the mesh axis the program names."""
    meta = json.loads((fixtures_dir / "mlp/meta.json").read_text())
    sizes = dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))
    report = _report(fixtures_dir / "mlp")
    mesh = next(iter(report.summary.mesh.values()))
    assert mesh == sizes  # the program's own axis names, from the dump before optimisations
    specs = {tuple(i["shape"]): i["sharding"]["partition_spec"] for i in meta["inputs"]}
    checked = 0
    matmuls = [op for op in report.ops if op.splits]
    assert len(matmuls) == sum(op.category == "matmul" for op in report.ops)
    for op in matmuls:
        for role in ("lhs", "rhs", "out"):
            part = op.splits[role]
            assert len(part["dims"]) == len(part["axes"])
            spec = specs.get(tuple(part["dims"]))
            if spec is None:
                continue
            want = [[] if s is None else [s] for s in spec]
            assert part["axes"] == want, (op.name, role)
            checked += 1
        # global dims over the split sizes give the op's local output shape from the HLO
        out = op.splits["out"]
        local = [
            d // math.prod(mesh[a] for a in axes)
            for d, axes in zip(out["dims"], out["axes"], strict=True)
        ]
        assert op.shape == f"{op.splits['dtype']}[{','.join(map(str, local))}]", op.name
    assert checked >= 4

    # rendered: global dims with their axes, and the partial sums of row-parallel matmuls
    partial = next(op for op in matmuls if op.splits["partial_sum_axes"])
    cell = " ".join(terminal.sharding_lines(partial))
    assert re.search(r"\[\d+/(data|model)", cell)
    assert "partial sum over " + ",".join(partial.splits["partial_sum_axes"]) in cell
    wide = terminal.render(report, width=200)
    assert terminal.sharding_lines(partial)[0] in wide

    # JSON keeps global_shapes and adds splits; the round trip keeps both
    data = report.to_dict()
    op_data = next(o for o in data["ops"] if o["name"] == partial.name)
    assert op_data["global_shapes"] and op_data["splits"] == partial.splits
    assert Report.from_dict(json.loads(json.dumps(data))).to_dict() == data


@pytest.mark.parametrize("name", gpu_fixtures("gpu_kernels"))
def test_shared_names_are_shown_with_their_program(fixtures_dir: Path, name: str) -> None:
    """The GPU fixture runs many one-op programs: several have an op called
    ``custom-call.1``. Each such op is shown as ``program/name``; every label (and every JSON
    key) is unique, and an op whose name is unique keeps its bare name."""
    report = _report(fixtures_dir / name)
    labels = [op.label for op in report.ops]
    assert len(set(labels)) == len(labels)
    assert len({op.key for op in report.ops}) == len(report.ops)
    shared = [op for op in report.ops if op.name == "custom-call.1"]
    assert len({op.module for op in shared}) == len(shared) >= 5
    assert {op.label for op in shared} == {f"{op.module}/custom-call.1" for op in shared}
    names = [op.name for op in report.ops]
    for op in report.ops:
        assert (op.label == op.name) == (names.count(op.name) == 1), op.label
    text = terminal.render(report, top=len(report.ops), width=200)
    for op in shared:
        assert op.label in text
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert [op.label for op in again.ops] == labels


@pytest.mark.slow
def test_programs_sharing_a_module_name_are_told_apart(corpus_dir: Path) -> None:
    """In the MI300X attention trace four programs are all called ``jit_matmul``, each with a
    ``custom-call.1``: the label names the program by its key (``jit_matmul(19)``)."""
    report = _report(corpus_dir / "traces/mi300x_jax08_attention.xplane.pb")
    gemms = [op for op in report.ops if op.module == "jit_matmul" and op.name == "custom-call.1"]
    assert len(gemms) == 4
    assert all(re.fullmatch(r"jit_matmul\(\d+\)/custom-call\.1", op.label) for op in gemms)
    assert len({op.label for op in gemms}) == 4


@pytest.mark.slow
def test_annotate_uses_the_chosen_programs_ops(corpus_dir: Path) -> None:
    """Four programs named jit_matmul each have a custom-call.1: annotating one program prints
    that program's own measurement beside its custom-call.1, not another's."""
    from profan.report.format import seconds
    from profan.report.render import annotate

    analysis = analyse(corpus_dir / "traces/mi300x_jax08_attention.xplane.pb")
    report = build_report(analysis)
    gemms = [o for o in report.ops if o.module == "jit_matmul" and o.name == "custom-call.1"]
    assert len({o.program for o in gemms}) == 4
    for op in gemms:
        text = annotate.render(report, analysis.profile, op.program)
        line = next(x for x in text.splitlines() if re.match(r"\s*(ROOT )?%?custom-call\.1 =", x))
        assert f"measured {seconds(op.measured_s)} over {op.occurrences} executions" in line


def test_megacore_accounting_is_said_in_the_header(fixtures_dir: Path) -> None:
    """Scored against TPU v4 (two TensorCores act as one device) the header says which
    accounting the scorer used, in every format; against the CPU entry it says nothing."""
    report = build_report(analyse(fixtures_dir / "mlp", chip="tpu-v4"))
    note = report.summary.scorer["accounting_note"]
    assert "megacore" in note and report.summary.scorer["accounting"] in (
        "per-chip",
        "per-TensorCore",
    )
    assert note in " ".join(terminal.render(report, width=400).split())
    assert note in markdown.render(report) and note in html.render(report)
    plain = _report(fixtures_dir / "mlp")
    assert "accounting_note" not in plain.summary.scorer
    assert "per-chip:" not in terminal.render(plain, width=200)


def test_a_known_program_mesh_names_the_axes(fixtures_dir: Path) -> None:
    """The mlp fixture was run on a 4 (data) × 2 (model) mesh (meta.json); its optimised HLO
    carries only XLA's names. Given that mesh (as profan.capture knows it), the report names the
    axes `data`/`model`, and each collective runs over the axis of its group's size."""
    from profan.hlo.devices import MeshSpec
    from profan.sharding import ProgramMesh

    meta = json.loads((fixtures_dir / "mlp/meta.json").read_text())
    mesh = meta["mesh"]
    spec = MeshSpec(
        tuple(mesh["axis_names"]),
        tuple(mesh["axis_sizes"]),
        tuple(d for row in mesh["device_ids"] for d in row),
    )
    known = {meta["module_name"]: ProgramMesh(spec, "the fixture's meta.json")}
    report = build_report(analyse(fixtures_dir / "mlp", program_meshes=known))
    (axes,) = report.summary.mesh.values()
    assert axes == dict(zip(mesh["axis_names"], mesh["axis_sizes"], strict=True))
    collectives = [op.collective for op in report.ops if op.collective]
    assert collectives
    for collective in collectives:
        (axis,) = collective["axes"]
        assert axes[axis] == collective["group_size"]

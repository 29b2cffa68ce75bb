"""Sanity of the committed fixtures (made by fixtures/make_fixtures.py): files, meta, sizes.

No jax here: everything is read from the committed files. Checks cross the fixture's own
sources against each other (XLA's parser counts in meta vs the dump text, truth vs mesh, the
trace vs the program) so that a broken regeneration shows up.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

PROGRAMS = ("matmul", "mlp", "mlp_worse", "collectives", "transformer", "fsdp", "scan_layers")
# Meshes other than the 4x2 data x model one most programs use.
OTHER_MESHES = {"fsdp": (["fsdp"], [8])}
# Single-op programs (HLO + XLA cost analysis, no trace): fixtures/xla_programs/<name>/.
XLA_PROGRAMS_DIR = "xla_programs"
MAX_FILE_BYTES = 3 * 1024 * 1024
MAX_TOTAL_BYTES = 10 * 1024 * 1024


def _meta(fixtures_dir: Path, name: str) -> dict[str, Any]:
    return json.loads((fixtures_dir / name / "meta.json").read_text())


@pytest.fixture(params=PROGRAMS)
def program(request: pytest.FixtureRequest, fixtures_dir: Path) -> tuple[Path, dict[str, Any]]:
    return fixtures_dir / request.param, _meta(fixtures_dir, request.param)


def test_every_program_has_hlo_trace_and_meta(program: tuple[Path, dict[str, Any]]) -> None:
    folder, meta = program
    dumps = sorted((folder / "hlo").glob("*after_optimizations.txt"))
    assert dumps, f"{folder}: no *after_optimizations.txt"
    assert not list((folder / "hlo").glob("*buffer-assignment*"))
    runs = [p for p in (folder / "trace" / "plugins" / "profile").iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    xplanes = list(runs[0].glob("*.xplane.pb"))
    assert len(xplanes) == 1, xplanes
    assert meta["name"] == folder.name
    listed = {Path(p) for p in meta["trace"]["files"]}
    assert listed == {p.relative_to(folder) for p in (folder / "trace").rglob("*") if p.is_file()}


def test_hlo_files_start_with_the_module_xla_named(program: tuple[Path, dict[str, Any]]) -> None:
    folder, meta = program
    assert meta["hlo_files"]
    for entry in meta["hlo_files"]:
        text = (folder / entry["file"]).read_text()
        assert text.startswith(f"HloModule {meta['module_name']},"), entry["file"]


def test_xla_counts_match_the_dump_text(program: tuple[Path, dict[str, Any]]) -> None:
    """XLA's parser counts (recorded by the generator) agree with a line count of the text."""
    folder, meta = program
    for entry in meta["hlo_files"]:
        text = (folder / entry["file"]).read_text()
        instructions = len(re.findall(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", text, re.M))
        computations = len(re.findall(r"^(?:ENTRY )?%?[\w.\-]+ \(.*\{$", text, re.M))
        assert entry["xla_counts"] == {"computations": computations, "instructions": instructions}


def test_cost_analysis_is_numeric_and_positive(program: tuple[Path, dict[str, Any]]) -> None:
    _, meta = program
    cost = meta["cost_analysis"]
    assert all(isinstance(v, float) and math.isfinite(v) for v in cost.values())
    assert cost["bytes accessed"] > 0
    if meta["truth"]["matmuls"]:
        assert cost["flops"] > 0


def test_matmul_cost_analysis_is_2mkn(fixtures_dir: Path) -> None:
    meta = _meta(fixtures_dir, "matmul")
    (mm,) = meta["truth"]["matmuls"]
    m, k = mm["lhs_shape"]
    assert mm["rhs_shape"][0] == k
    n = mm["rhs_shape"][1]
    assert meta["cost_analysis"]["flops"] == 2 * m * k * n
    # f32 operands read once and the result written once.
    assert meta["cost_analysis"]["bytes accessed"] == 4 * (m * k + k * n + m * n)


def test_mesh_and_device_order(program: tuple[Path, dict[str, Any]]) -> None:
    _, meta = program
    assert meta["device_count"] == 8
    mesh = meta["mesh"]
    if mesh is None:
        assert meta["name"] == "matmul"
        return
    if meta["name"] in OTHER_MESHES:
        names, sizes = OTHER_MESHES[meta["name"]]
        assert (mesh["axis_names"], mesh["axis_sizes"]) == (names, sizes)
        assert mesh["device_ids"] == list(range(8))  # a 1-D mesh: the devices in order
        return
    assert mesh["axis_names"] == ["data", "model"]
    assert mesh["axis_sizes"] == [4, 2]
    flat = [d for row in mesh["device_ids"] for d in row]
    assert sorted(flat) == list(range(8))
    assert [len(row) for row in mesh["device_ids"]] == [2, 2, 2, 2]


def test_truth_is_consistent_with_the_mesh(program: tuple[Path, dict[str, Any]]) -> None:
    _, meta = program
    axes = (
        dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))
        if (meta["mesh"])
        else {}
    )
    for mm in meta["truth"]["matmuls"]:
        lhs, rhs = mm["einsum"].split("->")[0].split(",")
        out = mm["einsum"].split("->")[1]
        for letters, shape, split in (
            (lhs, mm["lhs_shape"], mm["lhs_split"]),
            (rhs, mm["rhs_shape"], mm["rhs_split"]),
            (out, mm["out_shape"], mm["out_split"]),
        ):
            assert shape == [mm["dim_sizes"][c] for c in letters]
            for dim, along in split.items():
                ways = math.prod(axes[a] for a in along)
                assert shape[int(dim)] % ways == 0, (mm["name"], letters, dim)
    for coll in meta["truth"]["collectives"]:
        assert set(coll["axes"]) <= set(axes), coll


def _expand_groups(text: str, mesh: dict[str, Any]) -> list[list[int]]:
    """Replica groups in the three forms these fixtures contain, as explicit device lists."""
    import numpy as np

    if text.startswith("source_target_pairs="):
        return [[int(a), int(b)] for a, b in re.findall(r"\{(\d+),(\d+)\}", text)]
    body = text.removeprefix("replica_groups=")
    if body.startswith("{{"):
        return [[int(x) for x in g.split(",")] for g in re.findall(r"\{([\d,]+)\}", body)]
    iota = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", body)
    if iota:
        dims = [int(x) for x in iota.group(1).split(",")]
        ids = np.arange(math.prod(dims)).reshape([int(x) for x in iota.group(2).split(",")])
        if iota.group(3):
            ids = ids.transpose([int(x) for x in iota.group(3).split(",")])
        return ids.reshape(dims).tolist()
    named = re.fullmatch(r"mesh\[(.*)\] \{(.*)\}", body)
    assert named, text
    sizes = [(a, int(n)) for a, n in re.findall(r"'(\w+)'=(\d+)", named.group(1))]
    along = re.findall(r"'(\w+)'", named.group(2))
    ids = np.arange(math.prod(n for _, n in sizes)).reshape([n for _, n in sizes])
    names = [a for a, _ in sizes]
    keep = [names.index(a) for a in names if a not in along]
    order = keep + [names.index(a) for a in along]
    group_size = math.prod(n for a, n in sizes if a in along)
    return ids.transpose(order).reshape(-1, group_size).tolist()


def _groups_along(mesh: dict[str, Any], along: list[str]) -> list[list[int]]:
    import numpy as np

    ids = np.array(mesh["device_ids"])
    names = mesh["axis_names"]
    keep = [names.index(a) for a in names if a not in along]
    order = keep + [names.index(a) for a in along]
    size = math.prod(mesh["axis_sizes"][names.index(a)] for a in along)
    return ids.transpose(order).reshape(-1, size).tolist()


def test_every_truth_collective_is_in_the_hlo(program: tuple[Path, dict[str, Any]]) -> None:
    """Each (kind, axes) in the truth names groups that some emitted collective really has."""
    _, meta = program
    emitted = [
        (c["opcode"], sorted(map(sorted, _expand_groups(c["groups"], meta["mesh"]))))
        for c in meta["hlo_collectives"]
    ]
    for coll in meta["truth"]["collectives"]:
        if coll["kind"] == "collective-permute":
            along = coll["axes"]
            pairs = sorted(
                sorted([src, dst])
                for kind, groups in emitted
                if kind == "collective-permute"
                for src, dst in groups
            )
            # Every pair stays inside one group along the permute's axes.
            groups = [set(g) for g in _groups_along(meta["mesh"], along)]
            assert pairs and all(any(set(p) <= g for g in groups) for p in pairs)
            continue
        want = sorted(map(sorted, _groups_along(meta["mesh"], coll["axes"])))
        assert (coll["kind"], want) in emitted, (coll, emitted)


def test_step_annotation_in_all_but_one(fixtures_dir: Path) -> None:
    annotated = {n: _meta(fixtures_dir, n)["trace"]["step_trace_annotation"] for n in PROGRAMS}
    assert sorted(n for n, used in annotated.items() if not used) == ["collectives"]


def test_mlp_worse_differs_only_by_the_forced_all_gather(fixtures_dir: Path) -> None:
    good, worse = _meta(fixtures_dir, "mlp"), _meta(fixtures_dir, "mlp_worse")
    assert [i["shape"] for i in good["inputs"]] == [i["shape"] for i in worse["inputs"]]
    assert good["trace"]["steps"] == worse["trace"]["steps"]
    kinds = [c["opcode"] for c in good["hlo_collectives"]]
    assert "all-gather" not in kinds
    assert "all-gather" in [c["opcode"] for c in worse["hlo_collectives"]]


def test_committed_fixture_sizes_stay_small(fixtures_dir: Path) -> None:
    files = [p for name in PROGRAMS for p in (fixtures_dir / name).rglob("*") if p.is_file()]
    big = [(str(p), p.stat().st_size) for p in files if p.stat().st_size > MAX_FILE_BYTES]
    assert not big
    assert sum(p.stat().st_size for p in files) < MAX_TOTAL_BYTES


def test_truth_source_lines_are_in_the_dump_stack_frames(
    program: tuple[Path, dict[str, Any]],
) -> None:
    """Each truth matmul's source line is one of the dump's FileLocations in the generator."""
    folder, meta = program
    text = (folder / meta["hlo_files"][0]["file"]).read_text()
    table = text.split("\nFileNames\n", 1)[1].split("\n\n", 1)[0]
    files = dict(re.findall(r'^(\d+) "(.*)"$', table, re.M))
    locations = re.findall(r"^\d+ \{file_name_id=(\d+) function_name_id=\d+ line=(\d+)", text, re.M)
    lines = {int(line) for fid, line in locations if files[fid].endswith("/make_fixtures.py")}
    for mm in meta["truth"]["matmuls"]:
        assert mm["source"]["file"] == "make_fixtures.py"
        assert mm["source"]["line"] in lines, mm["name"]


def test_truth_local_shapes_divide_the_global_ones(program: tuple[Path, dict[str, Any]]) -> None:
    _, meta = program
    for mm in meta["truth"]["matmuls"]:
        for side in ("lhs", "rhs", "out"):
            ratio = math.prod(mm[f"{side}_shape"]) // math.prod(mm[f"{side}_local_shape"])
            ways = (
                math.prod(
                    dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))[
                        a
                    ]
                    for axes in mm[f"{side}_split"].values()
                    for a in axes
                )
                if meta["mesh"]
                else 1
            )
            assert ratio == ways, (mm["name"], side)


def _xla_programs(fixtures_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    group = fixtures_dir / XLA_PROGRAMS_DIR
    return [
        (folder, json.loads((folder / "meta.json").read_text()))
        for folder in sorted(p for p in group.iterdir() if p.is_dir())
    ]


def test_xla_programs_hold_one_dump_and_xla_numbers_each(fixtures_dir: Path) -> None:
    programs = _xla_programs(fixtures_dir)
    assert len(programs) == 16
    for folder, meta in programs:
        assert meta["name"] == folder.name
        # Each function's name is its module's: jit_<name> (the dumps shared one directory).
        assert meta["module_name"] == f"jit_{folder.name}"
        files = sorted(p.name for p in (folder / "hlo").iterdir())
        (entry,) = meta["hlo_files"]
        assert files == [entry["file"].removeprefix("hlo/")]
        assert entry["file"].endswith(f".{meta['module_name']}.cpu_after_optimizations.txt")
        text = (folder / entry["file"]).read_text()
        assert text.startswith(f"HloModule {meta['module_name']},")
        instructions = len(re.findall(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", text, re.M))
        computations = len(re.findall(r"^(?:ENTRY )?%?[\w.\-]+ \(.*\{$", text, re.M))
        assert entry["xla_counts"] == {"computations": computations, "instructions": instructions}
        cost = meta["cost_analysis"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in cost.values())
        assert cost["bytes accessed"] > 0


def test_xla_program_batched_matmul_cost_is_2bmkn(fixtures_dir: Path) -> None:
    meta = json.loads(
        (fixtures_dir / XLA_PROGRAMS_DIR / "batched_matmul" / "meta.json").read_text()
    )
    (b, m, k), (_, _, n) = (i["shape"] for i in meta["inputs"])
    assert meta["cost_analysis"]["flops"] == 2 * b * m * k * n
    assert meta["cost_analysis"]["bytes accessed"] == 4 * (b * m * k + b * k * n + b * m * n)


def test_second_round_fixture_sizes_stay_small(fixtures_dir: Path) -> None:
    folders = [fixtures_dir / n for n in ("fsdp", "scan_layers", XLA_PROGRAMS_DIR)]
    files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert all(p.stat().st_size < 1024 * 1024 for p in files)
    assert sum(p.stat().st_size for p in files) < 3 * 1024 * 1024


# Third round: fixtures/all_to_all/<program>/ (shard_map all_to_all programs; HLO, no trace).
ALL_TO_ALL_DIR = "all_to_all"
ALL_TO_ALL_PROGRAMS = ("all_to_all_2d", "all_to_all_rows")


def _all_to_all_programs(fixtures_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    group = fixtures_dir / ALL_TO_ALL_DIR
    return [
        (folder, json.loads((folder / "meta.json").read_text()))
        for folder in sorted(p for p in group.iterdir() if p.is_dir())
    ]


def test_all_to_all_group_has_no_group_meta_and_one_dump_each(fixtures_dir: Path) -> None:
    # No meta.json at the group level: tests that glob fixtures/*/meta.json see traced programs.
    assert not (fixtures_dir / ALL_TO_ALL_DIR / "meta.json").exists()
    programs = _all_to_all_programs(fixtures_dir)
    assert tuple(folder.name for folder, _ in programs) == ALL_TO_ALL_PROGRAMS
    for folder, meta in programs:
        assert meta["name"] == folder.name
        assert meta["module_name"] == f"jit_{folder.name}"
        assert sorted(p.name for p in folder.iterdir()) == ["hlo", "meta.json"]
        (entry,) = meta["hlo_files"]
        assert sorted(p.name for p in (folder / "hlo").iterdir()) == [
            entry["file"].removeprefix("hlo/")
        ]
        assert entry["file"].endswith(f".{meta['module_name']}.cpu_after_optimizations.txt")
        text = (folder / entry["file"]).read_text()
        assert text.startswith(f"HloModule {meta['module_name']},")
        instructions = len(re.findall(r"^\s+(?:ROOT )?%?[\w.\-]+ = ", text, re.M))
        computations = len(re.findall(r"^(?:ENTRY )?%?[\w.\-]+ \(.*\{$", text, re.M))
        assert entry["xla_counts"] == {"computations": computations, "instructions": instructions}
        cost = meta["cost_analysis"]
        assert all(isinstance(v, float) and math.isfinite(v) for v in cost.values())
        assert cost["bytes accessed"] > 0


def test_all_to_all_truth_agrees_with_mesh_inputs_and_dump(fixtures_dir: Path) -> None:
    for folder, meta in _all_to_all_programs(fixtures_dir):
        mesh = meta["mesh"]
        sizes = dict(zip(mesh["axis_names"], mesh["axis_sizes"], strict=True))
        ids = mesh["device_ids"]
        flat = [d for row in ids for d in row] if isinstance(ids[0], list) else list(ids)
        assert sorted(flat) == list(range(math.prod(sizes.values())))
        text = (folder / meta["hlo_files"][0]["file"]).read_text()
        assert f"num_partitions={len(flat)}" in text.split("\n", 1)[0]
        a2a = meta["truth"]["all_to_all"]
        assert a2a["tiled"] and a2a["split_axis"] != a2a["concat_axis"]
        # The input's partition spec is the all-to-all's in_split.
        spec = meta["inputs"][0]["sharding"]["partition_spec"]
        assert meta["inputs"][0]["shape"] == a2a["shape"]
        assert {str(d): [p] if isinstance(p, str) else p for d, p in enumerate(spec) if p} == a2a[
            "in_split"
        ]
        # A tiled all-to-all over `axes` moves those axes from concat dim to split dim.
        moved = math.prod(sizes[a] for a in a2a["axes"])
        for side, dim in (("in_split", a2a["concat_axis"]), ("out_split", a2a["split_axis"])):
            assert set(a2a["axes"]) <= set(a2a[side].get(str(dim), []))
        assert all(a2a["shape"][int(d)] % moved == 0 for d in a2a["out_split"])
        # The one emitted collective is an all-to-all whose groups run along the truth's axes.
        (coll,) = meta["hlo_collectives"]
        assert coll["opcode"] == "all-to-all"
        want = sorted(map(sorted, _groups_along(mesh, a2a["axes"])))
        assert sorted(map(sorted, _expand_groups(coll["groups"], mesh))) == want
        # The output's sharding is the matmul truth's out split.
        (mm,) = meta["truth"]["matmuls"]
        (out,) = meta["outputs"]
        assert out["shape"] == mm["out_shape"]
        out_spec = {
            str(d): [p] if isinstance(p, str) else p
            for d, p in enumerate(out["sharding"]["partition_spec"])
            if p
        }
        assert out_spec == mm["out_split"]
        for side in ("lhs", "rhs", "out"):
            ratio = math.prod(mm[f"{side}_shape"]) // math.prod(mm[f"{side}_local_shape"])
            assert ratio == math.prod(
                sizes[a] for axes in mm[f"{side}_split"].values() for a in axes
            )


def test_all_to_all_cost_analysis_is_the_local_matmul(fixtures_dir: Path) -> None:
    """XLA's per-device flops are the local dot's 2*m*k*n (slices and copies count none)."""
    for _, meta in _all_to_all_programs(fixtures_dir):
        (mm,) = meta["truth"]["matmuls"]
        (k,) = mm["contracted"]
        local = 2 * math.prod(mm["out_local_shape"]) * mm["dim_sizes"][k]
        assert meta["cost_analysis"]["flops"] == local


def test_all_to_all_fixture_sizes_stay_small(fixtures_dir: Path) -> None:
    files = [p for p in (fixtures_dir / ALL_TO_ALL_DIR).rglob("*") if p.is_file()]
    assert files and sum(p.stat().st_size for p in files) < 200 * 1024

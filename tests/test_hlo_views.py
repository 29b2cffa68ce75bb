"""The attribute decoders of profan.hlo.views on real programs: device groups against the truth
JAX recorded, trip counts of every corpus while loop, metadata and targets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.errors import HloSyntaxError
from profan.hlo import parse_file, parse_instruction, parse_module
from profan.hlo.graph import scheduled_computations
from profan.hlo.views import (
    backend_config,
    custom_call_target,
    metadata,
    replica_groups,
    source_target_pairs,
    trip_count,
)
from tests.conftest import FIXTURES_DIR
from tests.test_hlo_verify import VERIFIER_REJECTS


def test_device_groups_of_the_collectives_fixture_equal_jax_truth() -> None:
    meta = json.loads((FIXTURES_DIR / "collectives" / "meta.json").read_text())
    module = parse_file(str(next((FIXTURES_DIR / "collectives" / "hlo").glob("*after_opt*"))))
    by_name = {i.name: i for i in module.instructions()}
    truth = meta["truth"]["collectives"]
    printed = meta["hlo_collectives"]
    assert len(truth) == len(printed) == 6
    data_rows = meta["mesh"]["device_ids"]  # devices by [data][model]
    for row in printed:
        instruction = by_name[row["name"]]
        expected = next(t for t in truth if t["kind"] == instruction.opcode and _same(t, row))
        if instruction.opcode == "collective-permute":
            assert replica_groups(instruction, module.num_devices) is None
            pairs = source_target_pairs(instruction)
            assert pairs is not None
            # the data-axis ring i -> i+1 of JAX's ppermute, on each model column
            wanted = {
                (data_rows[a][m], data_rows[b][m])
                for a, b in expected["data_index_pairs"]
                for m in range(len(data_rows[0]))
            }
            assert set(pairs) == wanted
        else:
            groups = replica_groups(instruction, module.num_devices)
            assert groups == expected["device_groups"], row["name"]
            assert source_target_pairs(instruction) is None


def _same(truth: dict, printed: dict) -> bool:
    if "device_groups" not in truth or "replica_groups" not in printed["groups"]:
        return True
    text = printed["groups"].split("=", 1)[1]
    return [[int(d) for d in g.split(",")] for g in re.findall(r"\{([\d,]+)\}", text)] == truth[
        "device_groups"
    ]


def test_synthetic_empty_or_absent_groups_are_every_device() -> None:
    # XLA reads replica_groups={} and a collective without replica_groups the same way.
    empty = parse_instruction("%a = f32[4]{0} all-reduce(f32[4]{0} %x), replica_groups={}")
    absent = parse_instruction("%a = f32[4]{0} all-gather(f32[1]{0} %x), dimensions={0}")
    iota = parse_instruction(
        "%a = f32[4]{0} all-reduce(f32[4]{0} %x), replica_groups=[2,4]<=[4,2]T(1,0)"
    )
    assert replica_groups(empty, 4) == [[0, 1, 2, 3]]
    assert replica_groups(absent, 2) == [[0, 1]]
    assert replica_groups(empty, None) == []
    # [4,2] transposed: device d sits at (d // 2, d % 2); groups run down the columns
    assert replica_groups(iota, 8) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert replica_groups(parse_instruction("%n = f32[4]{0} negate(%x)"), 8) is None
    bad = parse_instruction("%a = f32[4]{0} all-reduce(%x), replica_groups={{0,1},{2,}}")
    with pytest.raises(HloSyntaxError):
        replica_groups(bad, 4)


@pytest.mark.corpus
def test_every_corpus_while_loop_has_the_trip_count_its_config_records(corpus_dir: Path) -> None:
    # One decoder for every printed form: bare JSON and the quoted string
    # (collective_pipeliner_test__39: backend_config="{\"known_trip_count\":{\"n\":\"25\"}}").
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    known = re.compile(r'known_trip_count\\?"\s*:\s*\{\\?"n\\?"\s*:\s*\\?"(\d+)')
    loops = with_count = quoted = 0
    for row in rows:
        if not row["xla_parses"] or row["file"] in VERIFIER_REJECTS:
            continue  # (VERIFIER_REJECTS: XLA's shape inference refuses them, as profan does)
        text = (root / row["file"]).read_text()
        if " while(" not in text:
            continue
        module = parse_module(text, file=row["file"])
        scheduled = {s.computation.name: s for s in scheduled_computations(module)}
        for instruction in module.instructions():
            if instruction.opcode != "while":
                continue
            loops += 1
            raw = instruction.attributes.get("backend_config", "")
            found = known.search(raw)
            expected = int(found.group(1)) if found else None
            assert trip_count(instruction) == expected, (row["file"], instruction.name)
            if expected is None:
                continue
            with_count += 1
            quoted += raw.startswith('"')
            # the schedule walk runs the body that often per run of the loop's computation
            outer = scheduled.get(instruction.computation or "")
            body = scheduled.get(instruction.attributes["body"].lstrip("%"))
            if outer is not None and body is not None and outer.count_is_exact:
                assert body.count % expected == 0
    assert loops > 100
    assert with_count >= 39
    assert quoted == 1


def test_metadata_and_target_are_decoded_once() -> None:
    line = parse_instruction(
        '%c = f32[2]{0} custom-call(f32[2]{0} %x), custom_call_target="__cublas$gemm", '
        'metadata={op_name="jit(f)/dot" source_file="m.py" source_line=7}'
    )
    first = metadata(line)
    assert (first.op_name, first.source_file, first.source_line) == ("jit(f)/dot", "m.py", 7)
    assert metadata(line) is first
    assert custom_call_target(line) == "__cublas$gemm"
    assert custom_call_target(parse_instruction("%n = f32[2]{0} negate(%x)")) is None


@pytest.mark.parametrize("name", ["collectives", "transformer", "scan_layers"])
def test_the_program_mesh_in_the_before_optimizations_dump_is_jax_mesh(name: str) -> None:
    # JAX writes its mesh into the module header: frontend_attributes={xla.sdy.meshes={mesh =
    # #sdy.mesh<["data"=4, "model"=2]>}}; meta.json records the mesh JAX was given.
    from profan.hlo.devices import decode_sdy_mesh
    from profan.hlo.views import frontend_attribute

    meta = json.loads((FIXTURES_DIR / name / "meta.json").read_text())["mesh"]
    dump = next((FIXTURES_DIR / name / "hlo").glob("*before_optimizations.txt"))
    module = parse_file(str(dump))
    meshes = frontend_attribute(module.attributes.get("frontend_attributes"), "xla.sdy.meshes")
    assert meshes is not None
    declared = frontend_attribute(meshes, "mesh")
    mesh = decode_sdy_mesh(declared or "")
    assert mesh is not None
    assert list(mesh.axis_names) == meta["axis_names"]
    assert list(mesh.axis_sizes) == meta["axis_sizes"]
    assert [
        list(mesh.device_ids[i : i + mesh.axis_sizes[-1]])
        for i in range(0, len(mesh.device_ids), mesh.axis_sizes[-1])
    ] == meta["device_ids"]
    assert decode_sdy_mesh('#sdy.mesh<["a"=2], device_ids=[0,0]>') is None


@pytest.mark.corpus
def test_a_json_backend_config_with_a_trailing_comma_decodes(corpus_dir: Path) -> None:
    # XLA's lexer only balances the braces of a bare backend config, so it accepts
    # `{ "fusion_backend_config": {...}, }`; JSON does not.
    name = "xla__service__gpu__model__matmul_ptable_stats_collection_test__1.hlo"
    module = parse_module((corpus_dir / "hlo" / "xla" / name).read_text(), file=name)
    configs = [backend_config(i) for i in module.instructions() if "backend_config" in i.attributes]
    kinds = [
        c["fusion_backend_config"]["kind"] for c in configs if c and "fusion_backend_config" in c
    ]
    assert "__triton_gemm" in kinds

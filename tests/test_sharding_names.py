"""The program's own mesh axis names, read from XLA's corpus: Shardy's ``xla.sdy.meshes`` and
mesh-form shardings (``mesh['x'=2,'y'=2]``, sub-axes ``'x':(1)2``).  The fixtures' names (JAX's
dumps before optimisation) are tested in test_sharding_fixtures.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.errors import ProfanError
from profan.hlo.devices import decode_replica_groups, decode_sdy_mesh
from profan.hlo.parser import parse_module
from profan.hlo.printer import module_to_text
from profan.hlo.text import quote
from profan.hlo.views import frontend_attribute
from profan.sharding import describe, program_mesh
from profan.sharding.program import SDY_MESHES_KEY, ProgramMesh
from tests.conftest import FIXTURES_DIR


def _corpus_modules(corpus_dir: Path, *markers: str):
    root = corpus_dir / "hlo" / "xla"
    for path in sorted(root.glob("*.hlo")):
        text = path.read_text(errors="replace")
        if not any(marker in text for marker in markers):
            continue
        try:
            yield path.name, parse_module(text, file=path.name)
        except ProfanError:
            continue


def _reference_groups(program: ProgramMesh, axis: str) -> set[frozenset[int]]:
    """The program mesh's device groups along ``axis`` (``name`` or ``name:(pre)size``), as
    profan.hlo.devices' reader of mesh-form replica groups computes them."""
    spec = program.spec
    axes = ",".join(f"'{n}'={s}" for n, s in zip(spec.axis_names, spec.axis_sizes, strict=True))
    ids = ",".join(map(str, spec.device_ids))
    name, _, piece = axis.partition(":")
    reference = f"'{name}'" + (f":{piece}" if piece else "")
    text = f"mesh[{axes},device_ids=({ids})] {{{reference}}}"
    return {frozenset(g) for g in decode_replica_groups(text)}


def test_every_corpus_module_with_a_named_mesh_gets_its_names(corpus_dir: Path) -> None:
    """Each axis named after the program's mesh has exactly the devices that mesh puts along
    that name; every module whose program mesh fits its device groups is named."""
    named = sources = inline = 0
    pieces: list[str] = []
    for file, module in _corpus_modules(corpus_dir, "xla.sdy.meshes", "mesh[", "mesh<"):
        program = program_mesh(module)
        if program is None:
            continue
        report = describe(module)
        if report.mesh.names_from is None:
            # Only when the program's mesh is not the module's device count (hand-written tests).
            assert program.spec.num_devices != report.mesh.num_devices, file
            continue
        named += 1
        sources += "xla.sdy.meshes" in report.mesh.names_from
        inline += "xla.sdy.in_shardings" in report.mesh.names_from
        program_names = set(program.spec.axis_names)
        for axis in report.mesh.axes:
            if axis.name.split(":")[0] not in program_names:
                continue
            if ":" in axis.name:
                pieces.append(axis.name)
            ours = {frozenset(g) for g in report.mesh.groups_along([axis.name])}
            assert ours == _reference_groups(program, axis.name), (file, axis)
        json.dumps(report.to_dict())
    print(
        f"\n{named} corpus modules named their mesh axes ({sources} from xla.sdy.meshes, "
        f"{inline} from a mesh inside Shardy's in_shardings)"
    )
    assert named >= 11
    assert sources >= 2
    assert inline >= 1  # shardy_xla_pass_test__1's manual computation
    assert {"x:(1)2", "x:(2)2"} <= set(pieces)  # spmd_partitioner_test__553's sub-axes


def test_maxtext_mesh_names_its_only_real_axis(corpus_dir: Path) -> None:
    """A real MaxText module (before optimisation): twelve named axes, all of size 1 but
    ``expert``=4; every split the program makes is along ``expert``."""
    name = "nv_maxtext_deepseek_1n4g_jit_train_step_before_optimization.hlo"
    path = corpus_dir / "hlo" / "xla" / f"xla__tools__benchmarks__hlo__{name}"
    module = parse_module(path.read_text(), file=path.name)
    program = program_mesh(module)
    assert program is not None and len(program.spec.axis_names) == 12
    report = describe(module)
    assert report.mesh.shape == {"expert": 4}
    assert report.matmuls
    splits = {a for m in report.matmuls for s in (m.lhs_split, m.rhs_split) for v in s.values()
              for a in v}  # fmt: skip
    assert splits == {"expert"}


def test_generated_names_are_not_the_programs(corpus_dir: Path) -> None:
    """XLA's own mesh forms with ``axis_N`` names (parser tests, our fixtures' dumps) are not
    taken as names; the mesh falls back to axis0, axis1, …"""
    checked = 0
    for file, module in _corpus_modules(corpus_dir, "mesh['axis_0'"):
        if re.search(r"mesh\['(?!axis_\d)", module_to_text(module)):
            continue
        assert program_mesh(module) is None, file
        checked += 1
    assert checked >= 2


def test_decode_sdy_mesh_reads_the_forms_shardy_prints(corpus_dir: Path) -> None:
    """Every ``#sdy.mesh<…>`` in the corpus decodes; names and sizes as printed."""
    found = 0
    for path in sorted((corpus_dir / "hlo" / "xla").glob("*.hlo")):
        text = path.read_text(errors="replace")
        for mesh in re.findall(r"#sdy\.mesh<(?:[^<>]|<[^<>]*>)*>", text.replace('\\"', '"')):
            spec = decode_sdy_mesh(mesh)
            assert spec is not None, (path.name, mesh)
            printed = re.findall(r'"([^"]+)"=(\d+)', mesh)
            assert list(zip(spec.axis_names, map(str, spec.axis_sizes), strict=True)) == printed
            found += 1
    assert found >= 8


def test_decode_sdy_mesh_device_ids() -> None:
    """Shardy's maximal mesh (no axes, one device) and a mesh with its own device order, as
    the corpus prints them (shardy_xla_pass_test__33) and as a permuted order would be."""
    maximal = decode_sdy_mesh("#sdy.mesh<[], device_ids=[0]>")
    assert maximal is not None and maximal.axis_names == () and maximal.device_ids == (0,)
    permuted = decode_sdy_mesh('#sdy.mesh<["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>')
    assert permuted is not None and permuted.device_ids == (3, 2, 1, 0)
    # Ids that are not a permutation of the mesh's devices are refused.
    assert decode_sdy_mesh('#sdy.mesh<["a"=2], device_ids=[0, 0]>') is None
    assert decode_sdy_mesh('#sdy.mesh<["a"=2 "b"=2]>') is None


def test_frontend_attribute_bare_form_as_the_corpus_prints_it(corpus_dir: Path) -> None:
    path = corpus_dir / "hlo" / "xla" / "xla__service__spmd__shardy__shardy_xla_pass_test__33.hlo"
    module = parse_module(path.read_text(), file=path.name)
    value = frontend_attribute(module.attributes.get("frontend_attributes"), SDY_MESHES_KEY)
    assert value is not None and value.startswith("{") and "#sdy.mesh<" in value
    program = program_mesh(module)
    assert program is not None and program.spec.axis_names == ("x",)


def test_synthetic_quoted_frontend_attribute() -> None:
    """The quoted form (``key="{…}"``, as XLA prints a value read from an HloProto): the value
    of the fixture's real ``xla.sdy.meshes``, quoted, reads back unchanged."""
    text = next((FIXTURES_DIR / "mlp" / "hlo").glob("*before_optimizations.txt")).read_text()
    header = parse_module(text).attributes["frontend_attributes"]
    value = frontend_attribute(header, SDY_MESHES_KEY)
    assert value == '{mesh = #sdy.mesh<["data"=4, "model"=2]>}'
    quoted = f"{{other={quote('x, y')}, {SDY_MESHES_KEY}={quote(value)}}}"
    assert frontend_attribute(quoted, SDY_MESHES_KEY) == value
    assert frontend_attribute(quoted, "other") == "x, y"
    assert frontend_attribute(quoted, "absent") is None


@pytest.mark.parametrize(
    ("sharding", "names"),
    [
        ("{mesh['data'=4,'model'=2], [{'data'}, {'model'}]}", ["data", "model"]),
        ("{mesh['x'=4] [{'x':(1)2}, {'x':(2)2}]}", ["x:(1)2", "x:(2)2"]),
    ],
)
def test_synthetic_mesh_sharding_names_and_groups(sharding: str, names: list[str]) -> None:
    """A parameter sharded in the mesh form, over 8/4 devices: the axes take the mesh's names
    (sub-axes as Shardy writes them) and their groups are the mesh's."""
    devices = 8 if "data" in sharding else 4
    text = (
        f"HloModule synthetic_named, num_partitions={devices}\n\n"
        f"ENTRY %main (p: f32[16,16]) -> f32[16,16] {{\n"
        f"  %p = f32[4,8]{{1,0}} parameter(0), sharding={sharding}\n"
        f"  ROOT %c = f32[4,8]{{1,0}} copy(%p)\n}}\n"
    )
    module = parse_module(text)
    report = describe(module)
    assert [a.name for a in report.mesh.axes] == names
    program = program_mesh(module)
    assert program is not None
    for axis in names:
        ours = {frozenset(g) for g in report.mesh.groups_along([axis])}
        assert ours == _reference_groups(program, axis)

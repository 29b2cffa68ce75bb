"""The program's own device mesh, where the program carries one: axis names, sizes, device order.

JAX and Shardy write the mesh a program was written against into its HLO in a few places:

* the module's ``frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["data"=4, "model"=2]>}}``
  (Shardy; JAX writes it into the module before optimisations, and XLA keeps it on some
  optimised modules); a mesh may list ``device_ids=[…]`` when its device order is not the
  identity;
* Shardy's shardings of manual computations, which may write their mesh inline
  (``xla.sdy.in_shardings="#sdy.sharding_per_value<[<mesh<["a"=2, "b"=2]>, …]>"``);
* shardings in the mesh form, ``sharding={mesh['data'=4,'model'=2], [{'data'}, {}]}``;
* replica groups in the mesh form, ``replica_groups=mesh['data'=4,'model'=2] {'data'}``.

XLA also prints replica groups and shardings in the mesh form when the program gave it no names,
with names it makes up (``mesh['axis_0'=4,'axis_1'=2] {'axis_1'}``, one ``axis_N`` per dim of the
tile assignment); those are not the program's names and are ignored here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from profan.errors import HloSyntaxError
from profan.hlo import views
from profan.hlo.devices import MeshSpec, decode_sdy_mesh, replica_groups_mesh
from profan.hlo.mlir_attributes import decode_attribute_dict
from profan.hlo.model import Module
from profan.hlo.views import frontend_attribute

SDY_MESHES_KEY = "xla.sdy.meshes"
# Shardy's per-instruction shardings, which may write their mesh inline.
SDY_SHARDING_KEYS = ("xla.sdy.sharding", "xla.sdy.in_shardings", "xla.sdy.out_shardings")

# Names XLA invents when it prints device lists in the mesh form without the program's names.
_GENERATED_NAME = re.compile(r"^axis_\d+$")
# A mesh written inline in a Shardy sharding (``<mesh<["a"=2]>, [{"a"}]>``), not ``@name``.
_INLINE_SDY_MESH = re.compile(
    r"(?<![\w.@])(mesh<\s*\[[^\]]*\]\s*(?:,\s*device_ids\s*=\s*\[[^\]]*\]\s*)?>)"
)


@dataclass(frozen=True, slots=True)
class ProgramMesh:
    """A mesh the program names: ``spec`` (axis names, sizes, device ids row-major over the axes)
    and where it was read."""

    spec: MeshSpec
    source: str

    @property
    def axes(self) -> list[tuple[str, int, int]]:
        """``(name, size, stride)`` of each axis of size > 1, major first; the stride counts
        positions in the row-major device order."""
        found: list[tuple[str, int, int]] = []
        stride = self.spec.num_devices
        for name, size in zip(self.spec.axis_names, self.spec.axis_sizes, strict=True):
            stride //= size
            if size > 1:
                found.append((name, size, stride))
        return found


def _is_named(spec: MeshSpec) -> bool:
    return any(size > 1 for size in spec.axis_sizes) and not all(
        _GENERATED_NAME.match(name) for name in spec.axis_names
    )


def _sdy_meshes(module: Module) -> list[ProgramMesh]:
    value = frontend_attribute(module.attributes.get("frontend_attributes"), SDY_MESHES_KEY)
    if not value:
        return []
    entries = decode_attribute_dict(value) or {}
    found: list[ProgramMesh] = []
    for mesh_name, text in entries.items():
        spec = decode_sdy_mesh(text) if isinstance(text, str) else None
        if spec is not None and _is_named(spec):
            found.append(ProgramMesh(spec, f"{SDY_MESHES_KEY} ({mesh_name}) of the module"))
    return found


def _inline_sdy_meshes(module: Module) -> list[ProgramMesh]:
    """Meshes written inside Shardy's per-instruction shardings (``xla.sdy.in_shardings=
    "#sdy.sharding_per_value<[<mesh<["a"=2, "b"=2]>, [{"a"}, {}]>]>"`` of a manual computation)."""
    found: list[ProgramMesh] = []
    seen: set[MeshSpec] = set()
    for instruction in module.instructions():
        text = instruction.attributes.get("frontend_attributes")
        if not text or "mesh<" not in text:
            continue
        for key in SDY_SHARDING_KEYS:
            for inline in _INLINE_SDY_MESH.findall(frontend_attribute(text, key) or ""):
                spec = decode_sdy_mesh(f"#sdy.{inline}")
                if spec is not None and spec not in seen and _is_named(spec):
                    seen.add(spec)
                    found.append(ProgramMesh(spec, f"{key} of {instruction.name}"))
    return found


def _sharding_meshes(module: Module) -> list[ProgramMesh]:
    found: list[ProgramMesh] = []
    seen: set[MeshSpec] = set()
    for instruction in module.instructions():
        sharding = views.sharding(instruction)
        if sharding is None:
            continue
        for element in sharding.elements or (sharding,):
            spec = element.mesh
            if spec is not None and spec not in seen and _is_named(spec):
                seen.add(spec)
                found.append(ProgramMesh(spec, f"sharding= of {instruction.name}"))
    return found


def _replica_group_meshes(module: Module) -> list[ProgramMesh]:
    found: list[ProgramMesh] = []
    seen: set[MeshSpec] = set()
    for instruction in module.instructions():
        text = instruction.attributes.get("replica_groups")
        if not text or "mesh" not in text:
            continue
        try:
            spec = replica_groups_mesh(text)
        except HloSyntaxError:
            continue
        if spec is not None and spec not in seen and _is_named(spec):
            seen.add(spec)
            found.append(ProgramMesh(spec, f"replica_groups of {instruction.name}"))
    return found


def program_mesh(module: Module, num_devices: int | None = None) -> ProgramMesh | None:
    """The mesh the program names, or ``None`` when it names none (or only XLA's ``axis_N``).

    Shardy's ``xla.sdy.meshes`` wins over meshes written inline in Shardy's shardings, those
    over mesh-form shardings, and those over mesh-form replica groups; among several meshes,
    the first one whose device count is ``num_devices`` (when given), else the one with the
    most devices.
    """
    candidates = (
        _sdy_meshes(module)
        + _inline_sdy_meshes(module)
        + _sharding_meshes(module)
        + _replica_group_meshes(module)
    )
    if not candidates:
        return None
    if num_devices is not None:
        for candidate in candidates:
            if candidate.spec.num_devices == num_devices:
                return candidate
    return max(candidates, key=lambda c: c.spec.num_devices)

"""The device mesh of a module, inferred from its device groups, and each collective's axes.

``infer_mesh(module)`` reads every device group in the module (collectives' ``replica_groups``,
``source_target_pairs``, and the tile assignments of ``sharding=`` annotations) and finds the
smallest mesh — axis sizes plus a device order — under which every group is exactly the devices
along a set of axes.  With the usual device order (device id = row-major mesh position) every
group is a lattice ``{base + Σ kᵢ·strideᵢ}``; each (stride, size) run cuts the id range
``[stride, stride·size)``, and the cuts of all groups, sorted, are the mesh's axis boundaries.
Other device orders are tried from the module's own tile assignments and group lists.

When the program names its mesh (``profan.sharding.program``), that mesh's device order and
axis boundaries are tried first, and each inferred axis that is exactly one of the program's
axes (or a piece of one, ``name:(pre)size`` as Shardy writes sub-axes) takes its name; the
others are called ``axis0``, ``axis1``, … by position.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from profan.errors import HloSyntaxError
from profan.hlo import views
from profan.hlo.devices import group_problems, iota_devices
from profan.hlo.model import Module
from profan.hlo.opcodes import (
    GROUPED_COLLECTIVE_KINDS,
    PAIRED_COLLECTIVE_KINDS,
    async_role,
    collective_kind,
)
from profan.hlo.views import replica_groups, source_target_pairs
from profan.sharding.program import ProgramMesh, program_mesh

_GENERIC_NAME = re.compile(r"^axis\d+$")


@dataclass(frozen=True, slots=True)
class MeshAxis:
    """One mesh axis: its name, size, and stride in the mesh's device-order positions."""

    name: str
    size: int
    stride: int


@dataclass(slots=True)
class CollectiveAxes:
    """The mesh axes one collective runs over (``axes`` None when none fit, with the reason)."""

    name: str
    computation: str | None
    opcode: str
    kind: str
    num_groups: int
    group_size: int
    axes: list[str] | None
    reason: str
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Mesh:
    """A device mesh: axes major→minor, and ``device_order[position] = device id``.

    ``names_from`` says where the axis names come from (the program's own mesh), ``None`` when
    they are the generic ``axis0``, ``axis1``, ….
    """

    axes: list[MeshAxis]
    device_order: list[int]
    collectives: list[CollectiveAxes] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    order_source: str = "iota"
    names_from: str | None = None

    @property
    def num_devices(self) -> int:
        return len(self.device_order)

    @property
    def shape(self) -> dict[str, int]:
        return {axis.name: axis.size for axis in self.axes}

    @property
    def axis_sizes(self) -> list[int]:
        return [axis.size for axis in self.axes]

    def size_of(self, axes: Iterable[str]) -> int:
        sizes = self.shape
        return math.prod(sizes[a] for a in axes)

    def coords(self, device: int) -> tuple[int, ...] | None:
        position = self._positions().get(device)
        if position is None:
            return None
        return tuple((position // axis.stride) % axis.size for axis in self.axes)

    def _positions(self) -> dict[int, int]:
        return {device: position for position, device in enumerate(self.device_order)}

    def groups_along(self, axes: Iterable[str]) -> list[list[int]]:
        """The device groups that vary exactly along ``axes`` (listed order = major first)."""
        names = [a.name for a in self.axes]
        chosen = [names.index(a) for a in axes]
        rest = [i for i in range(len(names)) if i not in chosen]
        positions = iota_devices(self.axis_sizes, rest + chosen) if self.axes else [0]
        flat = [self.device_order[p] for p in positions]
        size = math.prod(self.axes[i].size for i in chosen) if chosen else 1
        return [flat[i : i + size] for i in range(0, len(flat), size)]

    def axes_of_groups(self, groups: list[list[int]]) -> list[str] | None:
        """The axes whose groups are exactly ``groups`` (as sets), or None."""
        if not groups:
            return None
        positions = self._positions()
        if any(d not in positions for group in groups for d in group):
            return None
        ordered = [sorted(positions[d] for d in group) for group in groups]
        runs = lattice_runs(ordered)
        if runs is None:
            return None
        by_stride = {axis.stride: axis for axis in self.axes}
        axes: list[MeshAxis] = []
        for stride, size in runs:
            # A run may span several consecutive axes (stride s, size a·b).
            remaining = size
            current = stride
            while remaining > 1:
                axis = by_stride.get(current)
                if axis is None or remaining % axis.size != 0:
                    return None
                axes.append(axis)
                remaining //= axis.size
                current *= axis.size
        expected = self.groups_along([a.name for a in sorted(axes, key=lambda a: -a.stride)])
        # Groups may cover only part of the devices: accept when each one is an expected group.
        if not {frozenset(g) for g in groups} <= {frozenset(g) for g in expected}:
            return None
        return [a.name for a in sorted(axes, key=lambda a: -a.stride)]

    def axes_of_pairs(self, pairs: list[tuple[int, int]]) -> list[str] | None:
        """The axes along which the sources and targets of ``pairs`` differ."""
        differing: set[int] = set()
        for source, target in pairs:
            a, b = self.coords(source), self.coords(target)
            if a is None or b is None:
                return None
            differing.update(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
        return [self.axes[i].name for i in sorted(differing)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "axes": [asdict(a) for a in self.axes],
            "shape": self.shape,
            "num_devices": self.num_devices,
            "device_order": self.device_order,
            "order_source": self.order_source,
            "names_from": self.names_from,
            "collectives": [c.to_dict() for c in self.collectives],
            "alternatives": self.alternatives,
            "problems": self.problems,
        }


def lattice_runs(groups: list[list[int]]) -> list[tuple[int, int]] | None:
    """(stride, size) runs, minor first, such that every group is ``base + lattice``; or None.

    ``groups`` hold sorted positions.  The lattice is read from the first group (the smallest
    new offset is the next stride, its consecutive multiples the run's size) and every group
    must be a translate of it.
    """
    first = groups[0]
    base = first[0]
    offsets = sorted(p - base for p in first)
    size_total = len(offsets)
    runs: list[tuple[int, int]] = []
    covered = [0]
    offset_set = set(offsets)
    while len(covered) < size_total:
        covered_set = set(covered)
        stride = next((o for o in offsets if o not in covered_set), None)
        if stride is None:
            return None
        count = 1
        while all(c + count * stride in offset_set for c in covered):
            count += 1
        if runs and stride % (runs[-1][0] * runs[-1][1]) != 0:
            return None
        runs.append((stride, count))
        covered = [c + k * stride for k in range(count) for c in covered]
    if sorted(covered) != offsets:
        return None
    lattice = set(offsets)
    for group in groups[1:]:
        if len(group) != size_total or {p - group[0] for p in group} != lattice:
            return None
    # Merge runs that continue each other (stride s size a, then stride s·a size b).
    merged: list[tuple[int, int]] = []
    for stride, size in runs:
        if merged and merged[-1][0] * merged[-1][1] == stride:
            merged[-1] = (merged[-1][0], merged[-1][1] * size)
        else:
            merged.append((stride, size))
    return merged


@dataclass(slots=True)
class _DeviceSet:
    """One source of groups: a collective or a sharding annotation."""

    name: str
    computation: str | None
    opcode: str
    kind: str
    groups: list[list[int]] | None
    pairs: list[tuple[int, int]] | None = None
    problems: list[str] = field(default_factory=list)
    is_collective: bool = True


def num_devices_of(module: Module) -> int:
    """``num_partitions × replica_count`` of the module header (1 when they do not read)."""
    try:
        return max(module.num_partitions, 1) * max(module.replica_count, 1)
    except ValueError:
        return 1


def _pair_components(pairs: list[tuple[int, int]]) -> list[list[int]]:
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for source, target in pairs:
        parent[find(source)] = find(target)
    components: dict[int, list[int]] = {}
    for device in parent:
        components.setdefault(find(device), []).append(device)
    return sorted((sorted(c) for c in components.values()), key=lambda c: c[0])


def _collective_sets(module: Module, num_devices: int) -> list[_DeviceSet]:
    sets: list[_DeviceSet] = []
    for instruction in module.instructions():
        opcode = instruction.opcode
        kind = collective_kind(opcode)
        if kind is None or async_role(opcode) == "done":
            continue
        entry = _DeviceSet(instruction.name, instruction.computation, opcode, kind, None)
        if kind in GROUPED_COLLECTIVE_KINDS:
            try:
                groups = replica_groups(instruction, num_devices)
            except HloSyntaxError as error:
                entry.problems.append(f"replica_groups do not decode: {error.message}")
                sets.append(entry)
                continue
            entry.groups = groups or [list(range(num_devices))]
            entry.problems = group_problems(entry.groups)
            sets.append(entry)
        elif kind in PAIRED_COLLECTIVE_KINDS and "source_target_pairs" in instruction.attributes:
            try:
                pairs = source_target_pairs(instruction) or []
            except HloSyntaxError as error:
                entry.problems.append(f"source_target_pairs do not decode: {error.message}")
                sets.append(entry)
                continue
            entry.pairs = pairs
            components = _pair_components(pairs)
            if components and len({len(c) for c in components}) == 1:
                entry.groups = components
            sets.append(entry)
    return sets


def _sharding_sets(module: Module) -> list[_DeviceSet]:
    """Tile assignments of sharding annotations: each split dim's devices are a mesh group."""
    sets: list[_DeviceSet] = []
    for instruction in module.instructions():
        sharding = views.sharding(instruction)
        if sharding is None:
            continue
        for element in sharding.elements or (sharding,):
            if not element.is_tiled:
                continue
            for dim, tiles in enumerate(element.tile_dims):
                if tiles > 1:
                    sets.append(
                        _DeviceSet(
                            instruction.name,
                            instruction.computation,
                            "sharding",
                            "sharding",
                            element.device_groups_along(dim),
                            is_collective=False,
                        )
                    )
    return sets


def _cuts_for(groups: list[list[int]], positions: dict[int, int]) -> set[int] | None:
    if any(d not in positions for group in groups for d in group):
        return None
    runs = lattice_runs([sorted(positions[d] for d in group) for group in groups])
    if runs is None:
        return None
    cuts: set[int] = set()
    for stride, size in runs:
        cuts.update({stride, stride * size})
    return cuts


def _mesh_from_cuts(cuts: set[int], order: list[int], source: str) -> Mesh | None:
    total = len(order)
    ordered = sorted(c for c in cuts | {1, total} if 1 <= c <= total)
    for low, high in itertools.pairwise(ordered):
        if high % low:
            return None
    strides_minor_first = ordered[:-1]
    axes_minor_first = [
        (stride, ordered[i + 1] // stride) for i, stride in enumerate(strides_minor_first)
    ]
    axes = [
        MeshAxis(f"axis{i}", size, stride)
        for i, (stride, size) in enumerate(reversed(axes_minor_first))
    ]
    if total == 1:
        axes = []
    return Mesh(axes=axes, device_order=order, order_source=source)


@dataclass(slots=True)
class _Candidate:
    """A device order to try, and the axis boundaries it starts with."""

    order: list[int]
    source: str
    cuts: set[int] = field(default_factory=set)


def _candidate_orders(
    sets: list[_DeviceSet], num_devices: int, program: ProgramMesh | None
) -> list[_Candidate]:
    """Device orders to try: the program's own (with its axis boundaries) or iota first, then
    orders read from the module's own device lists."""
    identity = list(range(num_devices))
    candidates: list[_Candidate] = []
    if program is not None and sorted(program.spec.device_ids) == identity:
        order = list(program.spec.device_ids)
        cuts = {c for _, size, stride in program.axes for c in (stride, stride * size)}
        source = "iota" if order == identity else f"the program's mesh ({program.source})"
        candidates.append(_Candidate(order, source, cuts))
    if not candidates or candidates[0].order != identity:
        candidates.append(_Candidate(identity, "iota"))
    seen = {tuple(c.order) for c in candidates}
    for entry in sets:
        if not entry.groups or entry.problems:
            continue
        flat = [d for g in entry.groups for d in g]
        if sorted(flat) != identity:
            continue
        size = len(entry.groups[0])
        transposed = [entry.groups[g][i] for i in range(size) for g in range(len(entry.groups))]
        for order, how in ((flat, "groups of"), (transposed, "transposed groups of")):
            if tuple(order) not in seen:
                seen.add(tuple(order))
                candidates.append(_Candidate(order, f"{how} {entry.name}"))
    return candidates


def infer_mesh(module: Module, program: ProgramMesh | None = None) -> Mesh:
    """The smallest mesh under which every device group in the module is a set of axes.

    ``program`` is the mesh the program names (default: read from the module itself); its axis
    names are used where an inferred axis is one of its axes.
    """
    num_devices = num_devices_of(module)
    sets = _collective_sets(module, num_devices) + _sharding_sets(module)
    largest = max(
        [d for entry in sets for g in entry.groups or [] for d in g]
        + [d for entry in sets for p in entry.pairs or [] for d in p]
        + [num_devices - 1]
    )
    notes: list[str] = []
    if largest >= num_devices:
        notes.append(
            f"device ids reach {largest} but num_partitions×replica_count is {num_devices}; "
            f"using {largest + 1} devices"
        )
        num_devices = largest + 1
    if program is None:
        program = program_mesh(module, num_devices)
    usable = [e for e in sets if e.groups and not e.problems]
    best: tuple[int, Mesh, list[_DeviceSet]] | None = None
    for candidate in _candidate_orders(usable, num_devices, program):
        positions = {device: position for position, device in enumerate(candidate.order)}
        cuts: set[int] = set(candidate.cuts)
        fitted: list[_DeviceSet] = []
        for entry in usable:
            entry_cuts = _cuts_for(entry.groups or [], positions)
            if entry_cuts is None:
                continue
            trial = cuts | entry_cuts
            if _mesh_from_cuts(trial, candidate.order, candidate.source) is None:
                continue
            cuts = trial
            fitted.append(entry)
        mesh = _mesh_from_cuts(cuts, candidate.order, candidate.source)
        if mesh is None:  # the program's own boundaries always form a mesh; checked to be sure
            continue
        score = sum(1 for e in fitted if e.is_collective) * 2 + len(fitted)
        if best is None or score > best[0]:
            best = (score, mesh, fitted)
        if len(fitted) == len(usable):
            break
    assert best is not None
    mesh = best[1]
    if program is not None:
        _adopt_program_names(mesh, program)
    mesh.problems.extend(notes)
    if mesh.order_source != "iota":
        mesh.alternatives.append(
            f"device order is not the identity; the order that fits most groups comes from "
            f"{mesh.order_source}"
        )
    _name_collectives(mesh, [s for s in sets if s.is_collective])
    _note_alternatives(mesh)
    return mesh


# --- the program's axis names -------------------------------------------------------------------


def _program_axis_name(groups: list[list[int]], program: ProgramMesh) -> str | None:
    """The program's name for the axis whose device groups are ``groups``: one of its axes, or a
    piece ``name:(pre)size`` of one (pre = product of the more-major pieces); else None."""
    positions = {device: position for position, device in enumerate(program.spec.device_ids)}
    if any(d not in positions for group in groups for d in group):
        return None
    runs = lattice_runs([sorted(positions[d] for d in group) for group in groups])
    if runs is None or len(runs) != 1:
        return None
    stride, size = runs[0]
    for name, axis_size, axis_stride in program.axes:
        extent = axis_stride * axis_size
        if stride % axis_stride or extent % (stride * size):
            continue
        pre = extent // (stride * size)
        minor = stride // axis_stride
        piece = name if (pre, minor) == (1, 1) else f"{name}:({pre}){size}"
        # Check against the program mesh with this axis cut into (major, piece, minor).
        axes = [
            MeshAxis(other, other_size, other_stride)
            for other, other_size, other_stride in program.axes
            if other != name
        ]
        axes.append(MeshAxis(piece, size, stride))
        if pre > 1:
            axes.append(MeshAxis(f"{name}:(1){pre}", pre, stride * size))
        if minor > 1:
            axes.append(MeshAxis(f"{name}:({pre * size}){minor}", minor, axis_stride))
        reference = Mesh(sorted(axes, key=lambda a: -a.stride), list(program.spec.device_ids))
        if reference.axes_of_groups(groups) == [piece]:
            return piece
    return None


def _adopt_program_names(mesh: Mesh, program: ProgramMesh) -> None:
    names = [_program_axis_name(mesh.groups_along([axis.name]), program) for axis in mesh.axes]
    chosen = [name or axis.name for name, axis in zip(names, mesh.axes, strict=True)]
    if not any(names) or len(set(chosen)) != len(chosen):
        return
    mesh.axes = [
        MeshAxis(name, axis.size, axis.stride) for name, axis in zip(chosen, mesh.axes, strict=True)
    ]
    mesh.names_from = program.source


# --- each collective's axes -----------------------------------------------------------------------


def _name_collectives(mesh: Mesh, sets: list[_DeviceSet]) -> None:
    for entry in sets:
        groups = entry.groups or []
        record = CollectiveAxes(
            name=entry.name,
            computation=entry.computation,
            opcode=entry.opcode,
            kind=entry.kind,
            num_groups=len(groups),
            group_size=len(groups[0]) if groups else 0,
            axes=None,
            reason="",
            problems=list(entry.problems),
        )
        if entry.problems:
            record.reason = "bad groups: " + "; ".join(entry.problems)
        elif entry.pairs is not None:
            if not entry.pairs:
                record.axes, record.reason = [], "no source-target pairs"
            else:
                axes = mesh.axes_of_pairs(entry.pairs)
                if axes is None:
                    record.reason = "a device in the pairs is outside the mesh"
                else:
                    record.axes = axes
                    record.reason = "sources and targets differ only along these axes"
        elif groups and len(groups[0]) == 1:
            record.axes, record.reason = [], "every group holds one device (no communication)"
        else:
            axes = mesh.axes_of_groups(groups)
            if axes is None:
                record.reason = (
                    f"groups of {len(groups[0])} are not the devices along any set of axes of "
                    f"the mesh {mesh.shape} (device order: {mesh.order_source})"
                )
            else:
                record.axes = axes
                record.reason = f"groups are the devices along {', '.join(axes) or 'no axis'}"
        mesh.collectives.append(record)


def _note_alternatives(mesh: Mesh) -> None:
    used = {a for c in mesh.collectives if c.axes for a in c.axes}
    for axis in mesh.axes:
        named = mesh.names_from is not None and not _GENERIC_NAME.match(axis.name)
        if axis.size > 1 and not _is_prime(axis.size) and not named:
            mesh.alternatives.append(
                f"{axis.name} (size {axis.size}) could be split further; no group needs it, "
                f"so the simplest mesh keeps it whole"
            )
        if axis.name not in used and axis.size > 1 and mesh.collectives:
            mesh.alternatives.append(
                f"{axis.name} (size {axis.size}) is used by no collective (only by shardings or "
                f"as the remaining devices)"
            )


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % k for k in range(2, int(n**0.5) + 1))

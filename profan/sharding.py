"""How a program is split over devices: the device mesh, each collective's axes, global shapes.

``infer_mesh(module)`` reads every device group in the module (collectives' ``replica_groups``,
``source_target_pairs``, and the tile assignments of ``sharding=`` annotations) and finds the
smallest mesh — axis sizes plus a device order — under which every group is exactly the devices
along a set of axes.  With the usual device order (device id = row-major mesh position) every
group is a lattice ``{base + Σ kᵢ·strideᵢ}``; each (stride, size) run cuts the id range
``[stride, stride·size)``, and the cuts of all groups, sorted, are the mesh's axis boundaries.
Other device orders are tried from the module's own tile assignments and group lists.

``describe(module)`` follows the per-device shapes of every value through the program (from the
parameters' ``sharding=``, through elementwise ops, reshapes, transposes, dots and collectives)
to recover each matmul's global operand/result shapes and the mesh axes that split each dim,
then labels the strategy (data parallel, FSDP, tensor parallel, …) with the evidence for it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from profan.attribute import (
    called_computations,
    classify,
    is_backward,
    op_name_of,
    scope_of,
)
from profan.errors import HloSyntaxError
from profan.hlo.devices import (
    Sharding,
    decode_replica_groups,
    decode_sharding,
    decode_source_target_pairs,
    group_problems,
    iota_devices,
)
from profan.hlo.model import Computation, Instruction, Module, Shape

GROUPED_OPCODES = {
    "all-gather", "all-gather-start", "all-reduce", "all-reduce-start", "reduce-scatter",
    "all-to-all", "ragged-all-to-all", "collective-broadcast", "reduce-scatter-start",
    "all-to-all-start",
}  # fmt: skip
PAIRED_OPCODES = {"collective-permute", "collective-permute-start"}


# --- the mesh ------------------------------------------------------------------------------------


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
    """A device mesh: axes major→minor, and ``device_order[position] = device id``."""

    axes: list[MeshAxis]
    device_order: list[int]
    collectives: list[CollectiveAxes] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    order_source: str = "iota"

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
        try:
            ordered = [sorted(positions[d] for d in group) for group in groups]
        except KeyError:
            return None
        runs = _lattice_runs(ordered)
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
            "collectives": [c.to_dict() for c in self.collectives],
            "alternatives": self.alternatives,
            "problems": self.problems,
        }


def _lattice_runs(groups: list[list[int]]) -> list[tuple[int, int]] | None:
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


def _collective_kind(opcode: str) -> str:
    for suffix in ("-start", "-done"):
        opcode = opcode.removesuffix(suffix)
    return opcode


def _num_devices(module: Module) -> int:
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


def _device_sets(module: Module, num_devices: int) -> list[_DeviceSet]:
    sets: list[_DeviceSet] = []
    for instruction in module.instructions():
        opcode = instruction.opcode
        if opcode in GROUPED_OPCODES and "replica_groups" in instruction.attributes:
            text = instruction.attributes["replica_groups"]
            entry = _DeviceSet(
                instruction.name, instruction.computation, opcode, _collective_kind(opcode), None
            )
            try:
                groups = decode_replica_groups(text, num_devices=num_devices)
            except HloSyntaxError as error:
                entry.problems.append(f"replica_groups do not decode: {error.message}")
                sets.append(entry)
                continue
            if not groups:
                groups = [list(range(num_devices))]
            entry.groups = groups
            entry.problems = group_problems(groups)
            sets.append(entry)
        elif opcode in PAIRED_OPCODES and "source_target_pairs" in instruction.attributes:
            entry = _DeviceSet(
                instruction.name, instruction.computation, opcode, _collective_kind(opcode), None
            )
            try:
                pairs = decode_source_target_pairs(instruction.attributes["source_target_pairs"])
            except HloSyntaxError as error:
                entry.problems.append(f"source_target_pairs do not decode: {error.message}")
                sets.append(entry)
                continue
            entry.pairs = pairs
            components = _pair_components(pairs)
            if components and len({len(c) for c in components}) == 1:
                entry.groups = components
            sets.append(entry)
    # Tile assignments of sharding annotations name mesh axes too.
    for instruction in module.instructions():
        text = instruction.attributes.get("sharding")
        if not text or ("devices=" not in text and "mesh" not in text):
            continue
        try:
            sharding = decode_sharding(text)
        except HloSyntaxError:
            continue
        for element in sharding.elements or (sharding,):
            if not element.is_tiled:
                continue
            for dim, tiles in enumerate(element.tile_dims):
                if tiles > 1:
                    groups = element.device_groups_along(dim)
                    sets.append(
                        _DeviceSet(
                            instruction.name,
                            instruction.computation,
                            "sharding",
                            "sharding",
                            groups,
                            is_collective=False,
                        )
                    )
    return sets


def _cuts_for(groups: list[list[int]], positions: dict[int, int]) -> set[int] | None:
    try:
        ordered = [sorted(positions[d] for d in group) for group in groups]
    except KeyError:
        return None
    runs = _lattice_runs(ordered)
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


def _candidate_orders(sets: list[_DeviceSet], num_devices: int) -> list[tuple[list[int], str]]:
    """Device orders to try: iota first, then orders read from the module's own device lists."""
    candidates: list[tuple[list[int], str]] = [(list(range(num_devices)), "iota")]
    seen = {tuple(candidates[0][0])}
    for entry in sets:
        if not entry.groups or entry.problems:
            continue
        flat = [d for g in entry.groups for d in g]
        if sorted(flat) != list(range(num_devices)):
            continue
        size = len(entry.groups[0])
        transposed = [entry.groups[g][i] for i in range(size) for g in range(len(entry.groups))]
        for order, how in ((flat, "groups of"), (transposed, "transposed groups of")):
            if tuple(order) not in seen:
                seen.add(tuple(order))
                candidates.append((order, f"{how} {entry.name}"))
    return candidates


def infer_mesh(module: Module) -> Mesh:
    """The smallest mesh under which every device group in the module is a set of axes."""
    num_devices = _num_devices(module)
    sets = _device_sets(module, num_devices)
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
    usable = [e for e in sets if e.groups and not e.problems]
    best: tuple[int, Mesh, list[_DeviceSet]] | None = None
    for order, source in _candidate_orders(usable, num_devices):
        positions = {device: position for position, device in enumerate(order)}
        cuts: set[int] = set()
        fitted: list[_DeviceSet] = []
        for entry in usable:
            entry_cuts = _cuts_for(entry.groups or [], positions)
            if entry_cuts is None:
                continue
            trial = cuts | entry_cuts
            if _mesh_from_cuts(trial, order, source) is None:
                continue
            cuts = trial
            fitted.append(entry)
        mesh = _mesh_from_cuts(cuts, order, source)
        if mesh is None:  # pragma: no cover - cuts were checked one by one
            continue
        score = sum(1 for e in fitted if e.is_collective) * 2 + len(fitted)
        if best is None or score > best[0]:
            best = (score, mesh, fitted)
        if len(fitted) == len(usable):
            break
    assert best is not None
    mesh = best[1]
    mesh.problems.extend(notes)
    if mesh.order_source != "iota":
        mesh.alternatives.append(
            f"device order is not the identity; the order that fits most groups comes from "
            f"{mesh.order_source}"
        )
    _name_collectives(mesh, sets)
    _note_alternatives(mesh)
    return mesh


def _name_collectives(mesh: Mesh, sets: list[_DeviceSet]) -> None:
    for entry in sets:
        if not entry.is_collective:
            continue
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
        if axis.size > 1 and not _is_prime(axis.size):
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


# --- following shardings through the program ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class DimSplit:
    """How one dimension of a value is split: ``factor`` ways, along ``axes`` (names)."""

    factor: int = 1
    axes: tuple[str, ...] = ()
    known: bool = False  # True when a sharding annotation (or a collective) says so


_UNSPLIT_KNOWN = DimSplit(1, (), True)
_UNKNOWN = DimSplit(1, (), False)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A value that is piece ``index`` of ``count`` equal, contiguous pieces along ``dim``.

    Made by a slice that cuts a dim into equal parts, and by a tuple all-to-all (result ``j``
    holds the piece that group member ``j`` sent). ``whole`` is the split of that dim in the
    value the pieces make when concatenated back in order; the piece's own entry for ``dim``
    stays unknown, so code that does not read ``chunk`` never takes a piece for the whole.
    """

    dim: int
    index: int
    count: int
    whole: DimSplit


@dataclass(frozen=True, slots=True)
class ValueSplit:
    """The split of an array value (``dims`` parallel to its local dims), or a tuple of them.

    ``hidden`` holds split dims of local size 1 that a reshape removed (global size, axes);
    ``partial`` the axes over which the value is still an unsummed partial result;
    ``chunk`` says when the value is one of several equal pieces of a larger one.
    """

    dims: tuple[DimSplit, ...] = ()
    hidden: tuple[tuple[int, tuple[str, ...]], ...] = ()
    partial: tuple[str, ...] = ()
    elements: tuple[ValueSplit, ...] | None = None
    origin: str | None = None  # the entry parameter it comes from, when it is one unchanged
    chunk: Chunk | None = None

    @property
    def known(self) -> bool:
        return any(d.known for d in self.dims) or bool(self.hidden)


def _unknown(shape: Shape) -> ValueSplit:
    if shape.is_tuple:
        return ValueSplit(elements=tuple(_unknown(s) for s in shape.tuple_shapes))
    return ValueSplit(dims=tuple(_UNKNOWN for _ in shape.dims))


_INT = re.compile(r"-?\d+")


def _int_list(text: str | None) -> list[int]:
    """``{1,0}`` → ``[1, 0]``; anything after the braces (a ``// comment``) is ignored."""
    if not text:
        return []
    text = text.strip()
    if text.startswith("{"):
        text = text[1 : text.find("}")] if "}" in text else text[1:]
    return [int(t) for t in _INT.findall(text)]


def _int_attr(instruction: Instruction, name: str, default: int = 0) -> int:
    match = _INT.match((instruction.attributes.get(name) or "").strip())
    return int(match.group(0)) if match else default


@dataclass(slots=True)
class MatmulSharding:
    """One matmul: local and global shapes, which dims are split along which axes, evidence."""

    name: str  # the instruction in its computation (a fusion holding the dot, or the dot)
    dot: str  # the dot/convolution instruction itself
    computation: str | None
    opcode: str
    dtype: str
    local_lhs: list[int]
    local_rhs: list[int]
    local_out: list[int]
    global_lhs: list[int]
    global_rhs: list[int]
    global_out: list[int]
    lhs_split: dict[int, list[str]]
    rhs_split: dict[int, list[str]]
    out_split: dict[int, list[str]]
    contracting: tuple[list[int], list[int]]
    partial_sum_axes: list[str]
    evidence: list[str] = field(default_factory=list)
    batch: tuple[list[int], list[int]] = ([], [])
    op_name: str | None = None
    scope: str | None = None  # JAX named-scope path (profan.attribute.scope_of)
    backward: bool = False
    annotated: bool = False  # operand splits came from sharding= annotations
    feeds: list[dict[str, Any]] = field(default_factory=list)  # collectives fed by the result
    fed_by: list[dict[str, Any]] = field(default_factory=list)  # collectives feeding operands

    @property
    def local_flops(self) -> int:
        """2 · output elements · contracted elements, on one device."""
        return _dot_flops(self.local_lhs, self.local_lhs, self.local_out, self.contracting[0])

    @property
    def global_flops(self) -> int:
        """The same for the whole (unsplit) matmul."""
        return _dot_flops(self.local_lhs, self.global_lhs, self.global_out, self.contracting[0])

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["contracting"] = [list(self.contracting[0]), list(self.contracting[1])]
        out["batch"] = [list(self.batch[0]), list(self.batch[1])]
        out["local_flops"] = self.local_flops
        out["global_flops"] = self.global_flops
        return out


def _dot_flops(local_lhs: list[int], lhs: list[int], out: list[int], contracting: list[int]) -> int:
    # ``contracting`` indexes the local lhs; a global lhs may lead with hidden dims.
    offset = len(lhs) - len(local_lhs)
    contracted = math.prod(lhs[offset + c] for c in contracting if offset + c < len(lhs))
    return 2 * math.prod(out) * contracted


@dataclass(slots=True)
class StrategyLabel:
    """A parallelism strategy the evidence supports, along which axes, and why."""

    strategy: str
    axes: list[str]
    evidence: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ShardingReport:
    """``describe(module)``: mesh, per-collective axes, per-matmul shapes, strategy labels."""

    module: str
    mesh: Mesh
    collectives: list[CollectiveAxes]
    matmuls: list[MatmulSharding]
    strategies: list[StrategyLabel]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "mesh": self.mesh.to_dict(),
            "collectives": [c.to_dict() for c in self.collectives],
            "matmuls": [m.to_dict() for m in self.matmuls],
            "strategies": [s.to_dict() for s in self.strategies],
            "notes": self.notes,
        }


class _Propagator:
    """Walks computations, giving every value a ValueSplit and recording every matmul."""

    def __init__(self, module: Module, mesh: Mesh) -> None:
        self.module = module
        self.mesh = mesh
        self.axes_by_collective = {c.name: c.axes for c in mesh.collectives}
        self.matmuls: list[MatmulSharding] = []
        self.param_shapes: dict[str, tuple[tuple[int, ...], ValueSplit]] = {}
        self.notes: list[str] = []
        self.depth = 0
        self.followed: set[str] = set()

    # Axis names for the devices that jointly span one tile dimension of a sharding.
    def _axes_for_tile_dim(self, sharding: Sharding, dim: int) -> tuple[str, ...]:
        groups = sharding.device_groups_along(dim)
        axes = self.mesh.axes_of_groups(groups)
        if axes is None:
            return (f"?{sharding.tile_dims[dim]}",)
        return tuple(axes)

    def split_from_sharding(self, text: str, shape: Shape) -> ValueSplit:
        try:
            sharding = decode_sharding(text)
        except HloSyntaxError:
            return _unknown(shape)
        return self._split_for(sharding, shape)

    def _split_for(self, sharding: Sharding, shape: Shape) -> ValueSplit:
        if shape.is_tuple:
            if sharding.kind == "tuple" and len(sharding.elements) == len(shape.tuple_shapes):
                return ValueSplit(
                    elements=tuple(
                        self._split_for(s, e)
                        for s, e in zip(sharding.elements, shape.tuple_shapes, strict=True)
                    )
                )
            return ValueSplit(
                elements=tuple(self._split_for(sharding, e) for e in shape.tuple_shapes)
            )
        if sharding.kind in ("replicated", "maximal"):
            return ValueSplit(dims=tuple(_UNSPLIT_KNOWN for _ in shape.dims))
        if not sharding.is_tiled or len(sharding.data_tile_dims) != len(shape.dims):
            return _unknown(shape)
        dims = []
        for index, tiles in enumerate(sharding.data_tile_dims):
            if tiles == 1:
                dims.append(_UNSPLIT_KNOWN)
            else:
                dims.append(DimSplit(tiles, self._axes_for_tile_dim(sharding, index), True))
        return ValueSplit(dims=tuple(dims))

    # --- evaluation -------------------------------------------------------------------------

    def run_computation(
        self, computation: Computation, params: list[ValueSplit] | None, caller: str | None
    ) -> ValueSplit:
        env: dict[str, ValueSplit] = {}
        self.depth += 1
        try:
            for instruction in computation.instructions:
                try:
                    env[instruction.name] = self.evaluate(instruction, env, params, caller)
                except (ValueError, IndexError, KeyError, ZeroDivisionError) as error:
                    # Malformed attributes in one instruction must not lose the whole report.
                    self.notes.append(f"{instruction.name}: not followed ({error!r})")
                    env[instruction.name] = _unknown(instruction.shape)
        finally:
            self.depth -= 1
        return env.get(computation.root.name, _unknown(computation.root.shape))

    def _operand(
        self, instruction: Instruction, index: int, env: dict[str, ValueSplit]
    ) -> ValueSplit:
        if index >= len(instruction.operands):
            return ValueSplit()
        return env.get(instruction.operands[index].name.lstrip("%"), ValueSplit())

    def _operand_shape(self, instruction: Instruction, index: int) -> Shape | None:
        operand = instruction.operands[index]
        if operand.shape is not None:
            return operand.shape
        try:
            owner = self.module.computation(instruction.computation or "")
        except KeyError:
            return None
        source = owner.get(operand.name)
        return source.shape if source is not None else None

    def evaluate(
        self,
        instruction: Instruction,
        env: dict[str, ValueSplit],
        params: list[ValueSplit] | None,
        caller: str | None,
    ) -> ValueSplit:
        opcode = instruction.opcode
        shape = instruction.shape
        rank = len(shape.dims)
        operands = [self._operand(instruction, i, env) for i in range(len(instruction.operands))]
        first = operands[0] if operands else ValueSplit()

        if opcode == "parameter":
            number = instruction.parameter_number or 0
            if params is not None and number < len(params):
                return params[number]
            text = instruction.attributes.get("sharding")
            if text:
                split = self.split_from_sharding(text, shape)
                if split.elements is None:
                    split = ValueSplit(dims=split.dims, origin=instruction.name)
                    self.param_shapes[instruction.name] = (shape.dims, split)
                return split
            return _unknown(shape)
        if opcode == "get-tuple-element":
            index = _int_attr(instruction, "index")
            if first.elements is not None and index < len(first.elements):
                return first.elements[index]
            return _unknown(shape)
        if opcode == "tuple":
            return ValueSplit(elements=tuple(operands))
        if opcode in ("dot", "convolution"):
            return self._dot(instruction, operands, caller)
        if opcode == "fusion" or opcode == "call" or opcode == "async-start":
            return self._call(instruction, operands, caller)
        if opcode == "while":
            # The body sees the loop-carried tuple: follow it once (a scan over layers keeps
            # each layer's shardings in that tuple), and assume the loop keeps the layout.
            body = instruction.attributes.get("body")
            if body and self.depth <= 16:
                self._run_named(body.strip().lstrip("%"), [first])
            return first
        if opcode == "conditional":
            branches = called_computations(instruction)
            for index, name in enumerate(branches):
                if index + 1 < len(operands) and self.depth <= 16:
                    self._run_named(name, [operands[index + 1]])
            return _unknown(shape)
        if opcode.endswith("-done"):
            if first.elements is not None and first.elements:
                return first.elements[-1] if opcode != "copy-done" else first.elements[0]
            return first if first.dims and len(first.dims) == rank else _unknown(shape)
        if opcode == "copy-start":
            return ValueSplit(elements=(first, first, ValueSplit()))
        kind = _collective_kind(opcode)
        if kind in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all"):
            result = self._collective(instruction, kind, operands)
            if opcode.endswith("-start") and shape.is_tuple and kind != "all-reduce":
                return ValueSplit(elements=(first, result))
            return result
        if kind in ("collective-permute", "collective-broadcast"):
            return first
        if opcode == "broadcast":
            mapping = _int_list(instruction.attributes.get("dimensions"))
            dims = [_UNSPLIT_KNOWN if first.known else _UNKNOWN for _ in range(rank)]
            for source, target in enumerate(mapping):
                if source < len(first.dims) and target < rank:
                    dims[target] = first.dims[source]
            return ValueSplit(dims=tuple(dims), hidden=first.hidden, partial=first.partial)
        if opcode == "transpose":
            perm = _int_list(instruction.attributes.get("dimensions"))
            if len(perm) == rank and len(first.dims) == rank:
                return ValueSplit(
                    dims=tuple(first.dims[p] for p in perm),
                    hidden=first.hidden,
                    partial=first.partial,
                    origin=first.origin,
                )
            return _unknown(shape)
        if opcode in ("reshape", "bitcast"):
            source_shape = self._operand_shape(instruction, 0) if instruction.operands else None
            if source_shape is None:
                return _unknown(shape)
            return _reshape(first, source_shape.dims, shape.dims)
        if opcode == "reduce":
            reduced = set(_int_list(instruction.attributes.get("dimensions")))
            if shape.is_tuple or not first.dims:
                return _unknown(shape)
            kept = tuple(d for i, d in enumerate(first.dims) if i not in reduced)
            partial = list(first.partial)
            for i in reduced:
                if i < len(first.dims):
                    partial.extend(a for a in first.dims[i].axes if a not in partial)
            if len(kept) != rank:
                return _unknown(shape)
            return ValueSplit(dims=kept, hidden=first.hidden, partial=tuple(partial))
        # Same-shape ops (elementwise, copy, convert, select, dynamic-update-slice, …): the
        # operand of the same local shape with the most known splits decides.
        candidates = [
            op
            for i, op in enumerate(operands)
            if op.elements is None
            and len(op.dims) == rank
            and (self._operand_shape(instruction, i) or shape).dims == shape.dims
        ]
        if candidates and not shape.is_tuple:
            chosen = max(candidates, key=lambda op: (sum(d.factor > 1 for d in op.dims), op.known))
            unary = opcode in ("copy", "convert")
            return ValueSplit(
                dims=chosen.dims,
                hidden=chosen.hidden,
                partial=chosen.partial,
                origin=chosen.origin if unary else None,
                chunk=chosen.chunk if unary else None,
            )
        if opcode == "concatenate":
            joined = self._join_chunks(instruction, operands)
            if joined is not None:
                return joined
        if (
            opcode in ("slice", "dynamic-slice", "pad", "concatenate", "reverse")
            and len(first.dims) == rank
        ):
            source = self._operand_shape(instruction, 0)
            dims = tuple(
                d if source is not None and source.dims[i] == shape.dims[i] else _UNKNOWN
                for i, d in enumerate(first.dims)
            )
            chunk = None
            if opcode == "slice" and source is not None:
                chunk = _slice_chunk(instruction, first, source.dims, shape.dims)
            return ValueSplit(dims=dims, hidden=first.hidden, chunk=chunk)
        return _unknown(shape)

    def _join_chunks(
        self, instruction: Instruction, operands: list[ValueSplit]
    ) -> ValueSplit | None:
        """A concatenate of all the pieces of one value, in order, gives back the whole.

        Along the pieces' own dim, that dim is whole again. Along another dim, the joined dim
        holds the piece index (the major part of the pieces' dim) times that dim's local part,
        so the split that dim had no longer fits on it: for a dim of local size 1 it moves onto
        the dim just minor to it (merging two adjacent dims of the global array), otherwise into
        ``hidden`` (a global dim with no local extent), which keeps every size and FLOP count.
        """
        along = _int_list(instruction.attributes.get("dimensions"))
        piece_shape = self._operand_shape(instruction, 0) if instruction.operands else None
        rank = len(instruction.shape.dims)
        if len(operands) < 2 or len(along) != 1 or piece_shape is None:
            return None
        chunks = [op.chunk for op in operands]
        first = chunks[0]
        if first is None or any(
            c is None
            or op.elements is not None
            or len(op.dims) != rank
            or op.hidden != operands[0].hidden
            or (c.dim, c.index, c.count, c.whole) != (first.dim, i, len(operands), first.whole)
            for i, (c, op) in enumerate(zip(chunks, operands, strict=True))
        ):
            return None
        c = along[0]
        if c >= rank or len(piece_shape.dims) != rank:
            return None
        dims = [
            operands[0].dims[i]
            if all(op.dims[i] == operands[0].dims[i] for op in operands)
            else _UNKNOWN
            for i in range(rank)
        ]
        hidden = operands[0].hidden
        if c != first.dim:
            if not dims[c].known:
                return None
            dropped = dims[c]
            dims[c] = _UNSPLIT_KNOWN
            if dropped.factor > 1:
                minor = c + 1
                if (
                    piece_shape.dims[c] == 1
                    and minor < rank
                    and minor != first.dim
                    and dims[minor].known
                ):
                    dims[minor] = DimSplit(
                        dropped.factor * dims[minor].factor, dropped.axes + dims[minor].axes, True
                    )
                else:
                    hidden = (*hidden, (dropped.factor, dropped.axes))
        dims[first.dim] = first.whole
        return ValueSplit(dims=tuple(dims), hidden=hidden, partial=operands[0].partial)

    def _run_named(self, name: str, params: list[ValueSplit]) -> None:
        try:
            computation = self.module.computation(name)
        except KeyError:
            return
        if name in self.followed:
            return  # a computation called from several places is followed once
        self.followed.add(name)
        self.run_computation(computation, params, None)

    def _call(
        self, instruction: Instruction, operands: list[ValueSplit], caller: str | None
    ) -> ValueSplit:
        names = called_computations(instruction)
        if not names or self.depth > 16:
            return _unknown(instruction.shape)
        try:
            computation = self.module.computation(names[0])
        except KeyError:
            return _unknown(instruction.shape)
        site = caller if caller is not None else instruction.name
        result = self.run_computation(computation, operands, site)
        if instruction.opcode == "async-start":
            return ValueSplit(elements=(ValueSplit(elements=tuple(operands)), result))
        return result

    def _collective(
        self, instruction: Instruction, kind: str, operands: list[ValueSplit]
    ) -> ValueSplit:
        axes = tuple(self.axes_by_collective.get(instruction.name) or ())
        size = self.mesh.size_of(axes) if axes else 0
        shape = instruction.shape
        if kind == "all-to-all" and len(operands) > 1 and size == len(operands):
            exchanged = _tuple_all_to_all(operands, axes, size)
            if exchanged is not None:
                return exchanged
        if len(operands) > 1 or shape.is_tuple:
            # Variadic collective: each operand independently.
            elements = tuple(
                self._collective_one(instruction, kind, op, axes, size) for op in operands
            )
            return ValueSplit(elements=elements)
        first = operands[0] if operands else _unknown(shape)
        return self._collective_one(instruction, kind, first, axes, size)

    def _collective_one(
        self,
        instruction: Instruction,
        kind: str,
        value: ValueSplit,
        axes: tuple[str, ...],
        size: int,
    ) -> ValueSplit:
        if value.elements is not None:
            return value
        partial = tuple(a for a in value.partial if a not in axes)
        dims = list(value.dims)
        gathered = _int_list(instruction.attributes.get("dimensions"))
        if kind == "all-gather" and gathered and gathered[0] < len(dims):
            d = dims[gathered[0]]
            remaining = tuple(a for a in d.axes if a not in axes)
            factor = max(d.factor // size, 1) if size else 1
            dims[gathered[0]] = DimSplit(factor, remaining, True)
        elif kind == "reduce-scatter" and gathered and gathered[0] < len(dims):
            d = dims[gathered[0]]
            dims[gathered[0]] = DimSplit(d.factor * max(size, 1), d.axes + axes, True)
        elif (
            kind == "all-to-all"
            and (moved := _array_all_to_all(value, gathered, axes, size)) is not None
        ):
            return moved
        elif kind == "all-to-all":
            # Pieces from every device of the group are exchanged: without a dim that the
            # group's axes split (or with unknown splits) nothing says which part of the
            # global array a dim now holds, so those dims become unknown rather than wrong.
            touched = set(gathered)
            dims = [
                _UNKNOWN if (set(d.axes) & set(axes) or i in touched) else d
                for i, d in enumerate(dims)
            ]
        return ValueSplit(dims=tuple(dims), hidden=value.hidden, partial=partial)

    def _dot(
        self, instruction: Instruction, operands: list[ValueSplit], caller: str | None
    ) -> ValueSplit:
        shape = instruction.shape
        if len(operands) < 2:
            return _unknown(shape)
        lhs, rhs = operands[0], operands[1]
        lhs_shape = self._operand_shape(instruction, 0)
        rhs_shape = self._operand_shape(instruction, 1)
        if lhs_shape is None or rhs_shape is None:
            return _unknown(shape)
        if instruction.opcode == "convolution":
            return self._convolution(instruction, lhs, rhs, lhs_shape, rhs_shape, caller)
        attrs = instruction.attributes
        lb = _int_list(attrs.get("lhs_batch_dims"))
        rb = _int_list(attrs.get("rhs_batch_dims"))
        lc = _int_list(attrs.get("lhs_contracting_dims"))
        rc = _int_list(attrs.get("rhs_contracting_dims"))
        lhs_dims = _dims_or_unknown(lhs, len(lhs_shape.dims))
        rhs_dims = _dims_or_unknown(rhs, len(rhs_shape.dims))
        if (
            any(d >= len(lhs_dims) for d in lb + lc)
            or any(d >= len(rhs_dims) for d in rb + rc)
            or len(lb) != len(rb)
            or len(lc) != len(rc)
        ):
            self.notes.append(f"{instruction.name}: dot dimension numbers do not fit its operands")
            return _unknown(shape)
        lf = [i for i in range(len(lhs_dims)) if i not in lb and i not in lc]
        rf = [i for i in range(len(rhs_dims)) if i not in rb and i not in rc]
        out_dims = (
            [_merge(lhs_dims[a], rhs_dims[b]) for a, b in zip(lb, rb, strict=False)]
            + [lhs_dims[i] for i in lf]
            + [rhs_dims[i] for i in rf]
        )
        partial: list[str] = []
        for a, b in zip(lc, rc, strict=False):
            merged = _merge(lhs_dims[a], rhs_dims[b])
            partial.extend(x for x in merged.axes if x not in partial)
        hidden = lhs.hidden + rhs.hidden
        evidence: list[str] = []
        for side, value in (("lhs", lhs), ("rhs", rhs)):
            if value.origin:
                evidence.append(f"{side} comes from parameter {value.origin} (its sharding=)")
            elif value.known:
                evidence.append(f"{side} split followed from parameter shardings")
        result = ValueSplit(
            dims=tuple(out_dims), hidden=hidden, partial=tuple(partial) + lhs.partial + rhs.partial
        )
        record = MatmulSharding(
            name=caller or instruction.name,
            dot=instruction.name,
            computation=instruction.computation,
            opcode="dot",
            dtype=shape.dtype,
            local_lhs=list(lhs_shape.dims),
            local_rhs=list(rhs_shape.dims),
            local_out=list(shape.dims),
            global_lhs=[s for s, _ in lhs.hidden] + _global(lhs_shape.dims, lhs_dims),
            global_rhs=[s for s, _ in rhs.hidden] + _global(rhs_shape.dims, rhs_dims),
            global_out=[s for s, _ in hidden] + _global(shape.dims, out_dims),
            lhs_split=_split_map(lhs_dims, len(lhs.hidden), lhs.hidden),
            rhs_split=_split_map(rhs_dims, len(rhs.hidden), rhs.hidden),
            out_split=_split_map(out_dims, len(hidden), hidden),
            contracting=(lc, rc),
            partial_sum_axes=list(partial),
            evidence=evidence,
            batch=(lb, rb),
            op_name=op_name_of(instruction),
            scope=scope_of(instruction),
            backward=is_backward(instruction),
            annotated=lhs.known or rhs.known,
        )
        self.matmuls.append(record)
        return result

    def _convolution(
        self,
        instruction: Instruction,
        lhs: ValueSplit,
        rhs: ValueSplit,
        lhs_shape: Shape,
        rhs_shape: Shape,
        caller: str | None,
    ) -> ValueSplit:
        # Convolutions keep their local shapes: only the batch split (dim_labels 'b') is
        # followed; the report says so.
        labels = instruction.attributes.get("dim_labels", "")
        lhs_dims = _dims_or_unknown(lhs, len(lhs_shape.dims))
        out_dims = [_UNKNOWN for _ in instruction.shape.dims]
        try:
            in_labels, _, out_labels = labels.replace("->", "_").split("_")
            if "b" in in_labels and "b" in out_labels:
                out_dims[out_labels.index("b")] = lhs_dims[in_labels.index("b")]
        except (ValueError, IndexError):
            pass
        rhs_dims = _dims_or_unknown(rhs, len(rhs_shape.dims))
        record = MatmulSharding(
            name=caller or instruction.name,
            dot=instruction.name,
            computation=instruction.computation,
            opcode="convolution",
            dtype=instruction.shape.dtype,
            local_lhs=list(lhs_shape.dims),
            local_rhs=list(rhs_shape.dims),
            local_out=list(instruction.shape.dims),
            global_lhs=_global(lhs_shape.dims, lhs_dims),
            global_rhs=_global(rhs_shape.dims, rhs_dims),
            global_out=_global(instruction.shape.dims, out_dims),
            lhs_split=_split_map(lhs_dims, 0, ()),
            rhs_split=_split_map(rhs_dims, 0, ()),
            out_split=_split_map(out_dims, 0, ()),
            contracting=([], []),
            partial_sum_axes=[],
            evidence=["convolution: only the batch dimension's split is followed"],
        )
        self.matmuls.append(record)
        return ValueSplit(dims=tuple(out_dims))


_SLICE_RANGE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def _slice_chunk(
    instruction: Instruction, value: ValueSplit, source: tuple[int, ...], target: tuple[int, ...]
) -> Chunk | None:
    """A slice that cuts one dim into equal contiguous parts names the part it keeps."""
    if len(source) != len(target) or len(value.dims) != len(source):
        return None
    cut = [i for i, (a, b) in enumerate(zip(source, target, strict=True)) if a != b]
    ranges = _SLICE_RANGE.findall(instruction.attributes.get("slice", ""))
    if len(cut) != 1 or len(ranges) != len(source):
        return None
    dim = cut[0]
    start, end, stride = (int(t) if t else 1 for t in ranges[dim])
    length = end - start
    if stride != 1 or length <= 0 or source[dim] % length or start % length:
        return None
    return Chunk(dim, start // length, source[dim] // length, value.dims[dim])


def _group_dim(
    dims: list[DimSplit] | tuple[DimSplit, ...], axes: tuple[str, ...], size: int
) -> int | None:
    """The one dim split along all of a collective's axes (``None`` when none or several)."""
    found = [
        i
        for i, d in enumerate(dims)
        if d.known and set(axes) <= set(d.axes) and d.factor % size == 0
    ]
    return found[0] if len(found) == 1 else None


def _without(split: DimSplit, axes: tuple[str, ...], size: int) -> DimSplit:
    """A dim's split once the devices along ``axes`` no longer divide it."""
    return DimSplit(split.factor // size, tuple(a for a in split.axes if a not in axes), True)


def _array_all_to_all(
    value: ValueSplit, dimensions: list[int], axes: tuple[str, ...], size: int
) -> ValueSplit | None:
    """Array all-to-all (``dimensions={k}``): dim k is cut into one block per group member,
    block i goes to member i, and the blocks received are concatenated along k in member order.

    So the split along the group's axes leaves the dim it was on (each device now holds the
    blocks of every member, stacked in dim k, so that dim is whole again) and lands on dim k:
    each device keeps only its own block of every member's dim k. Dim k then holds the members'
    index times that block, so the split of dim k's own data goes to ``hidden`` (a global dim
    with no local extent), exactly as when a concatenate puts pieces back together; every size
    and FLOP count is kept. ``None`` when the evidence (a known dim k, one dim the group's axes
    split) is missing.
    """
    if not axes or size <= 1 or len(dimensions) != 1 or value.elements is not None:
        return None
    if set(value.partial) & set(axes):
        return None  # unsummed partials are exchanged, not summed: nothing to say
    k = dimensions[0]
    if k >= len(value.dims) or not value.dims[k].known:
        return None
    dims = list(value.dims)
    source = _group_dim(dims, axes, size)
    if source is None:
        return None
    partial = tuple(a for a in value.partial if a not in axes)
    if source == k:
        # Blocks of a dim already split along the group are swapped: it stays split as much.
        return ValueSplit(dims=tuple(dims), hidden=value.hidden, partial=partial)
    moved = (dims[k].factor * size, dims[k].axes + axes)
    dims[source] = _without(dims[source], axes, size)
    dims[k] = _UNSPLIT_KNOWN
    return ValueSplit(dims=tuple(dims), hidden=(*value.hidden, moved), partial=partial)


def _tuple_all_to_all(
    operands: list[ValueSplit], axes: tuple[str, ...], size: int
) -> ValueSplit | None:
    """Tuple all-to-all: operand i goes to group member i; result j is what member j sent.

    When the operands are the equal pieces of one value along dim k (in order, one per
    member), result j on a device is that device's piece k of member j's value: dim k becomes
    split along the group's axes, and the dim that was split along them is now spread over the
    results (result j is piece j of it), which a later concatenate puts back together.
    ``None`` when the operands are not such pieces.
    """
    chunks = [op.chunk for op in operands]
    if any(c is None for c in chunks) or any(op.elements is not None for op in operands):
        return None
    first = chunks[0]
    assert first is not None
    rank = len(operands[0].dims)
    if not (
        first.whole.known
        and first.dim < rank
        and all(
            c is not None
            and c.dim == first.dim
            and c.count == size
            and c.index == i
            and c.whole == first.whole
            for i, c in enumerate(chunks)
        )
        and all(len(op.dims) == rank and op.hidden == operands[0].hidden for op in operands)
        and not any(set(op.partial) & set(axes) for op in operands)
    ):
        return None
    dims = [
        operands[0].dims[i]
        if all(op.dims[i] == operands[0].dims[i] for op in operands)
        else _UNKNOWN
        for i in range(rank)
    ]
    others = [d if i != first.dim else _UNSPLIT_KNOWN for i, d in enumerate(dims)]
    source = _group_dim(others, axes, size)
    dims[first.dim] = DimSplit(first.whole.factor * size, first.whole.axes + axes, True)
    partial = tuple(a for a in operands[0].partial if a not in axes)
    if source is None:
        if not all(d.known for d in others) or any(set(axes) & set(d.axes) for d in others):
            return None  # the members' pieces may differ in ways nothing here records
        piece = ValueSplit(dims=tuple(dims), hidden=operands[0].hidden, partial=partial)
        return ValueSplit(elements=tuple(piece for _ in operands))
    whole = _without(dims[source], axes, size)
    dims[source] = _UNKNOWN
    return ValueSplit(
        elements=tuple(
            ValueSplit(
                dims=tuple(dims),
                hidden=operands[0].hidden,
                partial=partial,
                chunk=Chunk(source, j, size, whole),
            )
            for j in range(size)
        )
    )


def _dims_or_unknown(value: ValueSplit, rank: int) -> list[DimSplit]:
    if value.elements is None and len(value.dims) == rank:
        return list(value.dims)
    return [_UNKNOWN] * rank


def _merge(a: DimSplit, b: DimSplit) -> DimSplit:
    """Two views of the same (batch or contracted) dimension: the better-known one wins."""
    if a.factor >= b.factor and (a.known or not b.known):
        return a
    return b if b.factor > a.factor or b.known else a


def _global(local: tuple[int, ...], dims: list[DimSplit]) -> list[int]:
    return [
        size * (d.factor if i < len(dims) else 1)
        for i, (size, d) in enumerate(zip(local, dims, strict=False))
    ]


def _split_map(
    dims: list[DimSplit], offset: int, hidden: tuple[tuple[int, tuple[str, ...]], ...]
) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for i, (_, axes) in enumerate(hidden):
        out[i] = list(axes)
    for i, d in enumerate(dims):
        if d.factor > 1:
            out[offset + i] = list(d.axes)
    return out


def _reshape(value: ValueSplit, source: tuple[int, ...], target: tuple[int, ...]) -> ValueSplit:
    """Carry splits through a reshape: a split stays on the major dim of its merged group."""
    if value.elements is not None or len(value.dims) != len(source):
        return ValueSplit(dims=tuple(_UNKNOWN for _ in target))
    if tuple(source) == tuple(target):
        return value
    hidden = list(value.hidden)
    dims: list[DimSplit] = [_UNSPLIT_KNOWN if value.known else _UNKNOWN for _ in target]
    # Walk both shapes, grouping dims whose products match.
    i = j = 0
    while i < len(source) or j < len(target):
        if i < len(source) and source[i] == 1 and (j >= len(target) or target[j] != 1):
            d = value.dims[i]
            if d.factor > 1:
                hidden.append((d.factor, d.axes))  # a split size-1 dim that disappears
            i += 1
            continue
        if j < len(target) and target[j] == 1 and (i >= len(source) or source[i] != 1):
            j += 1
            continue
        if i >= len(source) or j >= len(target):
            break
        group_i, group_j = [i], [j]
        product_i, product_j = source[i], target[j]
        while product_i != product_j:
            if product_i < product_j and group_i[-1] + 1 < len(source):
                group_i.append(group_i[-1] + 1)
                product_i *= source[group_i[-1]]
            elif product_j < product_i and group_j[-1] + 1 < len(target):
                group_j.append(group_j[-1] + 1)
                product_j *= target[group_j[-1]]
            else:
                return ValueSplit(dims=tuple(_UNKNOWN for _ in target))
        splits = [value.dims[k] for k in group_i if value.dims[k].factor > 1]
        if splits:
            # Only the most-major split dim of the group survives cleanly.
            dims[group_j[0]] = (
                splits[0]
                if len(splits) == 1
                else DimSplit(
                    math.prod(s.factor for s in splits),
                    tuple(a for s in splits for a in s.axes),
                    True,
                )
            )
        else:
            for k in group_j:
                dims[k] = value.dims[group_i[0]] if value.dims[group_i[0]].known else _UNKNOWN
                dims[k] = DimSplit(1, (), dims[k].known)
        i, j = group_i[-1] + 1, group_j[-1] + 1
    return ValueSplit(dims=tuple(dims), hidden=tuple(hidden), partial=value.partial)


# --- describe -----------------------------------------------------------------------------------


def describe(module: Module) -> ShardingReport:
    """Mesh, per-collective axes, per-matmul local/global shapes and the strategy labels."""
    mesh = infer_mesh(module)
    propagator = _Propagator(module, mesh)
    propagator.run_computation(module.entry, None, None)
    # Ops in computations the entry does not reach through fusions (while bodies, branches) are
    # followed on their own with unknown parameters.
    reached = {m.computation for m in propagator.matmuls}
    control_bodies = {
        name
        for instruction in module.instructions()
        if instruction.opcode in ("while", "conditional", "call")
        for name in called_computations(instruction)
    }
    for computation in module.computations:
        if computation.is_entry or computation.name in reached:
            continue
        if computation.name in propagator.followed:
            continue
        if computation.name in control_bodies:
            propagator.run_computation(computation, None, None)
    _add_collective_evidence(module, mesh, propagator)
    strategies = _strategies(module, mesh, propagator)
    return ShardingReport(
        module=module.name,
        mesh=mesh,
        collectives=mesh.collectives,
        matmuls=propagator.matmuls,
        strategies=strategies,
        notes=propagator.notes,
    )


_PASS_THROUGH = {
    "convert", "bitcast", "copy", "reshape", "transpose", "get-tuple-element", "tuple",
    "add", "multiply", "subtract", "select", "maximum", "negate", "fusion",
}  # fmt: skip


class _Graph:
    """Who uses what, per computation, built once (modules reach 50,000 instructions)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.where: dict[str, str] = {}
        self.users: dict[tuple[str, str], list[Instruction]] = {}
        self.by_name: dict[tuple[str, str], Instruction] = {}
        for computation in module.computations:
            for instruction in computation.instructions:
                self.where.setdefault(instruction.name, computation.name)
                self.by_name[(computation.name, instruction.name)] = instruction
                for operand in instruction.operands:
                    key = (computation.name, operand.name.lstrip("%"))
                    self.users.setdefault(key, []).append(instruction)
        self.labels: dict[int, str] = {}

    def category(self, instruction: Instruction) -> str:
        key = id(instruction)
        if key not in self.labels:
            self.labels[key] = classify(instruction, self.module).category
        return self.labels[key]

    def downstream_collectives(
        self, computation: str, name: str, hops: int = 4
    ) -> list[Instruction]:
        """Collectives reached from ``name`` through a few cheap ops in the same computation."""
        found: list[Instruction] = []
        frontier = [name]
        for _ in range(hops):
            following: list[str] = []
            for current in frontier:
                for user in self.users.get((computation, current), []):
                    if self.category(user) == "collective":
                        found.append(user)
                    elif user.opcode in _PASS_THROUGH:
                        following.append(user.name)
            frontier = following
        return found

    def upstream(self, computation: str, name: str, hops: int = 4) -> list[Instruction]:
        """Collectives and parameters reached backwards from ``name`` through cheap ops."""
        found: list[Instruction] = []
        frontier = [name]
        for _ in range(hops):
            following: list[str] = []
            for current in frontier:
                source = self.by_name.get((computation, current))
                if source is None:
                    continue
                if self.category(source) == "collective" or source.opcode == "parameter":
                    found.append(source)
                elif source.opcode in _PASS_THROUGH - {"fusion"} or (
                    source.opcode == "fusion"
                    and self.category(source) in ("data-movement", "elementwise")
                ):
                    following.extend(o.name.lstrip("%") for o in source.operands)
            frontier = following
        return found


def _add_collective_evidence(module: Module, mesh: Mesh, propagator: _Propagator) -> None:
    """Record the collectives around each matmul, and use them as the split when nothing else
    says: an all-reduce of the result means a split contraction (when no annotation reaches
    the operands)."""
    axes_of = {c.name: c.axes for c in mesh.collectives}
    graph = _Graph(module)
    for matmul in propagator.matmuls:
        # A dot inside a fused computation is looked at from the fusion, in the fusion's caller.
        site_name = matmul.name
        site_computation = graph.where.get(site_name)
        if site_computation is None:
            continue
        for collective in graph.downstream_collectives(site_computation, site_name):
            axes = axes_of.get(collective.name)
            if axes is None:
                continue
            kind = _collective_kind(collective.opcode)
            if any(f["name"] == collective.name for f in matmul.feeds):
                continue
            matmul.feeds.append({"kind": kind, "name": collective.name, "axes": axes})
            matmul.evidence.append(f"result feeds {kind} {collective.name} over {axes}")
            if (
                kind in ("all-reduce", "reduce-scatter")
                and axes
                and not matmul.annotated
                and not matmul.partial_sum_axes
                and matmul.contracting[0]
            ):
                _split_contraction(matmul, axes, mesh.size_of(axes), kind)
        site = graph.by_name.get((site_computation, site_name))
        if site is None:
            continue
        operands = site.operands[:2] if site.opcode == "dot" else site.operands
        for index, operand in enumerate(operands):
            sources = graph.upstream(site_computation, operand.name.lstrip("%"))
            for collective in sources:
                axes = axes_of.get(collective.name)
                if collective.opcode == "parameter" or axes is None:
                    continue
                kind = _collective_kind(collective.opcode)
                if any(f["name"] == collective.name for f in matmul.fed_by):
                    continue
                # Only the entry's parameters are known to be weights or inputs; a loop's
                # carried tuple mixes both.
                gathered_from = [
                    s.name
                    for o in collective.operands
                    for s in graph.upstream(site_computation, o.name.lstrip("%"))
                    if s.opcode == "parameter" and site_computation == module.entry.name
                ]
                matmul.fed_by.append(
                    {
                        "kind": kind,
                        "name": collective.name,
                        "axes": axes,
                        "operand": index,
                        "from_parameter": gathered_from[0] if gathered_from else None,
                    }
                )
                what = f"parameter {gathered_from[0]}" if gathered_from else "an activation"
                matmul.evidence.append(
                    f"operand {index} is {what} through {kind} {collective.name} over {axes}"
                )


def _split_contraction(matmul: MatmulSharding, axes: list[str], size: int, kind: str) -> None:
    lhs_dim = matmul.contracting[0][0]
    rhs_dim = matmul.contracting[1][0]
    lhs_at = lhs_dim + len(matmul.global_lhs) - len(matmul.local_lhs)
    rhs_at = rhs_dim + len(matmul.global_rhs) - len(matmul.local_rhs)
    matmul.global_lhs[lhs_at] *= size
    matmul.global_rhs[rhs_at] *= size
    matmul.lhs_split[lhs_at] = list(axes)
    matmul.rhs_split[rhs_at] = list(axes)
    matmul.partial_sum_axes = list(axes)
    matmul.evidence.append(
        f"no sharding annotation reaches the operands; the {kind} of the result over {axes} "
        f"sums partial products, so the contracted dim is split {size}-way"
    )


def _strategies(module: Module, mesh: Mesh, propagator: _Propagator) -> list[StrategyLabel]:
    labels: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    def add(strategy: str, axes: Iterable[str], why: str) -> None:
        key = (strategy, tuple(axes))
        bucket = labels.setdefault(key, [])
        if why not in bucket and len(bucket) < 6:
            bucket.append(why)

    # Token axes split the activations' batch or sequence: the non-contracted, non-batched
    # lhs dims of forward matmuls (JAX puts activations on the lhs).
    batch_axes: set[str] = set()
    sequence_axes: set[str] = set()
    for m in propagator.matmuls:
        if m.backward:
            continue
        offset = len(m.global_lhs) - len(m.local_lhs)
        for dim, axes in m.lhs_split.items():
            local_dim = dim - offset
            if local_dim in m.contracting[0] or (local_dim in m.batch[0] and local_dim != 0):
                continue
            (batch_axes if local_dim <= 0 else sequence_axes).update(axes)
    sequence_axes -= batch_axes
    batch_axes |= sequence_axes
    for m in propagator.matmuls:
        lhs_offset = len(m.global_lhs) - len(m.local_lhs)
        rhs_offset = len(m.global_rhs) - len(m.local_rhs)
        # A dot summed over a batch axis (one that splits the leading lhs dim of forward
        # matmuls) is a weight gradient (activations^T · gradients).
        weight_gradient = bool(m.partial_sum_axes) and set(m.partial_sum_axes) <= batch_axes
        for axis in m.partial_sum_axes:
            if weight_gradient:
                add(
                    "sequence/context parallel" if axis in sequence_axes else "data parallel",
                    [axis],
                    f"{m.name}: weight-gradient matmul contracts the {axis}-split tokens and its "
                    f"result is summed over {axis}",
                )
            else:
                add(
                    "tensor parallel (row split)",
                    [axis],
                    f"{m.name}: contracted feature dim split along {axis}; partial results "
                    f"summed over {axis}",
                )
        if weight_gradient:
            continue
        contracted_axes = set(m.partial_sum_axes)
        for dim, axes in m.lhs_split.items():
            local_dim = dim - lhs_offset
            if any(a in contracted_axes for a in axes) or local_dim in m.contracting[0]:
                continue
            if local_dim < 0 or local_dim == 0:
                add("data parallel", axes, f"{m.name}: lhs batch dim split along {', '.join(axes)}")
            elif local_dim in m.batch[0]:
                add(
                    "tensor parallel (batched dims, e.g. attention heads)",
                    axes,
                    f"{m.name}: batch dim {dim} of a batched matmul split along {', '.join(axes)}",
                )
            elif not m.backward:
                # Only forward matmuls: a backward one's lhs is often a transposed activation
                # (x^T in x^T·dy) whose free dim is a feature, split after an all-to-all.
                add(
                    "sequence/context parallel",
                    axes,
                    f"{m.name}: lhs dim {dim} (not the leading batch dim, not contracted) split "
                    f"along {', '.join(axes)}",
                )
        for dim, axes in m.rhs_split.items():
            local_dim = dim - rhs_offset
            if any(a in contracted_axes for a in axes) or local_dim in m.contracting[1]:
                continue
            if local_dim < 0 or local_dim in m.batch[1]:
                continue
            if set(axes) <= batch_axes:
                # The weight stays split along the batch axis while it is used: FSDP-style
                # sharding without a gather, not a separate model-parallel axis.
                add(
                    "FSDP/ZeRO",
                    axes,
                    f"{m.name}: rhs dim {dim} stays split along batch axis {', '.join(axes)}",
                )
                continue
            add(
                "tensor parallel (column split)",
                axes,
                f"{m.name}: rhs non-contracted dim {dim} split along {', '.join(axes)}",
            )
    # FSDP / ZeRO: weights all-gathered before use, gradients reduce-scattered.
    kinds_by_axes: dict[tuple[str, ...], set[str]] = {}
    for c in mesh.collectives:
        if c.axes:
            kinds_by_axes.setdefault(tuple(c.axes), set()).add(c.kind)
    for m in propagator.matmuls:
        for source in m.fed_by:
            if source["kind"] != "all-gather":
                continue
            if source["from_parameter"]:
                add(
                    "FSDP/ZeRO",
                    source["axes"],
                    f"{m.name}: operand {source['operand']} is parameter "
                    f"{source['from_parameter']} all-gathered over {source['axes']} before use",
                )
            else:
                add(
                    "sequence/context parallel or resharding (possible)",
                    source["axes"],
                    f"{m.name}: operand {source['operand']} is an activation all-gathered over "
                    f"{source['axes']} before use",
                )
    for axes, kinds in kinds_by_axes.items():
        if "reduce-scatter" in kinds and "all-gather" in kinds:
            add("FSDP/ZeRO", axes, f"both all-gather and reduce-scatter run over {list(axes)}")
        if "all-to-all" in kinds or "ragged-all-to-all" in kinds:
            add("expert parallel (possible)", axes, f"all-to-all over {list(axes)}")
    for c in mesh.collectives:
        if c.kind == "collective-permute" and c.axes:
            instruction = _find(module, c.computation, c.name)
            pairs = []
            if instruction is not None:
                try:
                    pairs = decode_source_target_pairs(
                        instruction.attributes.get("source_target_pairs", "{}")
                    )
                except HloSyntaxError:
                    pairs = []
            sources = {s for s, _ in pairs}
            targets = {t for _, t in pairs}
            if pairs and sources != targets:
                add("pipeline", c.axes, f"{c.name}: collective-permute chain (not a ring)")
            elif pairs:
                add(
                    "ring / pipeline (possible)",
                    c.axes,
                    f"{c.name}: collective-permute ring over {c.axes}",
                )
    return [StrategyLabel(s, list(a), why) for (s, a), why in labels.items()]


def _find(module: Module, computation: str | None, name: str) -> Instruction | None:
    try:
        return module.computation(computation or "").get(name)
    except KeyError:
        return None

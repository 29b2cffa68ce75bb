"""``sharding=`` values (replicated, maximal, legacy and iota tiles, tuples, mesh shardings)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from profan.hlo.devices.mesh import (
    AxisRef,
    MeshPieces,
    MeshSpec,
    read_axis_set,
    read_device_ids,
    read_mesh,
)
from profan.hlo.devices.reader import Reader, iota_devices, read_iota_tail

SUBGROUP_TYPES = ("replicated", "manual", "unreduced", "maximal")


@dataclass(frozen=True, slots=True)
class Sharding:
    """A decoded ``sharding=`` value.

    ``kind`` is one of ``replicated``, ``maximal``, ``manual``, ``unknown``, ``unreduced``,
    ``tiled`` or ``tuple``.  For ``tiled``: ``tile_dims`` is the whole tile-assignment shape
    (data dims followed by ``len(subgroup_types)`` trailing subgroup dims), ``devices`` the device
    ids row-major over it.  ``replicate_on_last_tile_dim`` is the legacy flag
    (``last_tile_dim_replicate``); ``subgroup_types`` names each trailing dim (``replicated``,
    ``manual``, …).  Mesh shardings are turned into the same tile assignment and also keep
    ``mesh`` and ``dim_axes`` (the axis names each data dim is split along).
    """

    kind: str
    tile_dims: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()
    replicate_on_last_tile_dim: bool = False
    subgroup_types: tuple[str, ...] = ()
    device: int | None = None  # maximal
    elements: tuple[Sharding, ...] = ()  # tuple
    mesh: MeshSpec | None = None
    dim_axes: tuple[tuple[str, ...], ...] = ()
    shard_group: str | None = None  # "shard_as 0" / "shard_like 0"
    text: str = field(default="", compare=False)

    @property
    def is_tiled(self) -> bool:
        return self.kind == "tiled"

    @property
    def data_tile_dims(self) -> tuple[int, ...]:
        """Tiles per array dimension (the tile shape without trailing subgroup dims)."""
        if not self.is_tiled:
            return ()
        count = len(self.subgroup_types)
        return self.tile_dims[: len(self.tile_dims) - count] if count else self.tile_dims

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    def global_dims(self, local_dims: tuple[int, ...]) -> tuple[int, ...]:
        """The global shape of an array whose per-device shape is ``local_dims``."""
        dims = self.data_tile_dims
        if not dims:
            return tuple(local_dims)
        return tuple(size * (dims[i] if i < len(dims) else 1) for i, size in enumerate(local_dims))

    def device_groups_along(self, dim: int) -> list[list[int]]:
        """The device groups that together hold a full slice along tile dimension ``dim``."""
        if not self.is_tiled:
            return []
        order = [d for d in range(len(self.tile_dims)) if d != dim] + [dim]
        positions = iota_devices(list(self.tile_dims), order)
        size = self.tile_dims[dim]
        flat = [self.devices[p] for p in positions]
        return [flat[i : i + size] for i in range(0, len(flat), size)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.is_tiled:
            out.update(
                tile_dims=list(self.tile_dims),
                data_tile_dims=list(self.data_tile_dims),
                devices=list(self.devices),
                replicate_on_last_tile_dim=self.replicate_on_last_tile_dim,
                subgroup_types=list(self.subgroup_types),
            )
        if self.device is not None:
            out["device"] = self.device
        if self.elements:
            out["elements"] = [e.to_dict() for e in self.elements]
        if self.mesh is not None:
            out["mesh"] = dict(zip(self.mesh.axis_names, self.mesh.axis_sizes, strict=True))
            out["dim_axes"] = [list(a) for a in self.dim_axes]
        if self.shard_group:
            out["shard_group"] = self.shard_group
        return out


def decode_sharding(text: str) -> Sharding:
    """Decode a ``sharding=`` value (with its braces) into a :class:`Sharding`."""
    reader = Reader(text.strip(), "sharding")
    sharding = _read_sharding(reader)
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return sharding


def _skip_balanced(reader: Reader) -> None:
    """Skip a ``{…}`` value (metadata) including nested braces and quoted strings."""
    reader.expect("{")
    depth = 1
    text = reader.text
    while reader.pos < len(text) and depth:
        char = text[reader.pos]
        if char == '"':
            end = reader.pos + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            reader.pos = end
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        reader.pos += 1
    if depth:
        raise reader.error("unbalanced braces in metadata", "}")


def _read_sharding(reader: Reader) -> Sharding:
    start = reader.pos
    reader.expect("{")
    if reader.peek("{"):
        elements = [_read_sharding(reader)]
        while reader.accept(","):
            elements.append(_read_sharding(reader))
        reader.expect("}")
        return Sharding("tuple", elements=tuple(elements), text=reader.text[start : reader.pos])
    if reader.accept("}"):
        # ``{}`` is an empty tuple sharding.
        return Sharding("tuple", text="{}")
    if reader.peek("mesh") or reader.peek("@mesh"):
        result = _read_mesh_sharding(reader)
    elif reader.accept("devices"):
        result = _read_tiled(reader)
    else:
        word = reader.name()
        if word == "maximal":
            reader.expect("device")
            reader.expect("=")
            result = Sharding("maximal", device=reader.integer())
        elif word in ("replicated", "manual", "unknown", "unreduced"):
            result = Sharding(word)
        else:
            reader.pos -= len(word)
            raise reader.error(
                f"unknown sharding {word!r}",
                "replicated",
                "maximal",
                "manual",
                "unknown",
                "devices=",
                "mesh[",
            )
    shard_group = None
    while not reader.accept("}"):
        if reader.at_end():
            raise reader.error("sharding not closed", "}")
        if reader.accept("metadata"):
            reader.expect("=")
            _skip_balanced(reader)
        elif reader.accept("shard_as"):
            shard_group = f"shard_as {reader.integer()}"
        elif reader.accept("shard_like"):
            shard_group = f"shard_like {reader.integer()}"
        else:
            found = reader.text[reader.pos : reader.pos + 12]
            raise reader.error(f"found {found!r}", "metadata=", "shard_as", "shard_like", "}")
    return replace(result, shard_group=shard_group, text=reader.text[start : reader.pos])


def _read_tiled(reader: Reader) -> Sharding:
    reader.expect("=")
    dims = reader.int_list("[", "]")
    if not dims or any(d <= 0 for d in dims):
        raise reader.error(f"tile dims {dims} must be positive")
    count = math.prod(dims)
    if reader.accept("<="):
        devices = read_iota_tail(reader, count)
    else:
        devices = [reader.integer()]
        while reader.accept(","):
            devices.append(reader.integer())
        if len(devices) != count:
            raise reader.error(f"tile shape {dims} needs {count} device ids, found {len(devices)}")
    if len(set(devices)) != len(devices):
        raise reader.error("a device id repeats in the tile assignment")
    replicate_last = False
    subgroups: tuple[str, ...] = ()
    if reader.accept("last_tile_dim_replicate"):
        replicate_last = True
        subgroups = ("replicated",)
    elif reader.accept("last_tile_dims"):
        reader.expect("=")
        reader.expect("{")
        names = [reader.name()]
        while reader.accept(","):
            names.append(reader.name())
        reader.expect("}")
        for name in names:
            if name not in SUBGROUP_TYPES:
                raise reader.error(f"unknown subgroup type {name!r}", *SUBGROUP_TYPES)
        subgroups = tuple(names)
    if len(subgroups) > len(dims):
        raise reader.error(f"{len(subgroups)} subgroup dims but the tile shape has {len(dims)}")
    return Sharding(
        "tiled",
        tile_dims=tuple(dims),
        devices=tuple(devices),
        replicate_on_last_tile_dim=replicate_last,
        subgroup_types=subgroups,
    )


def _read_mesh_sharding(reader: Reader) -> Sharding:
    """``mesh['x'=2,'y'=2], [{'x'}, {}], replicated={'y'}, unreduced={'z'}`` → tiled."""
    mesh = read_mesh(reader)
    reader.accept(",")
    if reader.accept("device_ids"):
        reader.expect("=")
        ids = read_device_ids(reader)
        if len(ids) != mesh.num_devices:
            raise reader.error(f"device_ids lists {len(ids)} ids for {mesh.num_devices} devices")
        mesh = MeshSpec(mesh.axis_names, mesh.axis_sizes, tuple(ids))
        reader.accept(",")
    reader.expect("[")
    dim_refs: list[list[AxisRef]] = []
    if not reader.accept("]"):
        while True:
            dim_refs.append(read_axis_set(reader))
            # An open dim may print a trailing ``?``; it does not change the split.
            reader.accept("?")
            if reader.accept("]"):
                break
            reader.expect(",")
    extra: dict[str, list[AxisRef]] = {}
    while reader.accept(","):
        key = reader.name()
        reader.expect("=")
        if key == "unreduced" and not reader.peek("{"):
            reader.name()  # a reduction kind such as ``max``
        extra[key] = read_axis_set(reader)
    all_refs = [r for refs in dim_refs for r in refs] + [r for v in extra.values() for r in v]
    pieces = MeshPieces(reader, mesh, all_refs)
    order: list[int] = []
    tile_dims: list[int] = []
    for refs in dim_refs:
        chosen = [p for ref in refs for p in pieces.resolve(ref)]
        if any(p in order for p in chosen):
            raise reader.error("a mesh axis shards two dimensions")
        order.extend(chosen)
        tile_dims.append(math.prod(pieces.pieces[p][2] for p in chosen))
    unreduced = [p for ref in extra.get("unreduced", []) for p in pieces.resolve(ref)]
    rest = [p for p in range(len(pieces.pieces)) if p not in order and p not in unreduced]
    subgroups: list[str] = []
    if unreduced:
        order.extend(unreduced)
        tile_dims.append(math.prod(pieces.pieces[p][2] for p in unreduced))
        subgroups.append("unreduced")
    if rest and math.prod(pieces.pieces[p][2] for p in rest) > 1:
        order.extend(rest)
        tile_dims.append(math.prod(pieces.pieces[p][2] for p in rest))
        subgroups.append("replicated")
    else:
        order.extend(rest)
    devices = pieces.transposed(order)
    dim_axes = tuple(
        tuple(r.name if r.pre is None else f"{r.name}:({r.pre}){r.size}" for r in refs)
        for refs in dim_refs
    )
    return Sharding(
        "tiled",
        tile_dims=tuple(tile_dims),
        devices=tuple(devices),
        replicate_on_last_tile_dim=subgroups == ["replicated"],
        subgroup_types=tuple(subgroups),
        mesh=mesh,
        dim_axes=dim_axes,
    )

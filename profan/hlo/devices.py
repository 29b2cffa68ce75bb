"""Device lists in HLO attributes, decoded: replica groups, source-target pairs, shardings.

The parser keeps ``replica_groups=…``, ``source_target_pairs=…`` and ``sharding=…`` as raw text;
the pure functions here turn that text into explicit device ids.  Every printed form expands to
the same explicit lists for equivalent inputs:

* explicit groups ``{{0,1},{2,3}}``; empty ``{}`` (one group of all devices);
* iota groups ``[G,S]<=[N]`` and ``[G,S]<=[d0,d1,…]T(p0,p1,…)``: the ids ``0..N-1`` laid out in
  the shape ``[d0,d1,…]``, transposed by the permutation, flattened and cut into ``G`` groups of
  ``S``;
* mesh groups ``mesh['x'=4,'y'=2] {'x'}`` (also ``@mesh<x=4,y=2> {x}``, optional
  ``device_ids=(…)`` or ``device_ids=([…]T(…))``, sub-axes ``'x':(pre)size``): each group is the
  devices that differ only in the listed axes (first listed axis is the slowest-varying member
  of a group); groups run over the other axes in mesh order.

Sub-axis ``'x':(p)s`` names the piece of axis ``x`` of size ``s`` whose more-major pieces
multiply to ``p`` (so ``'x':(1)2`` of ``x=8`` is the major factor 2).

Bad text raises ``profan.errors.HloSyntaxError`` naming the column and what was expected.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

from profan.errors import HloSyntaxError

# ---------------------------------------------------------------------------------------------
# A small cursor over attribute text (the forms are tiny; a hand-written reader gives precise
# column numbers and costs nothing on 50,000-line modules).


class _Reader:
    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.what = what

    def error(self, reason: str, *expected: str) -> HloSyntaxError:
        return HloSyntaxError(
            f"bad {self.what}: {reason}",
            line=1,
            column=self.pos + 1,
            text=self.text,
            expected=tuple(expected),
        )

    def skip_ws(self) -> None:
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in " \t\r\n":
                self.pos += 1
            elif text.startswith("/*", self.pos):  # ``/*index=5*/`` comments XLA prints
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            else:
                break

    def peek(self, token: str) -> bool:
        self.skip_ws()
        return self.text.startswith(token, self.pos)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            found = self.text[self.pos : self.pos + 10] or "end of text"
            raise self.error(f"found {found!r}", repr(token))

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def integer(self) -> int:
        self.skip_ws()
        start = self.pos
        if self.pos < len(self.text) and self.text[self.pos] == "-":
            self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos].isdigit():
            self.pos += 1
        if self.pos == start or self.text[start : self.pos] == "-":
            self.pos = start
            found = self.text[self.pos : self.pos + 10] or "end of text"
            raise self.error(f"found {found!r}", "an integer")
        return int(self.text[start : self.pos])

    def int_list(self, open_: str, close: str) -> list[int]:
        """``open_ int (, int)* close`` — possibly empty."""
        self.expect(open_)
        values: list[int] = []
        if self.accept(close):
            return values
        while True:
            values.append(self.integer())
            if self.accept(close):
                return values
            self.expect(",")

    def name(self) -> str:
        """A quoted ``'axis'`` / ``"axis"`` or a bare identifier."""
        self.skip_ws()
        text = self.text
        if self.pos < len(text) and text[self.pos] in "'\"":
            quote = text[self.pos]
            end = text.find(quote, self.pos + 1)
            if end < 0:
                raise self.error("unterminated quoted name", quote)
            value = text[self.pos + 1 : end]
            self.pos = end + 1
            return value
        start = self.pos
        while self.pos < len(text) and (text[self.pos].isalnum() or text[self.pos] in "_.-$"):
            self.pos += 1
        if self.pos == start:
            raise self.error(f"found {text[self.pos : self.pos + 10]!r}", "a name")
        return text[start : self.pos]


# ---------------------------------------------------------------------------------------------
# Iota tile assignments: pure-Python reshape + transpose.


def iota_devices(reshape_dims: list[int], perm: list[int] | None = None) -> list[int]:
    """``0..N-1`` laid out in ``reshape_dims``, transposed by ``perm``, flattened row-major."""
    total = math.prod(reshape_dims) if reshape_dims else 1
    if perm is None or perm == list(range(len(reshape_dims))):
        return list(range(total))
    rank = len(reshape_dims)
    strides = [1] * rank
    for axis in range(rank - 2, -1, -1):
        strides[axis] = strides[axis + 1] * reshape_dims[axis + 1]
    out_dims = [reshape_dims[p] for p in perm]
    out_strides = [strides[p] for p in perm]
    result: list[int] = [0]
    # Build the flat list one output axis at a time (major to minor).
    for size, stride in zip(out_dims, out_strides, strict=True):
        result = [base + i * stride for base in result for i in range(size)]
    return result


def _check_perm(reader: _Reader, perm: list[int], rank: int) -> None:
    if sorted(perm) != list(range(rank)):
        raise reader.error(f"T{tuple(perm)} is not a permutation of {rank} dimensions")


def _read_iota_tail(reader: _Reader, count: int) -> list[int]:
    """After ``<=``: ``[d0,…]`` and optional ``T(p…)``; returns ``count`` device ids."""
    reshape = reader.int_list("[", "]")
    if any(d <= 0 for d in reshape):
        raise reader.error(f"iota reshape dims {reshape} must be positive")
    perm = None
    if reader.accept("T"):
        perm = reader.int_list("(", ")")
        _check_perm(reader, perm, len(reshape))
    if math.prod(reshape) != count:
        raise reader.error(
            f"iota reshape {reshape} holds {math.prod(reshape)} devices, "
            f"the tile shape needs {count}"
        )
    return iota_devices(reshape, perm)


# ---------------------------------------------------------------------------------------------
# Meshes (named axes) and references to their (sub-)axes.


@dataclass(frozen=True, slots=True)
class MeshSpec:
    """A named device mesh as printed inside ``mesh[…]`` / ``@mesh<…>``."""

    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]
    device_ids: tuple[int, ...]  # row-major over axis_sizes

    @property
    def num_devices(self) -> int:
        return math.prod(self.axis_sizes)


@dataclass(frozen=True, slots=True)
class AxisRef:
    """A whole mesh axis (``pre``/``size`` None) or a sub-axis ``'x':(pre)size``."""

    name: str
    pre: int | None = None
    size: int | None = None


def _read_mesh(reader: _Reader) -> MeshSpec:
    """``mesh['a'=2,'b'=4(, device_ids=…)]`` or ``@mesh<a=2,b=4>(, device_ids=…)``."""
    if reader.accept("@mesh"):
        reader.expect("<")
        close = ">"
    else:
        reader.expect("mesh")
        reader.expect("[")
        close = "]"
    names: list[str] = []
    sizes: list[int] = []
    devices: list[int] | None = None
    while True:
        if reader.accept("device_ids"):
            reader.expect("=")
            devices = _read_device_ids(reader)
        else:
            names.append(reader.name())
            reader.expect("=")
            sizes.append(reader.integer())
        if reader.accept(close):
            break
        reader.expect(",")
    # ``@mesh<…>, device_ids=(…)`` prints the ids after the closing bracket.
    save = reader.pos
    if reader.accept(",") and reader.accept("device_ids"):
        reader.expect("=")
        devices = _read_device_ids(reader)
    elif reader.pos != save:
        reader.pos = save
    if not names:
        raise reader.error("a mesh needs at least one axis", "'name'=size")
    if len(set(names)) != len(names):
        raise reader.error(f"mesh axis names repeat: {names}")
    if any(s <= 0 for s in sizes):
        raise reader.error(f"mesh axis sizes {sizes} must be positive")
    total = math.prod(sizes)
    if devices is None:
        devices = list(range(total))
    elif len(devices) != total or sorted(devices) != sorted(set(devices)):
        raise reader.error(f"device_ids lists {len(devices)} ids for a mesh of {total} devices")
    return MeshSpec(tuple(names), tuple(sizes), tuple(devices))


def _read_device_ids(reader: _Reader) -> list[int]:
    """``(0,1,2,…)`` or ``([d0,d1]T(1,0))`` (an iota reshape + transpose)."""
    reader.expect("(")
    if reader.peek("["):
        reshape = reader.int_list("[", "]")
        perm = None
        if reader.accept("T"):
            perm = reader.int_list("(", ")")
            _check_perm(reader, perm, len(reshape))
        reader.expect(")")
        return iota_devices(reshape, perm)
    reader.pos -= 1
    return reader.int_list("(", ")")


def _read_axis_ref(reader: _Reader) -> AxisRef:
    name = reader.name()
    if reader.accept(":"):
        reader.expect("(")
        pre = reader.integer()
        reader.expect(")")
        size = reader.integer()
        return AxisRef(name, pre, size)
    return AxisRef(name)


def _read_axis_set(reader: _Reader) -> list[AxisRef]:
    """``{'a', 'b':(1)2}`` — possibly empty."""
    reader.expect("{")
    refs: list[AxisRef] = []
    if reader.accept("}"):
        return refs
    while True:
        refs.append(_read_axis_ref(reader))
        if reader.accept("}"):
            return refs
        reader.expect(",")


class _MeshPieces:
    """The mesh with every axis cut into the pieces its sub-axis references need.

    ``pieces`` is a list of ``(axis index, size)`` in major-to-minor order; ``devices`` the mesh's
    device ids row-major over the piece sizes.  ``resolve(ref)`` gives the piece indices a
    reference covers (major to minor).
    """

    def __init__(self, reader: _Reader, mesh: MeshSpec, refs: list[AxisRef]) -> None:
        self.reader = reader
        self.mesh = mesh
        index = {name: i for i, name in enumerate(mesh.axis_names)}
        cuts: list[set[int]] = [{1, size} for size in mesh.axis_sizes]
        for ref in refs:
            if ref.name not in index:
                raise reader.error(
                    f"axis {ref.name!r} is not in the mesh {list(mesh.axis_names)}",
                    *[repr(n) for n in mesh.axis_names],
                )
            axis = index[ref.name]
            full = mesh.axis_sizes[axis]
            if ref.pre is not None and ref.size is not None:
                if ref.pre <= 0 or ref.size <= 0 or full % (ref.pre * ref.size) != 0:
                    raise reader.error(
                        f"sub-axis {ref.name!r}:({ref.pre}){ref.size} does not divide "
                        f"the axis size {full}"
                    )
                cuts[axis].update({ref.pre, ref.pre * ref.size})
        self.pieces: list[tuple[int, int, int]] = []  # (axis, pre, size)
        for axis, boundaries in enumerate(cuts):
            ordered = sorted(boundaries)
            for low, high in itertools.pairwise(ordered):
                if high % low != 0:
                    raise reader.error(
                        f"sub-axes of {mesh.axis_names[axis]!r} overlap ({low} and {high})"
                    )
                self.pieces.append((axis, low, high // low))
        self.index = index

    def resolve(self, ref: AxisRef) -> list[int]:
        axis = self.index[ref.name]
        low = 1 if ref.pre is None else ref.pre
        high = self.mesh.axis_sizes[axis] if ref.size is None else low * ref.size
        return [
            i
            for i, (a, pre, size) in enumerate(self.pieces)
            if a == axis and pre >= low and pre * size <= high
        ]

    def transposed(self, order: list[int]) -> list[int]:
        """The device ids with the pieces reordered to ``order`` (major to minor), flattened."""
        sizes = [size for _, _, size in self.pieces]
        positions = iota_devices(sizes, order)
        return [self.mesh.device_ids[p] for p in positions]


def _mesh_groups(reader: _Reader) -> list[list[int]]:
    mesh = _read_mesh(reader)
    refs = _read_axis_set(reader)
    pieces = _MeshPieces(reader, mesh, refs)
    chosen: list[int] = []
    for ref in refs:
        for piece in pieces.resolve(ref):
            if piece in chosen:
                raise reader.error(f"axis {ref.name!r} is listed twice")
            chosen.append(piece)
    rest = [i for i in range(len(pieces.pieces)) if i not in chosen]
    flat = pieces.transposed(rest + chosen)
    group_size = math.prod(pieces.pieces[i][2] for i in chosen) if chosen else 1
    return [flat[i : i + group_size] for i in range(0, len(flat), group_size)]


def decode_sdy_mesh(text: str) -> MeshSpec | None:
    """``#sdy.mesh<["data"=4, "model"=2]>`` (optionally ``, device_ids=[…]``), the form Shardy
    writes into ``frontend_attributes``, as a :class:`MeshSpec`; ``None`` when the text is not
    that form or is inconsistent (repeated names, sizes below 1, ids not a permutation)."""
    reader = _Reader(text.strip(), "sdy mesh")
    names: list[str] = []
    sizes: list[int] = []
    ids: list[int] | None = None
    try:
        reader.expect("#sdy.mesh")
        reader.expect("<")
        reader.expect("[")
        if not reader.accept("]"):
            while True:
                names.append(reader.name())
                reader.expect("=")
                sizes.append(reader.integer())
                if reader.accept("]"):
                    break
                reader.expect(",")
        if reader.accept(","):
            reader.expect("device_ids")
            reader.expect("=")
            ids = reader.int_list("[", "]")
        reader.expect(">")
    except HloSyntaxError:
        return None
    total = math.prod(sizes)
    ids = list(range(total)) if ids is None else ids
    if not reader.at_end() or len(set(names)) != len(names) or any(s <= 0 for s in sizes):
        return None
    if sorted(ids) != list(range(total)):
        return None
    return MeshSpec(tuple(names), tuple(sizes), tuple(ids))


# ---------------------------------------------------------------------------------------------
# Replica groups and source-target pairs.


def decode_replica_groups(text: str, *, num_devices: int | None = None) -> list[list[int]]:
    """The device groups of a ``replica_groups=`` value, as explicit lists.

    ``{}`` means one group holding every device: it decodes to ``[]`` when ``num_devices`` is not
    given (the caller knows the count from ``replica_count``/``num_partitions``), else to
    ``[[0, 1, …, num_devices-1]]``.
    """
    reader = _Reader(text.strip(), "replica_groups")
    if reader.peek("mesh") or reader.peek("@mesh"):
        groups = _mesh_groups(reader)
    elif reader.peek("["):
        shape = reader.int_list("[", "]")
        if len(shape) != 2 or min(shape) <= 0:
            raise reader.error(f"iota replica groups need [groups,size], found {shape}")
        reader.expect("<=")
        flat = _read_iota_tail(reader, shape[0] * shape[1])
        groups = [flat[i * shape[1] : (i + 1) * shape[1]] for i in range(shape[0])]
    else:
        reader.expect("{")
        groups = []
        if not reader.accept("}"):
            while True:
                groups.append(reader.int_list("{", "}"))
                if reader.accept("}"):
                    break
                reader.expect(",")
        if not groups and num_devices is not None:
            groups = [list(range(num_devices))]
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return groups


def replica_groups_mesh(text: str) -> MeshSpec | None:
    """The named mesh of a mesh-form ``replica_groups=`` value (``mesh['data'=4,'model'=2]
    {'data'}`` or ``@mesh<...>``), ``None`` for the explicit and iota forms.  Bad mesh text
    raises ``HloSyntaxError``."""
    reader = _Reader(text.strip(), "replica_groups")
    if not (reader.peek("mesh") or reader.peek("@mesh")):
        return None
    return _read_mesh(reader)


def decode_source_target_pairs(text: str) -> list[tuple[int, int]]:
    """``{{0,1},{1,2}}`` → ``[(0, 1), (1, 2)]`` (``{}`` → ``[]``)."""
    reader = _Reader(text.strip(), "source_target_pairs")
    reader.expect("{")
    pairs: list[tuple[int, int]] = []
    if not reader.accept("}"):
        while True:
            start = reader.pos
            pair = reader.int_list("{", "}")
            if len(pair) != 2:
                reader.pos = start
                raise reader.error(f"a pair needs two ids, found {pair}", "{source,target}")
            pairs.append((pair[0], pair[1]))
            if reader.accept("}"):
                break
            reader.expect(",")
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return pairs


def group_problems(groups: list[list[int]], num_devices: int | None = None) -> list[str]:
    """What is wrong with a set of groups (empty when nothing): repeats, unequal sizes, gaps."""
    problems: list[str] = []
    seen: dict[int, int] = {}
    for index, group in enumerate(groups):
        for device in group:
            if device < 0:
                problems.append(f"negative device id {device} in group {index}")
            if device in seen:
                problems.append(
                    f"device {device} is in group {seen[device]} and group {index}"
                    if seen[device] != index
                    else f"device {device} appears twice in group {index}"
                )
            seen[device] = index
    sizes = sorted({len(g) for g in groups})
    if len(sizes) > 1:
        problems.append(f"groups have unequal sizes {sizes}")
    if num_devices is not None and seen:
        missing = sorted(set(range(num_devices)) - set(seen))
        if missing:
            shown = ", ".join(map(str, missing[:8])) + (" …" if len(missing) > 8 else "")
            problems.append(f"{len(missing)} of {num_devices} devices are in no group ({shown})")
        beyond = sorted(d for d in seen if d >= num_devices)
        if beyond:
            problems.append(f"device ids {beyond[:8]} exceed the {num_devices} devices")
    return problems


# ---------------------------------------------------------------------------------------------
# Shardings.

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

    def tiles_along(self, dim: int) -> int:
        """How many ways array dimension ``dim`` is split (1 when not tiled)."""
        dims = self.data_tile_dims
        return dims[dim] if dim < len(dims) else 1

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
    reader = _Reader(text.strip(), "sharding")
    sharding = _read_sharding(reader)
    if not reader.at_end():
        raise reader.error(f"unexpected text {reader.text[reader.pos : reader.pos + 12]!r}")
    return sharding


def _skip_balanced(reader: _Reader) -> None:
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


def _read_sharding(reader: _Reader) -> Sharding:
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


def _read_tiled(reader: _Reader) -> Sharding:
    reader.expect("=")
    dims = reader.int_list("[", "]")
    if not dims or any(d <= 0 for d in dims):
        raise reader.error(f"tile dims {dims} must be positive")
    count = math.prod(dims)
    if reader.accept("<="):
        devices = _read_iota_tail(reader, count)
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


def _read_mesh_sharding(reader: _Reader) -> Sharding:
    """``mesh['x'=2,'y'=2], [{'x'}, {}], replicated={'y'}, unreduced={'z'}`` → tiled."""
    mesh = _read_mesh(reader)
    reader.accept(",")
    if reader.accept("device_ids"):
        reader.expect("=")
        ids = _read_device_ids(reader)
        if len(ids) != mesh.num_devices:
            raise reader.error(f"device_ids lists {len(ids)} ids for {mesh.num_devices} devices")
        mesh = MeshSpec(mesh.axis_names, mesh.axis_sizes, tuple(ids))
        reader.accept(",")
    reader.expect("[")
    dim_refs: list[list[AxisRef]] = []
    if not reader.accept("]"):
        while True:
            dim_refs.append(_read_axis_set(reader))
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
        extra[key] = _read_axis_set(reader)
    all_refs = [r for refs in dim_refs for r in refs] + [r for v in extra.values() for r in v]
    pieces = _MeshPieces(reader, mesh, all_refs)
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

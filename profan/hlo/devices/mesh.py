"""Named device meshes (``mesh['x'=4,'y'=2]``, ``@mesh<x=4,y=2>``, ``#sdy.mesh<["x"=4]>``) and
references to their (sub-)axes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from profan.errors import HloSyntaxError
from profan.hlo.devices.reader import MAX_DEVICES, Reader, check_perm, iota_devices


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


def read_mesh(reader: Reader) -> MeshSpec:
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
            devices = read_device_ids(reader)
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
        devices = read_device_ids(reader)
    elif reader.pos != save:
        reader.pos = save
    if not names:
        raise reader.error("a mesh needs at least one axis", "'name'=size")
    if len(set(names)) != len(names):
        raise reader.error(f"mesh axis names repeat: {names}")
    if any(s <= 0 for s in sizes):
        raise reader.error(f"mesh axis sizes {sizes} must be positive")
    total = math.prod(sizes)
    if total > MAX_DEVICES:
        raise reader.error(f"a mesh of {total} devices: more than the {MAX_DEVICES} accepted")
    if devices is None:
        devices = list(range(total))
    elif len(devices) != total or sorted(devices) != sorted(set(devices)):
        raise reader.error(f"device_ids lists {len(devices)} ids for a mesh of {total} devices")
    return MeshSpec(tuple(names), tuple(sizes), tuple(devices))


def read_device_ids(reader: Reader) -> list[int]:
    """``(0,1,2,…)`` or ``([d0,d1]T(1,0))`` (an iota reshape + transpose)."""
    reader.expect("(")
    if reader.peek("["):
        reshape = reader.int_list("[", "]")
        perm = None
        if reader.accept("T"):
            perm = reader.int_list("(", ")")
            check_perm(reader, perm, len(reshape))
        reader.expect(")")
        return iota_devices(reshape, perm)
    reader.pos -= 1
    return reader.int_list("(", ")")


def read_axis_ref(reader: Reader) -> AxisRef:
    name = reader.name()
    if reader.accept(":"):
        reader.expect("(")
        pre = reader.integer()
        reader.expect(")")
        size = reader.integer()
        return AxisRef(name, pre, size)
    return AxisRef(name)


def read_axis_set(reader: Reader) -> list[AxisRef]:
    """``{'a', 'b':(1)2}`` — possibly empty."""
    reader.expect("{")
    refs: list[AxisRef] = []
    if reader.accept("}"):
        return refs
    while True:
        refs.append(read_axis_ref(reader))
        if reader.accept("}"):
            return refs
        reader.expect(",")


class MeshPieces:
    """The mesh with every axis cut into the pieces its sub-axis references need.

    ``pieces`` is a list of ``(axis index, size)`` in major-to-minor order; ``devices`` the mesh's
    device ids row-major over the piece sizes.  ``resolve(ref)`` gives the piece indices a
    reference covers (major to minor).
    """

    def __init__(self, reader: Reader, mesh: MeshSpec, refs: list[AxisRef]) -> None:
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


def mesh_groups(reader: Reader) -> list[list[int]]:
    mesh = read_mesh(reader)
    refs = read_axis_set(reader)
    pieces = MeshPieces(reader, mesh, refs)
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
    reader = Reader(text.strip(), "sdy mesh")
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

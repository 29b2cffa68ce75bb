"""How a value is split over the mesh, and the arithmetic that carries splits through ops.

A :class:`ValueSplit` says, for each dim of a value's per-device (local) shape, how many ways and
along which mesh axes the global array is cut there (:class:`DimSplit`); plus split dims a reshape
removed (``hidden``), axes over which the value is still an unsummed partial result, and whether
it is one of several equal pieces of a larger value (:class:`Chunk`).  The functions here are pure:
shapes and splits in, splits out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from profan.hlo.model import Shape


@dataclass(frozen=True, slots=True)
class DimSplit:
    """How one dimension of a value is split: ``factor`` ways, along ``axes`` (names)."""

    factor: int = 1
    axes: tuple[str, ...] = ()
    known: bool = False  # True when a sharding annotation (or a collective) says so


UNSPLIT_KNOWN = DimSplit(1, (), True)
UNKNOWN = DimSplit(1, (), False)


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


def unknown(shape: Shape) -> ValueSplit:
    """Nothing known about any dim of a value of ``shape`` (tuples element by element)."""
    if shape.is_tuple:
        return ValueSplit(elements=tuple(unknown(s) for s in shape.tuple_shapes))
    return ValueSplit(dims=tuple(UNKNOWN for _ in shape.dims))


def dims_or_unknown(value: ValueSplit, rank: int) -> list[DimSplit]:
    """The dims of an array value of ``rank`` dims, unknown ones when the value is not that."""
    if value.elements is None and len(value.dims) == rank:
        return list(value.dims)
    return [UNKNOWN] * rank


def merge(a: DimSplit, b: DimSplit) -> DimSplit:
    """Two views of the same (batch or contracted) dimension: the better-known one wins."""
    if a.factor >= b.factor and (a.known or not b.known):
        return a
    return b if b.factor > a.factor or b.known else a


def global_dims(local: tuple[int, ...], dims: list[DimSplit]) -> list[int]:
    """The global size of each local dim: local size × split factor."""
    return [
        size * (d.factor if i < len(dims) else 1)
        for i, (size, d) in enumerate(zip(local, dims, strict=False))
    ]


def split_map(
    dims: list[DimSplit], offset: int, hidden: tuple[tuple[int, tuple[str, ...]], ...]
) -> dict[int, list[str]]:
    """Global dim index -> the axes that split it (hidden dims lead the global shape)."""
    out: dict[int, list[str]] = {}
    for i, (_, axes) in enumerate(hidden):
        out[i] = list(axes)
    for i, d in enumerate(dims):
        if d.factor > 1:
            out[offset + i] = list(d.axes)
    return out


def reshape(value: ValueSplit, source: tuple[int, ...], target: tuple[int, ...]) -> ValueSplit:
    """Carry splits through a reshape: a split stays on the major dim of its merged group."""
    if value.elements is not None or len(value.dims) != len(source):
        return ValueSplit(dims=tuple(UNKNOWN for _ in target))
    if tuple(source) == tuple(target):
        return value
    hidden = list(value.hidden)
    dims: list[DimSplit] = [UNSPLIT_KNOWN if value.known else UNKNOWN for _ in target]
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
                return ValueSplit(dims=tuple(UNKNOWN for _ in target))
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
                dims[k] = DimSplit(1, (), value.dims[group_i[0]].known)
        i, j = group_i[-1] + 1, group_j[-1] + 1
    return ValueSplit(dims=tuple(dims), hidden=tuple(hidden), partial=value.partial)


def slice_chunk(
    value: ValueSplit,
    source: tuple[int, ...],
    target: tuple[int, ...],
    ranges: list[tuple[int, int, int]],
) -> Chunk | None:
    """A slice (``ranges``: start, end, stride per dim) that cuts one dim into equal contiguous
    parts names the part it keeps."""
    if len(source) != len(target) or len(value.dims) != len(source):
        return None
    cut = [i for i, (a, b) in enumerate(zip(source, target, strict=True)) if a != b]
    if len(cut) != 1 or len(ranges) != len(source):
        return None
    dim = cut[0]
    start, end, stride = ranges[dim]
    length = end - start
    if stride != 1 or length <= 0 or source[dim] % length or start % length:
        return None
    return Chunk(dim, start // length, source[dim] // length, value.dims[dim])


def join_chunks(
    operands: list[ValueSplit], along: list[int], piece_dims: tuple[int, ...], rank: int
) -> ValueSplit | None:
    """A concatenate of all the pieces of one value, in order, gives back the whole.

    Along the pieces' own dim, that dim is whole again. Along another dim, the joined dim
    holds the piece index (the major part of the pieces' dim) times that dim's local part,
    so the split that dim had no longer fits on it: for a dim of local size 1 it moves onto
    the dim just minor to it (merging two adjacent dims of the global array), otherwise into
    ``hidden`` (a global dim with no local extent), which keeps every size and FLOP count.
    """
    if len(operands) < 2 or len(along) != 1:
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
    if c >= rank or len(piece_dims) != rank:
        return None
    dims = _common_dims(operands, rank)
    hidden = operands[0].hidden
    if c != first.dim:
        if not dims[c].known:
            return None
        dropped = dims[c]
        dims[c] = UNSPLIT_KNOWN
        if dropped.factor > 1:
            minor = c + 1
            if piece_dims[c] == 1 and minor < rank and minor != first.dim and dims[minor].known:
                dims[minor] = DimSplit(
                    dropped.factor * dims[minor].factor, dropped.axes + dims[minor].axes, True
                )
            else:
                hidden = (*hidden, (dropped.factor, dropped.axes))
    dims[first.dim] = first.whole
    return ValueSplit(dims=tuple(dims), hidden=hidden, partial=operands[0].partial)


def _common_dims(operands: list[ValueSplit], rank: int) -> list[DimSplit]:
    """Each dim as all operands have it, unknown where they differ."""
    return [
        operands[0].dims[i]
        if all(op.dims[i] == operands[0].dims[i] for op in operands)
        else UNKNOWN
        for i in range(rank)
    ]


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


def array_all_to_all(
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
    dims[k] = UNSPLIT_KNOWN
    return ValueSplit(dims=tuple(dims), hidden=(*value.hidden, moved), partial=partial)


def tuple_all_to_all(
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
    dims = _common_dims(operands, rank)
    others = [d if i != first.dim else UNSPLIT_KNOWN for i, d in enumerate(dims)]
    source = _group_dim(others, axes, size)
    dims[first.dim] = DimSplit(first.whole.factor * size, first.whole.axes + axes, True)
    partial = tuple(a for a in operands[0].partial if a not in axes)
    if source is None:
        if not all(d.known for d in others) or any(set(axes) & set(d.axes) for d in others):
            return None  # the members' pieces may differ in ways nothing here records
        piece = ValueSplit(dims=tuple(dims), hidden=operands[0].hidden, partial=partial)
        return ValueSplit(elements=tuple(piece for _ in operands))
    whole = _without(dims[source], axes, size)
    dims[source] = UNKNOWN
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

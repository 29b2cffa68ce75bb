"""Layout-aware sizes of HLO arrays: tiling padding, element size, packing, memory space.

``f32[3,5]{1,0:T(2,2)}`` is stored as ``[4,6]``: each ``T(...)`` tile pads the most-minor
physical dimensions up to multiples of the tile; a second tile (``T(8,128)(2,1)``) subdivides the
first and pads within it.  ``E(n)`` overrides the element size; sub-byte elements are packed.

Memory spaces: only memory space 0 (HBM / device memory) costs HBM bandwidth; ``S(1)`` (TPU
VMEM), ``S(2)`` (TPU sync flags), ``S(4)``/``S(6)`` (scalars in TPU SMEM), ``S(5)`` (host memory)
do not.  ``xla_shape_size`` counts the arrays of one space, HBM unless a ``counting_space`` block
says otherwise: ``profan.cost.estimate`` costs an op once per memory space it touches, with the
same rules, so each op has its bytes per space (XProf's "measured memory BW" counts them all).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from profan.hlo.model import Layout, Shape
from profan.hlo.opcodes import memory_space_name

HBM_MEMORY_SPACE = 0
# The memory space whose arrays ``xla_shape_size`` counts (see the module docstring).
_COUNTED_SPACE: ContextVar[int] = ContextVar("counted_memory_space", default=HBM_MEMORY_SPACE)
# XLA's default pointer size: a tuple's buffer is its index table of pointers.
TUPLE_POINTER_BYTES = 8


def physical_dims(shape: Shape) -> tuple[int, ...]:
    """Dimension sizes in physical (major-to-minor) order, per the layout's minor_to_major."""
    dims = tuple(max(size, 0) for size in shape.dims)
    layout = shape.layout
    if layout is None or len(layout.minor_to_major) != len(dims):
        return dims
    return tuple(dims[index] for index in reversed(layout.minor_to_major))


def _tiled_elements(dims: Sequence[int], tiles: Sequence[tuple[int | None, ...]]) -> int:
    """Elements a (physical) array occupies once every tile level pads it."""
    if not tiles:
        count = 1
        for size in dims:
            count *= size
        return count
    tile = tiles[0]
    dims = list(dims)
    if len(tile) > len(dims):  # a tile wider than the rank tiles leading size-1 dims
        dims = [1] * (len(tile) - len(dims)) + dims
    untiled = dims[: len(dims) - len(tile)]
    tiled = dims[len(dims) - len(tile) :]
    count = 1
    for size in untiled:
        count *= size
    tile_dims: list[int] = []
    for size, edge in zip(tiled, tile, strict=True):
        if edge is None or edge <= 0:  # `*` combines dims: no padding of its own
            count *= size
            tile_dims.append(1)
        else:
            count *= -(-size // edge)  # number of tiles along this dim (ceil)
            tile_dims.append(edge)
    return count * _tiled_elements(tile_dims, tiles[1:])


def padded_elements(shape: Shape) -> int:
    """Elements an array occupies in memory, tiling padding included."""
    if not shape.is_array:
        return 0
    layout = shape.layout
    if layout is None or not layout.tiles:
        return shape.num_elements
    if shape.num_elements == 0:
        return 0
    return _tiled_elements(physical_dims(shape), layout.tiles)


def padded_dims(shape: Shape) -> tuple[int, ...]:
    """Physical dims padded by the first tile level (display: ``[3,5]`` -> ``[4,6]``)."""
    dims = list(physical_dims(shape))
    layout = shape.layout
    if layout is None or not layout.tiles:
        return tuple(dims)
    tile = layout.tiles[0]
    offset = len(dims) - len(tile)
    for position, edge in enumerate(tile):
        index = offset + position
        if index < 0 or edge is None or edge <= 0:
            continue
        dims[index] = -(-dims[index] // edge) * edge
    return tuple(dims)


def array_bytes(shape: Shape) -> int:
    """Bytes of one array as stored: padded elements x element bits, sub-byte types packed."""
    if not shape.is_array:
        return 0
    bits = padded_elements(shape) * shape.element_bits
    return -(-bits // 8)


def logical_bytes(shape: Shape) -> int:
    """Bytes of the array's elements without any padding (what the math needs)."""
    if not shape.is_array:
        return 0
    return -(-shape.num_elements * shape.element_bits // 8)


def memory_space(shape: Shape) -> int:
    layout: Layout | None = shape.layout
    return layout.memory_space if layout is not None else HBM_MEMORY_SPACE


def in_hbm(shape: Shape) -> bool:
    return memory_space(shape) == HBM_MEMORY_SPACE


def hbm_bytes(shape: Shape | None) -> int:
    """Bytes of every HBM-resident array leaf of a shape (tuples: their leaves, no index table)."""
    if shape is None:
        return 0
    return sum(array_bytes(leaf) for leaf in shape.leaves() if leaf.is_array and in_hbm(leaf))


@contextmanager
def counting_space(space: int) -> Iterator[None]:
    """Within this block ``xla_shape_size`` counts the arrays of memory space ``space``."""
    token = _COUNTED_SPACE.set(space)
    try:
        yield
    finally:
        _COUNTED_SPACE.reset(token)


def counted_space() -> int:
    """The memory space ``xla_shape_size`` counts now (HBM outside a ``counting_space`` block)."""
    return _COUNTED_SPACE.get()


def space_label(space: int) -> str:
    """How a report names a memory space's bytes: ``hbm`` for space 0 (the HBM figure),
    else as the memory report names it (``vmem``, ``host``, ``S(2)``)."""
    return "hbm" if space == HBM_MEMORY_SPACE else memory_space_name(space)


def spaces_of(shapes: Sequence[Shape | None]) -> set[int]:
    """The memory spaces the arrays of ``shapes`` (tuples: their leaves) live in."""
    return {
        memory_space(leaf)
        for shape in shapes
        if shape is not None
        for leaf in shape.leaves()
        if leaf.is_array
    }


def xla_shape_size(shape: Shape | None) -> int:
    """The bytes XLA's cost analysis charges for moving a value: an array's elements (not its
    tiling padding: the TPU compiler's per-op figures count ``u32[10,4]{0,1:T(4,128)}`` as 160
    bytes, not the 2 KiB its tiles occupy), and for a tuple only its pointer table (8 bytes per
    element, counted with HBM), not its leaves.  Only arrays of the counted memory space count
    (``counting_space``; HBM by default).  (What a buffer occupies, padding included, is
    ``array_bytes``.)
    """
    if shape is None:
        return 0
    space = _COUNTED_SPACE.get()
    if shape.is_tuple:
        return TUPLE_POINTER_BYTES * len(shape.tuple_shapes) if space == HBM_MEMORY_SPACE else 0
    if not shape.is_array or memory_space(shape) != space:
        return 0
    return logical_bytes(shape)


def padding_ratio(shape: Shape) -> float:
    """Stored bytes over the elements' own bytes (1.0 = no tiling waste; ``[3,5]`` in (2,2) tiles
    is 1.6).  A tuple: over all its arrays; an empty array: 1.0."""
    stored = sum(array_bytes(leaf) for leaf in shape.leaves() if leaf.is_array)
    needed = sum(logical_bytes(leaf) for leaf in shape.leaves() if leaf.is_array)
    return stored / needed if needed else 1.0

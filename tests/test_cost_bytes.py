"""Layout-aware array sizes: tiling padding, element size, packing, memory spaces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from profan.cost.bytes import (
    array_bytes,
    hbm_bytes,
    logical_bytes,
    padded_dims,
    padded_elements,
    padding_ratio,
)
from profan.hlo.model import Layout, Shape


def test_model_md_padding_example() -> None:
    # MODEL.md 3: f32[3,5]{1,0:T(2,2)} is stored as [4,6] (1.6x)
    shape = Shape("f32", (3, 5), layout=Layout((1, 0), tiles=((2, 2),)))
    assert padded_dims(shape) == (4, 6)
    assert array_bytes(shape) == 4 * 6 * 4
    assert array_bytes(shape) / logical_bytes(shape) == 1.6
    assert padding_ratio(shape) == 1.6


def test_minor_to_major_decides_which_dims_pad() -> None:
    # {0,1}: dim 0 is most minor, so the physical order is [5,3] -> padded [6,4]
    shape = Shape("f32", (3, 5), layout=Layout((0, 1), tiles=((2, 2),)))
    assert padded_dims(shape) == (6, 4)
    assert array_bytes(shape) == 96


def test_two_level_tiles_bf16() -> None:
    # bf16[32,32,8192]{2,1,0:T(8,128)(2,1)}: already multiples of (8,128): no padding
    shape = Shape("bf16", (32, 32, 8192), layout=Layout((2, 1, 0), tiles=((8, 128), (2, 1))))
    assert array_bytes(shape) == 32 * 32 * 8192 * 2
    # [3,100] pads to [8,128] per the first tile; the (2,1) tile divides it evenly
    small = Shape("bf16", (3, 100), layout=Layout((1, 0), tiles=((8, 128), (2, 1))))
    assert padded_elements(small) == 8 * 128


def test_scalar_with_rank_one_tile_occupies_a_whole_tile() -> None:
    scalar = Shape("f32", (), layout=Layout((), tiles=((128,),)))
    assert array_bytes(scalar) == 512


def test_element_size_and_sub_byte_packing() -> None:
    assert array_bytes(Shape("s4", (7,))) == 4  # 28 bits -> 4 bytes
    e8 = Shape("s4", (10,), layout=Layout((0,), element_size_bits=8))
    assert array_bytes(e8) == 10


def test_only_hbm_arrays_cost_hbm_bytes() -> None:
    vmem = Shape("bf16", (128, 128), layout=Layout((1, 0), memory_space=1))
    hbm = Shape("bf16", (128, 128), layout=Layout((1, 0)))
    assert hbm_bytes(vmem) == 0
    assert hbm_bytes(hbm) == 128 * 128 * 2
    both = Shape("tuple", tuple_shapes=(vmem, hbm))
    assert hbm_bytes(both) == 128 * 128 * 2


dims = st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=4)
tile_edge = st.sampled_from([1, 2, 4, 8, 128, 256])


@given(dims=dims, data=st.data())
def test_padding_never_shrinks_bytes(dims: list[int], data: st.DataObject) -> None:
    rank = len(dims)
    order = tuple(data.draw(st.permutations(range(rank))))
    tile_rank = data.draw(st.integers(min_value=1, max_value=rank + 1))
    first = tuple(data.draw(tile_edge) for _ in range(tile_rank))
    tiles = (first,)
    if data.draw(st.booleans()):
        tiles += ((2, 1),) if tile_rank >= 2 else ((2,),)
    dtype = data.draw(st.sampled_from(["f32", "bf16", "s8", "s4", "pred"]))
    shape = Shape(dtype, tuple(dims), layout=Layout(order, tiles=tiles))
    untiled = Shape(dtype, tuple(dims), layout=Layout(order))
    assert array_bytes(shape) >= array_bytes(untiled) == logical_bytes(shape)
    # and the padded size is a whole number of first-level tiles
    tile_elements = 1
    for edge in first:
        tile_elements *= edge
    assert padded_elements(shape) % tile_elements == 0

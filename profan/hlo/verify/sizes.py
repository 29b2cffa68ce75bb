"""Sizes, layouts and replica groups: dimensions beyond int64, arrays whose element or byte count
overflows it, a layout that is not a permutation of the dimensions, tuples nested too deep, and
replica groups naming more devices than profan accepts (counted from the text, never
expanded)."""

from __future__ import annotations

import math
import re

from profan.hlo.devices.reader import MAX_DEVICES
from profan.hlo.model import UNBOUNDED_DIM, Layout, Module, Shape
from profan.hlo.verify.problem import Problem, dims_text

INT64_MAX = (1 << 63) - 1
# Tuples nest a few levels in real modules (a while loop's state holding a tuple of tuples).
MAX_TUPLE_DEPTH = 64
# Devices replica groups may name: more than any machine built, few enough that the group lists
# profan expands (profan.hlo.devices) stay in memory.
MAX_GROUP_DEVICES = MAX_DEVICES


def _array_problem(shape: Shape) -> str | None:
    dynamic = shape.dynamic
    for index, size in enumerate(shape.dims):
        if size > INT64_MAX:
            return f"dimension {index} of {shape.dtype}{dims_text(shape.dims)} is beyond int64"
        if size < 0 and not (size == UNBOUNDED_DIM and index < len(dynamic) and dynamic[index]):
            return f"dimension {index} is negative ({size})"
    elements = 1
    for size in shape.dims:
        elements *= max(size, 0)
    if elements > INT64_MAX or elements * shape.element_bits > INT64_MAX * 8:
        return (
            f"{shape.dtype}{dims_text(shape.dims)} holds {elements:.3g} elements: its element "
            "or byte count is beyond int64"
        )
    layout = shape.layout
    if layout is not None:
        beyond = _layout_beyond_int64(layout)
        if beyond is not None:
            return f"layout of {shape.dtype}{dims_text(shape.dims)}: {beyond} is beyond int64"
    if layout is not None and sorted(layout.minor_to_major) != list(range(len(shape.dims))):
        return (
            f"layout minor_to_major {{{','.join(map(str, layout.minor_to_major))}}} is not a "
            f"permutation of the {len(shape.dims)} dimensions of "
            f"{shape.dtype}{dims_text(shape.dims)}"
        )
    return None


def _layout_beyond_int64(layout: Layout) -> int | None:
    """A number of the layout (XLA's are int64) beyond int64, or ``None``."""
    numbers = [*layout.minor_to_major, *(d for tile in layout.tiles for d in tile if d is not None)]
    numbers += (
        value
        for value in (
            layout.element_size_bits,
            layout.memory_space,
            layout.tail_padding_alignment,
            layout.dynamic_shape_metadata_prefix_bytes,
        )
        if value is not None
    )
    return next((n for n in numbers if n > INT64_MAX), None)


def shape_problem(shape: Shape) -> str | None:
    """What is wrong with one shape (every array inside a tuple, without recursion)."""
    pending = [(shape, 0)]
    while pending:
        found, depth = pending.pop()
        if found.tuple_shapes:  # a tuple, or a buffer b(shape)
            if depth >= MAX_TUPLE_DEPTH:
                return f"tuple shapes nest deeper than {MAX_TUPLE_DEPTH} levels"
            pending.extend((element, depth + 1) for element in found.tuple_shapes)
        elif found.is_array:
            problem = _array_problem(found)
            if problem is not None:
                return problem
    return None


def module_shape_problem(module: Module) -> Problem | None:
    checked: set[int] = set()  # shapes are shared between instructions: check each once
    for computation in module.computations:
        for instruction in computation.instructions:
            shapes = [instruction.shape]
            shapes += [operand.shape for operand in instruction.operands if operand.shape]
            for shape in shapes:
                if id(shape) in checked:
                    continue
                problem = shape_problem(shape)
                if problem is not None:
                    return Problem(computation.name, instruction.name, problem)
                checked.add(id(shape))
    return None


# ------------------------------------------------------------------------ replica groups

_IOTA_GROUPS = re.compile(r"\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")
_MESH_AXIS = re.compile(r"=\s*(\d+)")
_NUMBER = re.compile(r"\d+")
# More digits than any int64 has: never converted (Python refuses past 4,300 digits).
_LONG_NUMBER = re.compile(r"\d{20,}")


def group_devices(value: str) -> int | None:
    """Devices a ``replica_groups=`` value names, read from its text without expanding it:
    the largest id + 1 of explicit lists, groups x size of the iota form, the mesh's size."""
    text = value.strip()
    if text.startswith(("mesh", "@mesh")):
        close = text.find("]" if text.startswith("mesh") else ">")
        sizes = [int(n) for n in _MESH_AXIS.findall(text[: close if close > 0 else None])]
        return math.prod(sizes) if sizes else None
    iota = _IOTA_GROUPS.match(text)
    if iota is not None:
        return int(iota.group(1)) * int(iota.group(2))
    ids = _NUMBER.findall(strip_index_comments(text))
    return max(map(int, ids)) + 1 if ids else None


def strip_index_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text) if "/*" in text else text


def group_problem(module: Module) -> Problem | None:
    # XLA's parser takes groups beyond replica_count x num_partitions (its verifier compares
    # them only in some collective modes): the bound is profan's own.
    bound = MAX_GROUP_DEVICES
    for computation in module.computations:
        for instruction in computation.instructions:
            value = instruction.attributes.get("replica_groups")
            if value is None:
                continue
            long_number = _LONG_NUMBER.search(value)
            if long_number is not None:
                digits = len(long_number.group(0))
                reason = f"replica_groups hold a number of {digits} digits, beyond int64"
                return Problem(computation.name, instruction.name, reason, "replica_groups")
            devices = group_devices(value)
            if devices is not None and devices > bound:
                reason = (
                    f"replica_groups name {devices} devices, more than the {bound} profan "
                    "accepts in one module"
                )
                return Problem(computation.name, instruction.name, reason, "replica_groups")
    return None

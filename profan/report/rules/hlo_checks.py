"""What the rules ask of one HLO instruction: its matmul's sizes, whether it only changes a
layout, how much its tiles pad, whether it reads a weight, what makes two collectives the same.

Plain functions over ``profan.hlo`` objects, so each can be checked on real HLO directly.
"""

from __future__ import annotations

from dataclasses import dataclass

from profan.cost.bytes import logical_bytes, padding_ratio
from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.views import called_computations, int_list_attribute

_MOVE_ONLY = frozenset({"parameter", "copy", "transpose", "bitcast", "reshape", "tuple"})
_VIEW_OPCODES = frozenset({"bitcast", "reshape", "convert", "copy", "transpose"})


def _computation(module: Module | None, instr: Instruction) -> Computation | None:
    if module is None or instr.computation is None:
        return None
    try:
        return module.computation(instr.computation)
    except KeyError:
        return None


def operand_shape(module: Module | None, instr: Instruction, index: int) -> Shape | None:
    """The shape of operand ``index``: as printed on the line, else its producer's."""
    if index >= len(instr.operands):
        return None
    operand = instr.operands[index]
    if operand.shape is not None:
        return operand.shape
    computation = _computation(module, instr)
    found = computation.get(operand.name) if computation is not None else None
    return found.shape if found is not None else None


def shape_bytes(shape: Shape) -> int:
    """Bytes of every array leaf's elements (no layout padding)."""
    return sum(logical_bytes(leaf) for leaf in shape.leaves())


def find_dot(instr: Instruction, module: Module | None) -> tuple[Instruction, Module | None] | None:
    """The dot/convolution an op performs: itself, or the one inside a fusion it calls."""
    if instr.opcode in ("dot", "convolution"):
        return instr, module
    if instr.opcode != "fusion" or module is None:
        return None
    for name in called_computations(instr):
        try:
            computation = module.computation(name)
        except KeyError:
            continue
        for inner in computation.instructions:
            if inner.opcode in ("dot", "convolution"):
                return inner, module
    return None


@dataclass(frozen=True, slots=True)
class MatmulDims:
    batch: int
    m: int  # lhs non-contracting
    n: int  # rhs non-contracting
    k: int  # contracting
    dtype: str  # lhs element type


def matmul_dims(instr: Instruction, module: Module | None) -> MatmulDims | None:
    """Sizes of a dot: batch, lhs non-contracting (M), rhs non-contracting (N), contracting (K)."""
    if instr.opcode != "dot":
        return None
    lhs = operand_shape(module, instr, 0)
    rhs = operand_shape(module, instr, 1)
    if lhs is None or rhs is None or not lhs.is_array or not rhs.is_array:
        return None
    batch, m, n, k = matmul_sizes(lhs, rhs, dot_dimensions(instr))
    return MatmulDims(batch=batch, m=m, n=n, k=k, dtype=lhs.dtype)


# A dot's dimension numbers: lhs contracting, rhs contracting, lhs batch, rhs batch.
DotDimensions = tuple[list[int], list[int], list[int], list[int]]


def dot_dimensions(instr: Instruction) -> DotDimensions:
    """A ``dot``'s dimension numbers, as ``matmul_sizes`` takes them."""
    return (
        int_list_attribute(instr, "lhs_contracting_dims"),
        int_list_attribute(instr, "rhs_contracting_dims"),
        int_list_attribute(instr, "lhs_batch_dims"),
        int_list_attribute(instr, "rhs_batch_dims"),
    )


def matmul_sizes(lhs: Shape, rhs: Shape, dims: DotDimensions) -> tuple[int, int, int, int]:
    """(batch, M, N, K) of a matmul of ``lhs`` by ``rhs`` with these dimension numbers (a dot's,
    or a GEMM custom call's from its backend config): M the lhs's free dimensions, N the rhs's,
    K the contracting ones; a dimension past an operand's rank counts 1."""
    lhs_c, rhs_c, lhs_b, rhs_b = dims

    def product(shape: Shape, picked: list[int]) -> int:
        out = 1
        for d in picked:
            if d < len(shape.dims):
                out *= shape.dims[d]
        return out

    lhs_free = [d for d in range(lhs.rank) if d not in lhs_c and d not in lhs_b]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_c and d not in rhs_b]
    return product(lhs, lhs_b), product(lhs, lhs_free), product(rhs, rhs_free), product(lhs, lhs_c)


def _destination(instr: Instruction) -> Shape:
    """Where a copy writes: its output, or for ``copy-start`` the tuple's second element."""
    if instr.opcode == "copy-start" and instr.shape.is_tuple and len(instr.shape.tuple_shapes) > 1:
        return instr.shape.tuple_shapes[1]
    return instr.shape


def _changes_layout(source: Shape | None, destination: Shape) -> bool:
    if source is None or source.layout is None or destination.layout is None:
        return False
    if source.layout.memory_space != destination.layout.memory_space:
        return False  # a move between memories (host offload, prefetch), not a relayout
    return (source.layout.minor_to_major, source.layout.tiles) != (
        destination.layout.minor_to_major,
        destination.layout.tiles,
    )


def is_relayout(instr: Instruction, module: Module | None) -> bool:
    """A transpose, a copy that changes the layout, or a fusion that only does those."""
    if instr.opcode == "transpose":
        return True
    if instr.opcode in ("copy", "copy-start"):
        return _changes_layout(operand_shape(module, instr, 0), _destination(instr))
    if instr.opcode != "fusion" or module is None:
        return False
    called = called_computations(instr)
    for name in called:
        try:
            computation = module.computation(name)
        except KeyError:
            return False
        opcodes = {i.opcode for i in computation.instructions}
        if not opcodes <= _MOVE_ONLY:
            return False
        if not any(
            i.opcode == "transpose"
            or (i.opcode == "copy" and _changes_layout(operand_shape(module, i, 0), i.shape))
            for i in computation.instructions
        ):
            return False
    return bool(called)


def padding_of(instr: Instruction, module: Module | None) -> float:
    """Worst stored/logical ratio over the op's output and operands (tiled layouts)."""
    shapes = list(instr.shape.leaves())
    for index in range(len(instr.operands)):
        shape = operand_shape(module, instr, index)
        if shape is not None:
            shapes.extend(shape.leaves())
    return max((padding_ratio(s) for s in shapes if s.is_array), default=1.0)


def feeds_from_parameter(instr: Instruction, module: Module | None, depth: int = 6) -> bool:
    """Whether the op's first operand is (a reshaped/converted view of) a parameter: a weight."""
    computation = _computation(module, instr)
    current = instr
    for _ in range(depth):
        if computation is None or not current.operands:
            return False
        found = computation.get(current.operands[0].name)
        if found is None:
            return False
        if found.opcode == "parameter":
            return True
        if found.opcode not in _VIEW_OPCODES:
            return False
        current = found
    return False


def collective_identity(instr: Instruction) -> tuple[str, ...]:
    """What makes two collectives the same transfer: kind, operands, groups, dimensions."""
    return (
        instr.opcode,
        *instr.operand_names,
        instr.attributes.get("replica_groups", ""),
        instr.attributes.get("dimensions", ""),
        instr.attributes.get("source_target_pairs", ""),
        instr.computation or "",
    )

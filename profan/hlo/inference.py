"""The shapes XLA's parser infers when the text leaves an instruction's shape out.

XLA's HLO parser accepts a missing result shape for the opcodes in
``SHAPE_INFERABLE_OPCODES`` (hlo_parser.cc, ``CanInferShape``) and infers it with its shape
inference; any other opcode written without a shape is a syntax error (the parser raises it).
profan infers the same shapes from the operands and attributes.  When that is impossible (an
operand's own shape is unknown, a called computation is missing, an attribute is malformed) the
shape is ``UNKNOWN_SHAPE``: an unknown size that every cost built on it must report as unknown,
never a guess and never 0.
"""

from __future__ import annotations

from collections.abc import Callable

from profan.hlo.model import DTYPE_BITS, UNKNOWN_SHAPE, Instruction, Shape
from profan.hlo.views import (
    WindowDimension,
    convolution_dimensions,
    int_attribute,
    int_list_attribute,
    padding_config,
    window,
)


def _opcodes(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Opcodes whose shape XLA's parser infers when the text leaves it out.
SHAPE_INFERABLE_OPCODES = _opcodes(
    """abs acos acosh asin asinh add add-dependency after-all atan2 atanh batch-norm-grad
    batch-norm-inference batch-norm-training broadcast call ceil cholesky clamp
    count-leading-zeros compare complex concatenate conditional convolution copy cosine cosh
    opt-barrier divide domain dot erf exponential exponential-minus-one fft floor gather
    get-dimension-size set-dimension-size get-tuple-element imag is-finite log log-plus-one
    logistic and not or xor map maximum minimum multiply negate pad partition-id popcnt power
    ragged-dot real reduce remainder replica-id reverse round-nearest-afz round-nearest-even
    rsqrt scan scaled-dot scatter select shift-left shift-right-arithmetic shift-right-logical
    sign sine sinh sqrt cbrt reduce-window select-and-scatter sort subtract tan tanh transpose
    triangular-solve tuple while topk"""
)

# Ops whose result is their first operand's shape.
_FIRST_OPERAND = _opcodes(
    """acos acosh asin asinh atanh ceil cbrt cholesky count-leading-zeros copy cosine cosh domain
    erf exponential exponential-minus-one floor log log-plus-one logistic negate not opt-barrier
    popcnt reverse round-nearest-afz round-nearest-even rsqrt sign sine sinh sqrt tan tanh
    add-dependency while select-and-scatter"""
)
_BINARY = _opcodes(
    """add atan2 and divide maximum minimum multiply or power remainder shift-left
    shift-right-arithmetic shift-right-logical subtract xor"""
)
_REAL_OF_COMPLEX = {"c64": "f32", "c128": "f64"}
_COMPLEX_OF_REAL = {"f32": "c64", "f64": "c128"}

# computation name -> its root shape (None when the module has no such computation yet)
RootShapeOf = Callable[[str], Shape | None]


def _array(dtype: str, dims: tuple[int, ...] | list[int]) -> Shape:
    dims = tuple(dims)
    return Shape(dtype, dims, (False,) * len(dims))


def _retyped(shape: Shape, dtype: str) -> Shape:
    """``shape`` with another element type (its layout dropped: E(n) belongs to the old type)."""
    return Shape(dtype, shape.dims, shape.dynamic)


def _known(shape: Shape | None) -> bool:
    if shape is None or shape.dtype == "unknown":
        return False
    return all(_known(s) for s in shape.tuple_shapes) if shape.is_tuple else True


def _wider(lhs: Shape, rhs: Shape) -> str:
    return lhs.dtype if DTYPE_BITS.get(lhs.dtype, 0) >= DTYPE_BITS.get(rhs.dtype, 0) else rhs.dtype


def _dot(instruction: Instruction, lhs: Shape, rhs: Shape, rhs_excluded: list[int]) -> Shape:
    """Batch dims, then lhs free dims, then rhs free dims; the wider element type."""
    if not (lhs.is_array and rhs.is_array):
        return UNKNOWN_SHAPE
    lhs_batch = int_list_attribute(instruction, "lhs_batch_dims")
    rhs_batch = int_list_attribute(instruction, "rhs_batch_dims")
    lhs_contracting = int_list_attribute(instruction, "lhs_contracting_dims")
    rhs_contracting = int_list_attribute(instruction, "rhs_contracting_dims")
    lhs_skip = set(lhs_batch) | set(lhs_contracting)
    rhs_skip = set(rhs_batch) | set(rhs_contracting) | set(rhs_excluded)
    if max([*lhs_skip, -1]) >= lhs.rank or max([*rhs_skip, -1]) >= rhs.rank:
        return UNKNOWN_SHAPE
    dims = [lhs.dims[d] for d in lhs_batch]
    dims += [size for d, size in enumerate(lhs.dims) if d not in lhs_skip]
    dims += [size for d, size in enumerate(rhs.dims) if d not in rhs_skip]
    return _array(_wider(lhs, rhs), dims)


def _ragged_dot(instruction: Instruction, lhs: Shape, rhs: Shape, group_sizes: Shape) -> Shape:
    """A dot with the rhs group dim left out (ragged non-contracting or batch dims); a ragged
    contracting dim gives one result per group, so the group count leads the result."""
    out = _dot(instruction, lhs, rhs, int_list_attribute(instruction, "rhs_group_dims"))
    ragged = set(int_list_attribute(instruction, "lhs_ragged_dims"))
    if ragged & set(int_list_attribute(instruction, "lhs_contracting_dims")):
        if out.dtype == "unknown" or not group_sizes.dims:
            return UNKNOWN_SHAPE
        return _array(out.dtype, (group_sizes.dims[-1], *out.dims))
    return out


def _windowed(size: int, dim: WindowDimension) -> int:
    """Output positions of one windowed dimension (XLA's InferWindowOutputShape)."""
    padded = (size - 1) * dim.lhs_dilate + 1 if size > 0 else 0
    padded += dim.pad_low + dim.pad_high
    extent = (dim.size - 1) * dim.rhs_dilate + 1
    if padded < extent:
        return 0
    return (padded - extent) // dim.stride + 1


def _convolution(instruction: Instruction, lhs: Shape, rhs: Shape) -> Shape:
    labels = convolution_dimensions(instruction)
    if labels is None or not (lhs.is_array and rhs.is_array):
        return UNKNOWN_SHAPE
    dims = window(instruction)
    spatial = len(labels.input_spatial)
    if len(dims) != spatial or lhs.rank != spatial + 2 or rhs.rank != spatial + 2:
        return UNKNOWN_SHAPE
    batch_groups = int_attribute(instruction, "batch_group_count", 1) or 1
    out = [0] * (spatial + 2)
    out[labels.output_batch] = lhs.dims[labels.input_batch] // batch_groups
    out[labels.output_feature] = rhs.dims[labels.kernel_output_feature]
    for index, dim in enumerate(dims):
        position = labels.output_spatial[index]
        out[position] = _windowed(lhs.dims[labels.input_spatial[index]], dim)
    return _array(_wider(lhs, rhs), out)


def _reduce_window(instruction: Instruction, operands: list[Shape]) -> Shape:
    count = len(operands) // 2
    dims = window(instruction)
    results = []
    for value, init in zip(operands[:count], operands[count:], strict=True):
        if not value.is_array or len(dims) != value.rank:
            return UNKNOWN_SHAPE
        results.append(
            _array(init.dtype, [_windowed(s, d) for s, d in zip(value.dims, dims, strict=True)])
        )
    return results[0] if count == 1 else Shape("tuple", tuple_shapes=tuple(results))


def _reduce(instruction: Instruction, operands: list[Shape]) -> Shape:
    count = len(operands) // 2
    reduced = set(int_list_attribute(instruction, "dimensions"))
    results = []
    for value, init in zip(operands[:count], operands[count:], strict=True):
        if not value.is_array:
            return UNKNOWN_SHAPE
        results.append(
            _array(init.dtype, [s for d, s in enumerate(value.dims) if d not in reduced])
        )
    if not results:
        return UNKNOWN_SHAPE
    return results[0] if count == 1 else Shape("tuple", tuple_shapes=tuple(results))


def _gather(instruction: Instruction, operand: Shape, indices: Shape) -> Shape:
    offset_dims = int_list_attribute(instruction, "offset_dims")
    collapsed = set(int_list_attribute(instruction, "collapsed_slice_dims"))
    collapsed |= set(int_list_attribute(instruction, "operand_batching_dims"))
    slice_sizes = int_list_attribute(instruction, "slice_sizes")
    index_vector_dim = int_attribute(instruction, "index_vector_dim")
    if index_vector_dim is None or len(slice_sizes) != operand.rank:
        return UNKNOWN_SHAPE
    batch = [s for d, s in enumerate(indices.dims) if d != index_vector_dim]
    offsets = [s for d, s in enumerate(slice_sizes) if d not in collapsed]
    rank = len(batch) + len(offset_dims)
    if len(offsets) != len(offset_dims) or any(d >= rank for d in offset_dims):
        return UNKNOWN_SHAPE
    out, batch_iter, offset_iter = [], iter(batch), iter(offsets)
    for position in range(rank):
        out.append(next(offset_iter) if position in offset_dims else next(batch_iter))
    return _array(operand.dtype, out)


def _fft(instruction: Instruction, operand: Shape) -> Shape:
    kind = (instruction.attributes.get("fft_type") or "").strip()
    lengths = int_list_attribute(instruction, "fft_length")
    if kind in ("FFT", "IFFT"):
        return operand
    if not lengths or not operand.dims:
        return UNKNOWN_SHAPE
    dims = list(operand.dims)
    if kind == "RFFT" and operand.dtype in _COMPLEX_OF_REAL:
        dims[-1] = lengths[-1] // 2 + 1
        return _array(_COMPLEX_OF_REAL[operand.dtype], dims)
    if kind == "IRFFT" and operand.dtype in _REAL_OF_COMPLEX:
        dims[-1] = lengths[-1]
        return _array(_REAL_OF_COMPLEX[operand.dtype], dims)
    return UNKNOWN_SHAPE


def _scan(instruction: Instruction, operands: list[Shape], root_of: RootShapeOf) -> Shape:
    """As XLA's parser: the body's root, with the scanned dim put back on non-carried outputs."""
    body = _single_computation(instruction, "to_apply")
    root = root_of(body) if body else None
    carries = int_attribute(instruction, "num_carries")
    dims = int_list_attribute(instruction, "dimensions")
    if root is None or carries is None or len(dims) != 1 or len(operands) <= carries:
        return UNKNOWN_SHAPE
    scan_dim = dims[0]
    if scan_dim >= operands[0].rank:
        return UNKNOWN_SHAPE
    size = operands[0].dims[scan_dim]

    def stacked(shape: Shape) -> Shape:
        grown = list(shape.dims)
        grown.insert(scan_dim, size)
        return _array(shape.dtype, grown)

    if not root.is_tuple:
        return root if carries > 0 else stacked(root)
    elements = root.tuple_shapes
    return Shape(
        "tuple",
        tuple_shapes=tuple(
            stacked(s) if i + carries < len(elements) else s for i, s in enumerate(elements)
        ),
    )


def _single_computation(instruction: Instruction, key: str) -> str | None:
    value = instruction.attributes.get(key)
    return value.strip().lstrip("%") if value and not value.strip().startswith("{") else None


def _branch_names(instruction: Instruction) -> list[str]:
    value = instruction.attributes.get("branch_computations") or instruction.attributes.get(
        "true_computation"
    )
    if not value:
        return []
    return [name.strip().lstrip("%") for name in value.strip().strip("{}").split(",") if name]


def infer_shape(instruction: Instruction, operands: list[Shape], root_of: RootShapeOf) -> Shape:
    """The shape XLA's parser gives ``instruction`` when the text leaves it out, from its
    operands' shapes and attributes; ``UNKNOWN_SHAPE`` when it cannot be known."""
    opcode = instruction.opcode
    if opcode == "tuple":
        return Shape("tuple", tuple_shapes=tuple(operands))
    if opcode == "after-all":
        return Shape("token")
    if opcode in ("partition-id", "replica-id"):
        return _array("u32", ())
    if opcode in ("call", "map", "conditional"):
        name = (
            _branch_names(instruction)[:1]
            if opcode == "conditional"
            else [_single_computation(instruction, "to_apply")]
        )
        root = root_of(name[0]) if name and name[0] else None
        if root is None:
            return UNKNOWN_SHAPE
        if opcode != "map":
            return root
        return (
            _array(root.dtype, operands[0].dims)
            if operands and _known(operands[0])
            else UNKNOWN_SHAPE
        )
    if opcode == "scan":
        return (
            _scan(instruction, operands, root_of) if all(map(_known, operands)) else UNKNOWN_SHAPE
        )
    if not operands or not all(map(_known, operands)):
        return UNKNOWN_SHAPE
    first = operands[0]
    if opcode == "get-tuple-element":
        index = int_attribute(instruction, "index")
        if not first.is_tuple or index is None or not 0 <= index < len(first.tuple_shapes):
            return UNKNOWN_SHAPE
        return first.tuple_shapes[index]
    if opcode in _FIRST_OPERAND:
        return first
    if opcode in ("abs", "real", "imag"):
        return (
            _retyped(first, _REAL_OF_COMPLEX[first.dtype])
            if first.dtype in _REAL_OF_COMPLEX
            else first
        )
    if opcode == "is-finite":
        return _retyped(first, "pred")
    if opcode in _BINARY or opcode in ("compare", "complex"):
        if len(operands) != 2:
            return UNKNOWN_SHAPE
        lhs, rhs = operands
        shape = rhs if lhs.rank == 0 and rhs.rank > 0 else lhs
        if opcode == "compare":
            return _retyped(shape, "pred")
        if opcode == "complex":
            dtype = _COMPLEX_OF_REAL.get(lhs.dtype)
            return _retyped(shape, dtype) if dtype else UNKNOWN_SHAPE
        return shape if shape.dtype == lhs.dtype else _retyped(shape, lhs.dtype)
    if opcode in ("select", "clamp"):
        return operands[1] if len(operands) == 3 else UNKNOWN_SHAPE
    return _infer_structured(instruction, operands)


def _infer_structured(instruction: Instruction, operands: list[Shape]) -> Shape:
    """Ops whose result dims follow from attributes (broadcast, pad, dot, gather, …)."""
    opcode = instruction.opcode
    first = operands[0]
    if opcode == "broadcast":
        # XLA's parser infers with InferBroadcastShape(operand, dimensions): the listed sizes
        # are *prepended* to the operand's dims (for the scalar case, dimensions={} or none,
        # that is the scalar itself).
        return _array(first.dtype, (*int_list_attribute(instruction, "dimensions"), *first.dims))
    if opcode == "transpose":
        permutation = int_list_attribute(instruction, "dimensions")
        if sorted(permutation) != list(range(first.rank)):
            return UNKNOWN_SHAPE
        return _array(first.dtype, [first.dims[p] for p in permutation])
    if opcode == "concatenate":
        dims = int_list_attribute(instruction, "dimensions")
        if len(dims) != 1 or dims[0] >= first.rank:
            return UNKNOWN_SHAPE
        out = list(first.dims)
        out[dims[0]] = sum(s.dims[dims[0]] for s in operands)
        return _array(first.dtype, out)
    if opcode == "pad":
        config = padding_config(instruction)
        if config is None or len(config) != first.rank:
            return UNKNOWN_SHAPE
        return _array(
            first.dtype,
            [
                lo + hi + n + max(n - 1, 0) * mid
                for n, (lo, hi, mid) in zip(first.dims, config, strict=True)
            ],
        )
    if opcode == "dot" and len(operands) >= 2:
        return _dot(instruction, operands[0], operands[1], [])
    if opcode == "scaled-dot" and len(operands) >= 2:
        # operands (lhs, rhs, lhs_scale, rhs_scale), as every scaled-dot XLA prints them
        return _dot(instruction, operands[0], operands[1], [])
    if opcode == "ragged-dot" and len(operands) >= 3:
        return _ragged_dot(instruction, operands[0], operands[1], operands[2])
    if opcode == "convolution" and len(operands) == 2:
        return _convolution(instruction, operands[0], operands[1])
    if opcode == "reduce" and len(operands) % 2 == 0:
        return _reduce(instruction, operands)
    if opcode == "reduce-window" and len(operands) % 2 == 0:
        return _reduce_window(instruction, operands)
    if opcode == "gather" and len(operands) == 2:
        return _gather(instruction, operands[0], operands[1])
    if opcode == "fft":
        return _fft(instruction, first)
    if opcode == "sort":
        return first if len(operands) == 1 else Shape("tuple", tuple_shapes=tuple(operands))
    if opcode == "scatter" and len(operands) % 2 == 1:
        inputs = operands[: len(operands) // 2]
        return inputs[0] if len(inputs) == 1 else Shape("tuple", tuple_shapes=tuple(inputs))
    if opcode == "triangular-solve" and len(operands) == 2:
        return operands[1]
    if opcode == "batch-norm-inference":
        return first
    if opcode in ("batch-norm-training", "batch-norm-grad") and len(operands) >= 2:
        return Shape("tuple", tuple_shapes=(first, operands[1], operands[1]))
    if opcode == "get-dimension-size":
        return _array("s32", ())
    if opcode == "set-dimension-size":
        dims = int_list_attribute(instruction, "dimensions")
        if len(dims) != 1 or dims[0] >= first.rank:
            return UNKNOWN_SHAPE
        dynamic = list(first.dynamic or (False,) * first.rank)
        dynamic[dims[0]] = True
        return Shape(first.dtype, first.dims, tuple(dynamic))
    if opcode == "topk":
        k = int_attribute(instruction, "k")
        if k is None or not first.dims:
            return UNKNOWN_SHAPE
        top = (*first.dims[:-1], k)
        return Shape("tuple", tuple_shapes=(_array(first.dtype, top), _array("s32", top)))
    return UNKNOWN_SHAPE


def infer_missing_shapes(instructions: list[Instruction], root_of: RootShapeOf) -> None:
    """Give every instruction of one computation that the text printed without a shape the
    shape XLA infers (in order, so an inferred shape feeds later ones)."""
    shapes = {i.name: i.shape for i in instructions}
    for instruction in instructions:
        if instruction.shape is not UNKNOWN_SHAPE:
            continue
        operand_shapes = [
            operand.shape or shapes.get(operand.name, UNKNOWN_SHAPE)
            for operand in instruction.operands
        ]
        instruction.shape = infer_shape(instruction, operand_shapes, root_of)
        shapes[instruction.name] = instruction.shape


__all__ = [
    "SHAPE_INFERABLE_OPCODES",
    "UNKNOWN_SHAPE",
    "infer_missing_shapes",
    "infer_shape",
]

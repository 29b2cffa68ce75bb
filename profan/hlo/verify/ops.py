"""Shapes of the ops the cost model costs by shape: operand and result dimensions that XLA's shape
inference would refuse (dot, convolution, elementwise, broadcast, transpose, reshape,
concatenate, slice, dynamic-slice, dynamic-update-slice, reduce, pad, gather).  Only dimensions
are compared, never element types nor layouts; an unbounded dynamic dimension matches any
size."""

from __future__ import annotations

from collections.abc import Callable

from profan.hlo.inference import infer_shape
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.verify.problem import Problem, dims_text
from profan.hlo.views import (
    convolution_dimensions,
    int_attribute,
    int_list_attribute,
    slice_ranges,
    window,
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_UNARY = _words(
    """abs ceil cbrt cosine count-leading-zeros erf exponential exponential-minus-one floor imag
    is-finite log log-plus-one logistic negate not popcnt real reduce-precision
    round-nearest-afz round-nearest-even rsqrt sign sine sqrt tan tanh convert copy"""
)
_BINARY = _words(
    """add atan2 and compare complex divide maximum minimum multiply or power remainder
    shift-left shift-right-arithmetic shift-right-logical subtract xor"""
)


def _dims_match(found: tuple[int, ...], expected: tuple[int, ...] | list[int]) -> bool:
    """Same rank and sizes; an unbounded dynamic dimension matches any size."""
    if found == expected or found == tuple(expected):
        return True
    if len(found) != len(expected):
        return False
    return all(a == b or a < 0 or b < 0 for a, b in zip(found, expected, strict=True))


def _result(instruction: Instruction, expected: tuple[int, ...] | list[int]) -> str | None:
    if _dims_match(instruction.shape.dims, expected):
        return None
    return (
        f"{instruction.opcode} gives {dims_text(expected)} from its operands, "
        f"not the stated {dims_text(instruction.shape.dims)}"
    )


def _elementwise(instruction: Instruction, operands: list[Shape]) -> str | None:
    dims = instruction.shape.dims
    opcode = instruction.opcode
    for index, operand in enumerate(operands):
        # A scalar operand is broadcast (XLA's parser takes `add(f32[] c, f32[2] x)`).
        if operand.rank == 0:
            continue
        if not _dims_match(operand.dims, dims):
            return (
                f"operand {index} of {opcode} is {dims_text(operand.dims)}; an elementwise op "
                f"needs every operand the shape of its result {dims_text(dims)}"
            )
    return None


def _unique_in_range(dims: list[int], rank: int) -> bool:
    return len(set(dims)) == len(dims) and all(0 <= d < rank for d in dims)


def _dot(instruction: Instruction, operands: list[Shape]) -> str | None:
    if len(operands) != 2 or "sparsity" in instruction.attributes:
        return None  # a sparse dot's metadata operands: not modelled
    lhs, rhs = operands
    lhs_batch = int_list_attribute(instruction, "lhs_batch_dims")
    rhs_batch = int_list_attribute(instruction, "rhs_batch_dims")
    lhs_contracting = int_list_attribute(instruction, "lhs_contracting_dims")
    rhs_contracting = int_list_attribute(instruction, "rhs_contracting_dims")
    if not _unique_in_range(lhs_batch + lhs_contracting, lhs.rank):
        return f"lhs batch and contracting dims {lhs_batch + lhs_contracting} are not distinct "
    if not _unique_in_range(rhs_batch + rhs_contracting, rhs.rank):
        return f"rhs batch and contracting dims {rhs_batch + rhs_contracting} are not distinct "
    for kind, left, right in (
        ("batch", lhs_batch, rhs_batch),
        ("contracting", lhs_contracting, rhs_contracting),
    ):
        if len(left) != len(right):
            return f"{len(left)} lhs {kind} dims but {len(right)} rhs {kind} dims"
        left_sizes = [lhs.dims[d] for d in left]
        right_sizes = [rhs.dims[d] for d in right]
        if not _dims_match(tuple(left_sizes), right_sizes):
            return (
                f"lhs {kind} dims {left} have sizes {dims_text(left_sizes)}, rhs {kind} dims "
                f"{right} have sizes {dims_text(right_sizes)}: they must match"
            )
    return _inferred(instruction, operands)


def _inferred(instruction: Instruction, operands: list[Shape]) -> str | None:
    """The result against what shape inference gives (nothing when it cannot tell)."""
    inferred = infer_shape(instruction, operands, lambda name: None)
    if not inferred.is_array or not instruction.shape.is_array:
        return None
    return _result(instruction, inferred.dims)


def _convolution(instruction: Instruction, operands: list[Shape]) -> str | None:
    if len(operands) != 2:
        return None
    lhs, rhs = operands
    labels = convolution_dimensions(instruction)
    if labels is None:
        return f"dim_labels {instruction.attributes.get('dim_labels')!r} do not decode"
    spatial = len(labels.input_spatial)
    ranks = (lhs.rank, rhs.rank, instruction.shape.rank)
    if ranks != (spatial + 2,) * 3:
        return f"dim_labels name {spatial} spatial dims; input, kernel, result ranks are {ranks}"
    dims = window(instruction)
    if len(dims) != spatial and not (spatial == 0 and not dims):
        return f"the window has {len(dims)} dims, the dim_labels {spatial} spatial ones"
    for index, dim in enumerate(dims):
        if dim.size != rhs.dims[labels.kernel_spatial[index]] and rhs.dims[0] >= 0:
            return (
                f"window size {dim.size} of spatial dim {index} is not the kernel's "
                f"{rhs.dims[labels.kernel_spatial[index]]}"
            )
        if dim.stride < 1 or dim.lhs_dilate < 1 or dim.rhs_dilate < 1:
            return f"window dim {index} has a stride or dilation below 1"
    features = int_attribute(instruction, "feature_group_count", 1) or 1
    batches = int_attribute(instruction, "batch_group_count", 1) or 1
    input_features = lhs.dims[labels.input_feature]
    kernel_inputs = rhs.dims[labels.kernel_input_feature]
    kernel_outputs = rhs.dims[labels.kernel_output_feature]
    if features < 1 or batches < 1:
        return "feature_group_count and batch_group_count must be positive"
    if input_features >= 0 and kernel_inputs >= 0 and input_features != kernel_inputs * features:
        return (
            f"input features {input_features} != kernel input features {kernel_inputs} x "
            f"feature_group_count {features}"
        )
    if kernel_outputs >= 0 and (kernel_outputs % features or kernel_outputs % batches):
        return (
            f"kernel output features {kernel_outputs} are not a multiple of the group counts "
            f"({features}, {batches})"
        )
    if lhs.dims[labels.input_batch] >= 0 and lhs.dims[labels.input_batch] % batches:
        return f"input batch {lhs.dims[labels.input_batch]} is not a multiple of {batches}"
    return _inferred(instruction, operands)


def _broadcast(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand, result = operands[0], instruction.shape
    mapped = int_list_attribute(instruction, "dimensions")
    if not mapped and operand.num_elements == 1:
        return None  # a single element, whatever its rank, fills the result (XLA's parser too)
    if len(mapped) != operand.rank or not _unique_in_range(mapped, result.rank):
        return (
            f"broadcast dimensions {mapped} must name {operand.rank} distinct dims of the "
            f"rank-{result.rank} result"
        )
    for index, target in enumerate(mapped):
        if not _dims_match((operand.dims[index],), (result.dims[target],)):
            return (
                f"operand dim {index} (size {operand.dims[index]}) maps to result dim {target} "
                f"(size {result.dims[target]}): they must match"
            )
    return None


def _transpose(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand = operands[0]
    permutation = int_list_attribute(instruction, "dimensions")
    if sorted(permutation) != list(range(operand.rank)):
        return f"dimensions {permutation} are not a permutation of {operand.rank} dims"
    return _result(instruction, [operand.dims[p] for p in permutation])


def _reshape(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand, result = operands[0], instruction.shape
    if any(d < 0 for d in operand.dims + result.dims) or any(operand.dynamic + result.dynamic):
        return None
    if operand.num_elements != result.num_elements:
        return (
            f"reshape of {dims_text(operand.dims)} ({operand.num_elements} elements) to "
            f"{dims_text(result.dims)} ({result.num_elements} elements)"
        )
    return None


def _concatenate(instruction: Instruction, operands: list[Shape]) -> str | None:
    axis = int_list_attribute(instruction, "dimensions")
    first = operands[0]
    if len(axis) != 1 or not 0 <= axis[0] < first.rank:
        return f"dimensions {axis} must name one dim of the rank-{first.rank} operands"
    for index, operand in enumerate(operands):
        others = [s for d, s in enumerate(operand.dims) if d != axis[0]]
        if operand.rank != first.rank or not _dims_match(
            tuple(others), [s for d, s in enumerate(first.dims) if d != axis[0]]
        ):
            return (
                f"operand {index} {dims_text(operand.dims)} differs from operand 0 off dim {axis}"
            )
    expected = list(first.dims)
    sizes = [operand.dims[axis[0]] for operand in operands]
    expected[axis[0]] = -1 if min(sizes) < 0 else sum(sizes)
    return _result(instruction, expected)


def _slice(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand = operands[0]
    ranges = slice_ranges(instruction)
    if len(ranges) != operand.rank:
        return f"slice gives {len(ranges)} ranges for a rank-{operand.rank} operand"
    expected = []
    for index, (start, limit, stride) in enumerate(ranges):
        size = operand.dims[index]
        if stride < 1 or start < 0 or start > limit or (size >= 0 and limit > size):
            return f"slice [{start}:{limit}:{stride}] of dim {index} (size {size}) is out of range"
        expected.append(-(-(limit - start) // stride))
    return _result(instruction, expected)


def _dynamic_slice(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand = operands[0]
    sizes = int_list_attribute(instruction, "dynamic_slice_sizes")
    if len(sizes) != operand.rank:
        return f"dynamic_slice_sizes {sizes} for a rank-{operand.rank} operand"
    for index, size in enumerate(sizes):
        if size < 0 or (operand.dims[index] >= 0 and size > operand.dims[index]):
            return f"slice size {size} of dim {index} exceeds the operand's {operand.dims[index]}"
    # XLA's parser takes a result that leaves out slice dims of size 1 (s32[] of sizes={1}).
    if [s for s in sizes if s != 1] == [d for d in instruction.shape.dims if d != 1]:
        return None
    return _result(instruction, sizes)


def _dynamic_update_slice(instruction: Instruction, operands: list[Shape]) -> str | None:
    operand, update = operands[0], operands[1] if len(operands) > 1 else None
    if update is None:
        return None
    if update.rank != operand.rank or any(
        0 <= o < u for o, u in zip(operand.dims, update.dims, strict=True)
    ):
        return f"update {dims_text(update.dims)} does not fit in operand {dims_text(operand.dims)}"
    return _result(instruction, operand.dims)


def _reduce(instruction: Instruction, operands: list[Shape]) -> str | None:
    if len(operands) % 2:
        return f"reduce takes inputs and as many init values, not {len(operands)} operands"
    inputs = operands[: len(operands) // 2]
    reduced = int_list_attribute(instruction, "dimensions")
    if not _unique_in_range(reduced, inputs[0].rank):
        return f"reduced dimensions {reduced} are not distinct dims of rank {inputs[0].rank}"
    for index, shape in enumerate(inputs):
        if not _dims_match(shape.dims, inputs[0].dims):
            return f"reduce input {index} {dims_text(shape.dims)} differs from input 0"
    expected = [s for d, s in enumerate(inputs[0].dims) if d not in reduced]
    results = instruction.shape.tuple_shapes if instruction.shape.is_tuple else (instruction.shape,)
    for result in results:
        if result.is_array and not _dims_match(result.dims, expected):
            return (
                f"reduce gives {dims_text(expected)} from its operands, not the stated "
                f"{dims_text(result.dims)}"
            )
    return None


def _gather(instruction: Instruction, operands: list[Shape]) -> str | None:
    if len(operands) != 2:
        return None
    operand = operands[0]
    sizes = int_list_attribute(instruction, "slice_sizes")
    if len(sizes) != operand.rank:
        return f"slice_sizes {sizes} for a rank-{operand.rank} operand"
    for index, size in enumerate(sizes):
        if size < 0 or (operand.dims[index] >= 0 and size > operand.dims[index]):
            return f"slice size {size} of dim {index} exceeds the operand's {operand.dims[index]}"
    return _inferred(instruction, operands)


_Check = Callable[[Instruction, list[Shape]], "str | None"]
_OP_CHECKS: dict[str, _Check] = {
    "dot": _dot,
    "convolution": _convolution,
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "concatenate": _concatenate,
    "slice": _slice,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "reduce": _reduce,
    "pad": _inferred,
    "gather": _gather,
    **dict.fromkeys(_UNARY | _BINARY | {"select", "clamp"}, _elementwise),
}


def op_problem(module: Module) -> Problem | None:
    for computation in module.computations:
        shapes: dict[str, Shape] | None = None
        for instruction in computation.instructions:
            check = _OP_CHECKS.get(instruction.opcode)
            if check is None or not instruction.operands:
                continue
            if shapes is None:
                shapes = {i.name: i.shape for i in computation.instructions}
            operands = []
            for operand in instruction.operands:
                shape = operand.shape or shapes.get(operand.name)
                if shape is None or not shape.is_array:
                    break
                operands.append(shape)
            else:
                if check is _elementwise and all(
                    shape.dims == instruction.shape.dims or not shape.dims for shape in operands
                ):
                    continue  # the common case, without a call
                if instruction.shape.is_array or instruction.opcode == "reduce":
                    problem = check(instruction, operands)
                    if problem is not None:
                        return Problem(computation.name, instruction.name, problem)
    return None

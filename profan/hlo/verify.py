"""HLO checked the way XLA's verifier checks it, for what profan's cost model relies on.

XLA's parser runs its verifier (``hlo_verifier.cc``, shape inference in ``shape_inference.cc``)
on every module it reads; a module it rejects never runs and has no cost.  profan costs ops by
their shapes, so a module whose shapes contradict each other would be given numbers that mean
nothing (a dot whose contracting sizes differ still gets FLOPs).  ``verify_module`` rejects:

* shapes: dimensions outside int64, arrays whose element or byte count overflows int64, a layout
  whose ``minor_to_major`` is not a permutation of the dimensions, tuples nested deeper than
  ``MAX_TUPLE_DEPTH`` (nothing real comes near; deeper ones exhaust Python's stack downstream);
* graphs: an instruction that depends on itself through its operands or control predecessors;
  a computation that calls itself (directly or not), or any call into the entry computation;
* ops the cost model costs by shape (``_OP_CHECKS``): operand and result dimensions that XLA's
  shape inference would refuse (dot, convolution, elementwise, broadcast, transpose, reshape,
  concatenate, slice, dynamic-slice, dynamic-update-slice, reduce, pad, gather);
* replica groups naming more than ``MAX_GROUP_DEVICES`` devices: counted from the text, never
  expanded.  (Not bounded by ``replica_count`` x ``num_partitions``: XLA's parser accepts
  groups beyond it, and its verifier compares them only in some collective modes.)

Only dimensions are compared, never element types (XLA allows mixed precision) nor layouts; an
unbounded dynamic dimension matches any size.  The check is pure: ``first_problem`` returns the
first ``Problem`` in printed order; ``verify_module`` raises it as ``HloInvalidError`` placed
at the instruction's line and column when the text is given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from profan.errors import HloInvalidError
from profan.hlo.devices.reader import MAX_DEVICES
from profan.hlo.inference import infer_shape
from profan.hlo.model import UNBOUNDED_DIM, Computation, Instruction, Module, Shape
from profan.hlo.resolve import locate
from profan.hlo.views import (
    CALLED_COMPUTATION_ATTRIBUTES,
    called_computations,
    control_predecessors,
    convolution_dimensions,
    int_attribute,
    int_list_attribute,
    slice_ranges,
    window,
)

INT64_MAX = (1 << 63) - 1
# Tuples nest a few levels in real modules (a while loop's state holding a tuple of tuples).
MAX_TUPLE_DEPTH = 64
# Devices replica groups may name: more than any machine built, few enough that the group lists
# profan expands (profan.hlo.devices) stay in memory.
MAX_GROUP_DEVICES = MAX_DEVICES


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a module is invalid: where (computation, instruction, the operand or attribute
    name to point at) and what was expected."""

    computation: str
    instruction: str | None
    reason: str
    at: str | None = None

    def __str__(self) -> str:
        where = f"%{self.computation}"
        if self.instruction is not None:
            where += f", %{self.instruction}"
        return f"{where}: {self.reason}"


def verify_module(module: Module, *, text: str | None = None, file: str | None = None) -> None:
    """Raise ``HloInvalidError`` for the first problem ``first_problem`` finds; ``text`` (the
    module's HLO text) places it at a line and column."""
    problem = first_problem(module)
    if problem is None:
        return
    line = column = None
    if problem.instruction is not None:
        line, column = locate(text, problem.computation, problem.instruction, problem.at)
    raise HloInvalidError(
        str(problem),
        file=file,
        line=line,
        column=column,
        text=_line_text(text, line),
    )


def first_problem(module: Module) -> Problem | None:
    """The first thing XLA's verifier would reject in ``module`` (shapes first: the later
    checks compute with them), or ``None``."""
    return (
        _shape_problem(module)
        or _call_problem(module)
        or _cycle_problem(module)
        or _op_problem(module)
        or _group_problem(module)
    )


def _line_text(text: str | None, line: int | None) -> str:
    if not text or line is None:
        return ""
    lines = text.split("\n", line)
    shown = lines[line - 1].rstrip("\r") if line - 1 < len(lines) else ""
    return shown if len(shown) <= 300 else shown[:300] + "…"


# ------------------------------------------------------------------------------ shapes


def _array_problem(shape: Shape) -> str | None:
    dynamic = shape.dynamic
    for index, size in enumerate(shape.dims):
        if size > INT64_MAX:
            return f"dimension {index} of {shape.dtype}{_text(shape.dims)} is beyond int64"
        if size < 0 and not (size == UNBOUNDED_DIM and index < len(dynamic) and dynamic[index]):
            return f"dimension {index} is negative ({size})"
    elements = 1
    for size in shape.dims:
        elements *= max(size, 0)
    if elements > INT64_MAX or elements * shape.element_bits > INT64_MAX * 8:
        return (
            f"{shape.dtype}{_text(shape.dims)} holds {elements:.3g} elements: its element or "
            "byte count is beyond int64"
        )
    layout = shape.layout
    if layout is not None and sorted(layout.minor_to_major) != list(range(len(shape.dims))):
        return (
            f"layout minor_to_major {{{','.join(map(str, layout.minor_to_major))}}} is not a "
            f"permutation of the {len(shape.dims)} dimensions of {shape.dtype}{_text(shape.dims)}"
        )
    return None


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


def _shape_problem(module: Module) -> Problem | None:
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


# ------------------------------------------------------------------------------ graphs


_CALL_KEYS = frozenset(CALLED_COMPUTATION_ATTRIBUTES)


def _call_problem(module: Module) -> Problem | None:
    """A call into the entry computation, or a computation that reaches itself by calls."""
    names = {computation.name for computation in module.computations}
    entry = module.entry.name
    callees: dict[str, list[tuple[str, Instruction]]] = {}
    for computation in module.computations:
        found = callees[computation.name] = []
        for instruction in computation.instructions:
            if _CALL_KEYS.isdisjoint(instruction.attributes):
                continue
            for callee in called_computations(instruction):
                if callee == entry:
                    reason = f"calls the entry computation %{entry}"
                    return Problem(computation.name, instruction.name, reason, callee)
                if callee in names:
                    found.append((callee, instruction))
    # Depth-first over the call graph with an explicit stack: 1 = on the path, 2 = done.
    state: dict[str, int] = {}
    for root in callees:
        if root in state:
            continue
        state[root] = 1
        path: list[tuple[str, int]] = [(root, 0)]
        while path:
            caller, next_edge = path[-1]
            edges = callees[caller]
            if next_edge == len(edges):
                state[caller] = 2
                path.pop()
                continue
            path[-1] = (caller, next_edge + 1)
            callee, instruction = edges[next_edge]
            seen = state.get(callee)
            if seen == 1:
                reason = f"calls %{callee}, which calls back into %{caller}: recursion"
                if callee == caller:
                    reason = f"calls its own computation %{callee}: recursion"
                return Problem(caller, instruction.name, reason, callee)
            if seen is None:
                state[callee] = 1
                path.append((callee, 0))
    return None


def _dependencies(instruction: Instruction) -> list[str]:
    names = [operand.name for operand in instruction.operands]
    if "control-predecessors" in instruction.attributes:
        names += control_predecessors(instruction)
    return names


def _cycle_problem(module: Module) -> Problem | None:
    for computation in module.computations:
        problem = _computation_cycle(computation)
        if problem is not None:
            return problem
    return None


def _computation_cycle(computation: Computation) -> Problem | None:
    instructions = computation.instructions
    order = {instruction.name: index for index, instruction in enumerate(instructions)}
    # Printed in dependency order (nearly always): no cycle is possible.
    forward = False
    for index, instruction in enumerate(instructions):
        for name in _dependencies(instruction):
            if order.get(name, -1) >= index:
                forward = True
                break
        if forward:
            break
    if not forward:
        return None
    # Kahn's algorithm: what never becomes free of unplaced dependencies lies on or after a cycle.
    users: list[list[int]] = [[] for _ in instructions]
    waiting = [0] * len(instructions)
    for index, instruction in enumerate(instructions):
        for name in set(_dependencies(instruction)):
            source = order.get(name)
            if source is not None:
                users[source].append(index)
                waiting[index] += 1
    free = [index for index, count in enumerate(waiting) if count == 0]
    while free:
        for user in users[free.pop()]:
            waiting[user] -= 1
            if waiting[user] == 0:
                free.append(user)
    for index, instruction in enumerate(instructions):
        if waiting[index]:
            stuck = [n for n in _dependencies(instruction) if waiting[order.get(n, index)] > 0]
            at = stuck[0] if stuck else None
            reason = f"depends on itself through its operands (a cycle through %{at})"
            return Problem(computation.name, instruction.name, reason, at)
    return None


# --------------------------------------------------------------------------------- ops


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


def _text(dims: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join("?" if d < 0 else str(d) for d in dims) + "]"


def _result(instruction: Instruction, expected: tuple[int, ...] | list[int]) -> str | None:
    if _dims_match(instruction.shape.dims, expected):
        return None
    return (
        f"{instruction.opcode} gives {_text(expected)} from its operands, "
        f"not the stated {_text(instruction.shape.dims)}"
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
                f"operand {index} of {opcode} is {_text(operand.dims)}; an elementwise op needs "
                f"every operand the shape of its result {_text(dims)}"
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
                f"lhs {kind} dims {left} have sizes {_text(left_sizes)}, rhs {kind} dims "
                f"{right} have sizes {_text(right_sizes)}: they must match"
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
            f"reshape of {_text(operand.dims)} ({operand.num_elements} elements) to "
            f"{_text(result.dims)} ({result.num_elements} elements)"
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
            return f"operand {index} {_text(operand.dims)} differs from operand 0 off dim {axis}"
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
        return f"update {_text(update.dims)} does not fit in operand {_text(operand.dims)}"
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
            return f"reduce input {index} {_text(shape.dims)} differs from input 0"
    expected = [s for d, s in enumerate(inputs[0].dims) if d not in reduced]
    results = instruction.shape.tuple_shapes if instruction.shape.is_tuple else (instruction.shape,)
    for result in results:
        if result.is_array and not _dims_match(result.dims, expected):
            return (
                f"reduce gives {_text(expected)} from its operands, not the stated "
                f"{_text(result.dims)}"
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


def _op_problem(module: Module) -> Problem | None:
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


# ------------------------------------------------------------------------ replica groups

_IOTA_GROUPS = re.compile(r"\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")
_MESH_AXIS = re.compile(r"=\s*(\d+)")
_NUMBER = re.compile(r"\d+")


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


def _group_problem(module: Module) -> Problem | None:
    # XLA's parser takes groups beyond replica_count x num_partitions (its verifier compares
    # them only in some collective modes): the bound is profan's own.
    bound = MAX_GROUP_DEVICES
    for computation in module.computations:
        for instruction in computation.instructions:
            value = instruction.attributes.get("replica_groups")
            if value is None:
                continue
            devices = group_devices(value)
            if devices is not None and devices > bound:
                reason = (
                    f"replica_groups name {devices} devices, more than the {bound} profan "
                    "accepts in one module"
                )
                return Problem(computation.name, instruction.name, reason, "replica_groups")
    return None

"""Per-instruction cost: FLOPs, transcendentals, HBM bytes and interconnect bytes of one HLO op.

``estimate(instruction, module=None) -> OpCost``.  The counting rules follow XLA's
``HloCostAnalysis`` (so module totals agree with ``compiled.cost_analysis()``), with two TPU
refinements the TPU compiler's own per-op figures show: arrays outside HBM (``S(n)``, n != 0) cost
no HBM bytes, and tiled layouts cost their padded size.

Without ``module`` (a single pasted line) operand shapes come from the text when it printed them;
a fusion's FLOPs are then ``None`` (its body is unknown) — never a guess.

Async pairs (``*-start``/``*-done``, ``async-start``/``async-done``, ``copy-start``/``copy-done``):
bytes and FLOPs sit where XLA's cost analysis puts them — on the start for collectives — except
host copies, where the TPU compiler charges the moved array to both halves (profan agrees, so
per-op figures match a trace, and ``module_totals`` sums both halves as the compiler does).
Both halves carry ``async_role`` and, for collectives, the ``CollectiveInfo``:
``profan.roofline`` times the pair on the done, whose measured duration is the wait for the
transfer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from profan.cost import bytes as sizes
from profan.cost.collectives import KINDS as COLLECTIVE_KINDS
from profan.cost.flops import (
    FMA_FLOPS,
    convolution_flops,
    dot_flops,
    int_list,
    parse_dim_labels,
    parse_window,
)
from profan.hlo.model import Computation, Instruction, Module, Shape

TRANSCENDENTAL_OPCODES = frozenset(
    {
        "acosh", "erf", "exponential", "exp", "log", "logistic", "power", "sqrt", "cbrt",
        "rsqrt", "tanh",
        "sine", "cosine", "exponential-minus-one", "log-plus-one", "atan2", "tan",
    }
)  # fmt: skip
ELEMENTWISE_OPCODES = TRANSCENDENTAL_OPCODES | frozenset(
    {
        "abs", "add", "and", "ceil", "clz", "complex", "divide", "floor", "imag", "is-finite",
        "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "real", "remainder",
        "round-nearest-afz", "round-nearest-even", "shift-left", "shift-right-arithmetic",
        "shift-right-logical", "sign", "subtract", "xor", "compare", "clamp", "select", "convert",
        "reduce-precision", "stochastic-convert", "bitcast-convert",
    }
)  # fmt: skip
# Ops that move no data and do no math (XLA gives them zero bytes).
FREE_OPCODES = frozenset(
    {"parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency",
     "domain"}
)  # fmt: skip
HOST_MEMORY_SPACE = 5  # XLA's memory space for pinned host buffers
MATMUL_CUSTOM_CALL = re.compile(r"cublas|gemm|matmul|hipblaslt|rocblas", re.IGNORECASE)
# Custom calls that only annotate the program (sharding, placement, markers): no work of their own.
ANNOTATION_CUSTOM_CALL = re.compile(
    r"^(Sharding|SPMDFullToShardShape|SPMDShardToFullShape|annotate_device_placement|"
    r"xla\.sdy\..*|MoveToDevice|MoveToHost|Pin|Unpin|AllocateBuffer|ShardBarrierFrom|"
    r"ShardBarrierTo|LayoutConstraint|__xla_internal_call_marker_.*|InspectSharding)$"
)
CONV_CUSTOM_CALL = re.compile(r"cudnn\$conv|miopen.*conv|\$conv", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    """What the interconnect model needs to know about a collective."""

    kind: str  # one of profan.cost.collectives.KINDS
    full_bytes: int  # V: the full array along the collective's axis
    group_size: int
    groups: list[list[int]] = field(default_factory=list)
    n_axes: int = 1
    axis_sizes: tuple[int, ...] = ()


@dataclass(slots=True)
class OpCost:
    """What one execution of an instruction costs (per device)."""

    flops: float | None
    transcendentals: float | None
    hbm_bytes_read: float
    hbm_bytes_written: float
    ici_bytes: float = 0.0
    dtype: str | None = None  # element type of the math (drives the peak FLOP/s used)
    derivation: list[str] = field(default_factory=list)
    collective: CollectiveInfo | None = None
    async_role: str | None = None  # "start" | "done" for async pairs
    unknown: bool = False  # a custom call profan cannot cost: flagged, not guessed
    host_transfer: bool = False  # moves data between host memory (S(5)) and the device
    transfer_direction: str | None = None  # "to-device" | "to-host" for host transfers
    # HBM bytes the roofline should use when they differ from XLA's accounting (in-place
    # scatters); ``None`` = ``hbm_bytes``.
    roofline_hbm_bytes: float | None = None
    # The line left operands out (XProf's ``fusion(...)`` / ``...(+N)``): bytes read count only
    # the operands shown, so they are a lower bound, not the op's traffic.
    hbm_bytes_read_is_lower_bound: bool = False

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_bytes_read + self.hbm_bytes_written

    def add(self, other: OpCost) -> None:
        """Accumulate FLOPs/transcendentals/bytes of ``other`` (``None`` is contagious)."""
        self.flops = None if self.flops is None or other.flops is None else self.flops + other.flops
        if self.transcendentals is None or other.transcendentals is None:
            self.transcendentals = None
        else:
            self.transcendentals += other.transcendentals
        self.hbm_bytes_read += other.hbm_bytes_read
        self.hbm_bytes_written += other.hbm_bytes_written
        self.ici_bytes += other.ici_bytes
        self.unknown = self.unknown or other.unknown


# ---------------------------------------------------------------------------------- helpers


class _Context:
    """Name lookups for an instruction: its computation, operand shapes, users, callees."""

    def __init__(self, module: Module | None) -> None:
        self.module = module
        self._users: dict[str, dict[str, list[Instruction]]] = {}

    def computation_of(self, instruction: Instruction) -> Computation | None:
        if self.module is None or instruction.computation is None:
            return None
        try:
            return self.module.computation(instruction.computation)
        except KeyError:
            return None

    def callee(self, name: str) -> Computation | None:
        if self.module is None:
            return None
        try:
            return self.module.computation(name)
        except KeyError:
            return None

    def operand(self, instruction: Instruction, index: int) -> Instruction | None:
        computation = self.computation_of(instruction)
        if computation is None or index >= len(instruction.operands):
            return None
        return computation.get(instruction.operands[index].name)

    def operand_shape(self, instruction: Instruction, index: int) -> Shape | None:
        if index >= len(instruction.operands):
            return None
        operand = instruction.operands[index]
        if operand.shape is not None:
            return operand.shape
        found = self.operand(instruction, index)
        return found.shape if found is not None else None

    def operand_shapes(self, instruction: Instruction) -> list[Shape | None]:
        return [self.operand_shape(instruction, i) for i in range(len(instruction.operands))]

    def users(self, instruction: Instruction) -> list[Instruction]:
        computation = self.computation_of(instruction)
        if computation is None:
            return []
        table = self._users.get(computation.name)
        if table is None:
            table = {}
            for candidate in computation.instructions:
                for name in dict.fromkeys(candidate.operand_names):
                    table.setdefault(name.lstrip("%"), []).append(candidate)
            self._users[computation.name] = table
        return table.get(instruction.name, [])


def called_computations(instruction: Instruction) -> list[str]:
    """Names in ``calls=``, ``to_apply=``, ``body=``/``condition=``, branch lists, … ."""
    view = getattr(type(instruction), "called_computations", None)
    if view is not None:
        try:
            return list(instruction.called_computations)  # type: ignore[attr-defined]
        except Exception:  # the parser's view failed: fall back to reading the attributes
            pass
    names: list[str] = []
    for key in ("calls", "to_apply", "condition", "body", "true_computation",
                "false_computation", "branch_computations", "select", "scatter"):  # fmt: skip
        value = instruction.attributes.get(key)
        if value:
            names.extend(n.lstrip("%") for n in re.findall(r"%?[\w.\-]+", value))
    return names


def _backend_config(instruction: Instruction) -> dict | None:
    text = instruction.attributes.get("backend_config")
    if not text:
        return None
    text = text.strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].encode().decode("unicode_escape")
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _array(shape: Shape | None) -> Shape | None:
    """The first array leaf of a shape (tuples: their first array)."""
    if shape is None:
        return None
    for leaf in shape.leaves():
        if leaf.is_array:
            return leaf
    return None


def _elements(shape: Shape | None) -> int:
    return shape.num_elements if shape is not None else 0


def _size(shape: Shape | None) -> int:
    return sizes.xla_shape_size(shape)


def _base_opcode(opcode: str) -> str:
    for suffix in ("-start", "-done", "-update"):
        if opcode.endswith(suffix):
            return opcode[: -len(suffix)]
    return opcode


# ---------------------------------------------------------------------------------- estimate


def estimate(instruction: Instruction, module: Module | None = None) -> OpCost:
    """FLOPs, transcendentals, HBM and interconnect bytes of one execution of ``instruction``."""
    cost = _estimate(instruction, _Context(module))
    if instruction.operands_elided:
        cost.hbm_bytes_read_is_lower_bound = True
        hidden = instruction.elided_operand_count
        cost.derivation.append(
            "operands not shown in the text"
            + (f" ({hidden} left out)" if hidden else "")
            + ": bytes read count only the operands shown (a lower bound)"
        )
    return cost


def _default_bytes(instruction: Instruction, ctx: _Context) -> tuple[float, float]:
    """Operands read + output written.  A tuple-shaped result (multi-operand sort, a tuple
    all-to-all) is charged its arrays, as XLA 0.10 does; only ``tuple`` itself is charged its
    pointer table (handled by its caller)."""
    read = sum(_size(shape) for shape in ctx.operand_shapes(instruction))
    shape = instruction.shape
    if shape.is_tuple:
        written = sum(_size(leaf) for leaf in shape.leaves() if leaf.is_array)
    else:
        written = _size(shape)
    return float(read), float(written)


def _computation_cost(computation: Computation, ctx: _Context) -> OpCost:
    total = OpCost(0.0, 0.0, 0.0, 0.0)
    for instruction in computation.instructions:
        total.add(_estimate(instruction, ctx))
    return total


def _scalar_computation_flops(name: str | None, ctx: _Context) -> tuple[float, float, bool]:
    """FLOPs and transcendentals of one application of a reducer / combiner computation."""
    computation = ctx.callee(name) if name else None
    if computation is None:
        return 1.0, 0.0, False  # unknown reducer: one op per application, flagged by caller
    cost = _computation_cost(computation, ctx)
    return cost.flops or 0.0, cost.transcendentals or 0.0, True


def _estimate(instruction: Instruction, ctx: _Context) -> OpCost:
    try:
        return _estimate_unchecked(instruction, ctx)
    except (IndexError, KeyError, ValueError, ZeroDivisionError) as error:
        # Shapes or attributes that do not fit the op (e.g. a shape the text left out, vectorised
        # cuDNN dim labels): flag the op as not costable rather than guess or crash.
        out = _array(instruction.shape)
        cost = OpCost(None, None, 0.0, 0.0, dtype=out.dtype if out is not None else None)
        cost.unknown = True
        cost.derivation.append(
            f"{instruction.opcode}: cannot cost ({type(error).__name__}: {error}); "
            "shapes or attributes do not fit the op"
        )
        return cost


def _estimate_unchecked(instruction: Instruction, ctx: _Context) -> OpCost:
    opcode = instruction.opcode
    shape = instruction.shape
    out_array = _array(shape)
    dtype = out_array.dtype if out_array is not None else None
    cost = OpCost(0.0, 0.0, 0.0, 0.0, dtype=dtype)
    note = cost.derivation.append

    if opcode in FREE_OPCODES:
        note(f"{opcode}: no data moved, no math")
        return cost
    read, written = _default_bytes(instruction, ctx)
    cost.hbm_bytes_read, cost.hbm_bytes_written = read, written

    if opcode in ELEMENTWISE_OPCODES:
        count = float(_elements(shape))
        if opcode in TRANSCENDENTAL_OPCODES:
            cost.transcendentals = count
            note(f"{opcode}: 1 transcendental per output element ({count:.0f})")
        else:
            cost.flops = count
            note(f"{opcode}: 1 FLOP per output element ({count:.0f})")
        return cost

    if opcode == "dot":
        lhs = ctx.operand_shape(instruction, 0)
        if lhs is None:
            cost.flops = None
            note("dot: operand shapes unknown (pass the module)")
            return cost
        lhs_dtype = _array(lhs)
        cost.dtype = lhs_dtype.dtype if lhs_dtype is not None else dtype
        contracting = int_list(instruction.attributes.get("lhs_contracting_dims"))
        cost.flops = float(dot_flops(lhs, shape, contracting))
        note(
            f"dot: 2 x {_elements(shape)} output elements x contracting "
            f"{[lhs.dims[d] for d in contracting]}"
        )
        return cost

    if opcode == "convolution":
        return _convolution(instruction, ctx, cost)

    if opcode == "tuple":
        cost.hbm_bytes_read = 0.0
        cost.hbm_bytes_written = float(_size(shape))
        note("tuple: only its pointer table is written")
        return cost
    if opcode == "slice":
        out = float(_size(shape))
        cost.hbm_bytes_read, cost.hbm_bytes_written = out, out
        note("slice: reads only the sliced part")
        return cost
    if opcode == "dynamic-slice":
        out = float(_size(shape))
        cost.hbm_bytes_read = out + _size(ctx.operand_shape(instruction, 1))
        cost.hbm_bytes_written = out
        note("dynamic-slice: reads the slice and its start index")
        return cost
    if opcode == "dynamic-update-slice":
        update = float(_size(ctx.operand_shape(instruction, 1)))
        cost.hbm_bytes_read = update + _size(ctx.operand_shape(instruction, 2))
        cost.hbm_bytes_written = update
        note("dynamic-update-slice: operand 0 is updated in place; only the update moves")
        return cost
    if opcode == "gather":
        out = float(_size(shape))
        cost.hbm_bytes_read = out + _size(ctx.operand_shape(instruction, 1))
        cost.hbm_bytes_written = out
        note("gather: reads as much as it writes, plus the indices")
        return cost
    if opcode == "scatter":
        return _scatter(instruction, ctx, cost)
    if opcode in ("reduce", "reduce-window", "map", "select-and-scatter"):
        return _reduction(instruction, ctx, cost)
    if opcode == "sort":
        count = _elements(ctx.operand_shape(instruction, 0))
        cost.flops = float(count * math.ceil(math.log2(count))) if count > 1 else 0.0
        note("sort: n log2 n comparisons")
        return cost
    if opcode in ("rng", "rng-bit-generator"):
        cost.transcendentals = float(sum(leaf.num_elements for leaf in shape.leaves()))
        note(f"{opcode}: one transcendental per generated element (XLA's convention)")
        return cost
    if opcode == "fft":
        lengths = int_list(instruction.attributes.get("fft_length"))
        factor = 1
        for length in lengths:
            factor *= max(int(math.log2(length)), 0) if length > 0 else 0
        real = _array(ctx.operand_shape(instruction, 0))
        cost.flops = float(2 * 4 * factor * _elements(real))
        note("fft: 8 x n log2 n")
        return cost
    if opcode == "fusion":
        return _fusion(instruction, ctx, cost)
    if opcode == "custom-call":
        return _custom_call(instruction, ctx, cost)
    if opcode in ("while", "call", "conditional"):
        return _control_flow(instruction, ctx, cost)
    if opcode in ("async-start", "async-done"):
        return _async_wrapper(instruction, ctx, cost)
    if opcode in ("copy-start", "copy-done"):
        return _async_copy(instruction, ctx, cost)
    base = _base_opcode(opcode)
    if base in COLLECTIVE_KINDS:
        return _collective(instruction, ctx, cost, base)
    if opcode == "transpose" and _is_layout_bitcast(instruction, ctx):
        cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
        note("transpose: only relabels dims (a bitcast)")
        return cost
    note(f"{opcode}: data movement, operands read and output written once")
    return cost


def _is_layout_bitcast(instruction: Instruction, ctx: _Context) -> bool:
    operand = ctx.operand_shape(instruction, 0)
    if operand is None or operand.layout is None or instruction.shape.layout is None:
        return False
    return sizes.physical_dims(operand) == sizes.physical_dims(instruction.shape)


def _convolution(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    lhs = ctx.operand_shape(instruction, 0)
    rhs = ctx.operand_shape(instruction, 1)
    labels = instruction.attributes.get("dim_labels")
    if lhs is None or rhs is None or not labels:
        cost.flops = None
        cost.derivation.append("convolution: operand shapes or dim_labels unknown")
        return cost
    lhs_array = _array(lhs)
    cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
    window = parse_window(instruction.attributes.get("window"))
    cost.flops = float(
        convolution_flops(
            lhs,
            rhs,
            instruction.shape,
            window=window,
            dims=parse_dim_labels(labels),
            feature_group_count=int(instruction.attributes.get("feature_group_count", "1")),
            batch_group_count=int(instruction.attributes.get("batch_group_count", "1")),
        )
    )
    cost.derivation.append("convolution: 2 x features x batch x valid kernel positions")
    return cost


def _reduction(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    opcode = instruction.opcode
    names = called_computations(instruction)
    if opcode == "select-and-scatter":
        select = instruction.attributes.get("select", "").lstrip("%") or None
        scatter = instruction.attributes.get("scatter", "").lstrip("%") or None
        source = _elements(ctx.operand_shape(instruction, 1))
        window = parse_window(instruction.attributes.get("window"))
        taps = math.prod(d.size for d in window) if window else 1
        s_flops, s_trans, _ = _scalar_computation_flops(select, ctx)
        c_flops, c_trans, _ = _scalar_computation_flops(scatter, ctx)
        cost.flops = s_flops * source * (taps - 1) + c_flops * source
        cost.transcendentals = s_trans * source * (taps - 1) + c_trans * source
        cost.derivation.append("select-and-scatter: select per window tap, scatter per source")
        return cost
    per_flops, per_trans, known = _scalar_computation_flops(names[0] if names else None, ctx)
    out_shape = instruction.shape
    first_out = out_shape.tuple_shapes[0] if out_shape.is_tuple else out_shape
    if opcode == "map":
        count = _elements(out_shape)
    elif opcode == "reduce":
        count = _elements(ctx.operand_shape(instruction, 0)) - _elements(first_out)
    else:  # reduce-window
        window = parse_window(instruction.attributes.get("window"))
        taps = math.prod(d.size for d in window) if window else 1
        count = (taps - 1) * _elements(first_out)
        reduced = [d for d in window if d.size != 1]
        padded = [d for d in window if d.pad_low or d.pad_high]
        if len(reduced) == 1 and len(padded) == 1 and out_shape.is_array:
            # XLA's special case: a reduce followed by a broadcast along one dim (cumsum-like)
            for index, dim in enumerate(window):
                if (
                    dim.size != 1
                    and dim.pad_low
                    and dim.pad_low == dim.pad_high
                    and dim.size == 2 * dim.pad_low + 1
                    and dim.pad_low == out_shape.dims[index] - 1
                ):
                    span = out_shape.dims[index]
                    count = _elements(first_out) // span + (span - 1)
                    break
    cost.flops = per_flops * count
    cost.transcendentals = per_trans * count
    cost.derivation.append(
        f"{opcode}: {count} applications of the reducer x {per_flops:g} FLOP(s)"
        + ("" if known else " (reducer body unknown: 1 FLOP assumed)")
    )
    return cost


def _scatter(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    operands = len(instruction.operands)
    n = max(1, (operands - 1) // 2)  # scatter(operands..., indices, updates...)
    updates = [ctx.operand_shape(instruction, n + 1 + i) for i in range(n)]
    update_bytes = float(sum(_size(shape) for shape in updates))
    indices = float(_size(ctx.operand_shape(instruction, n)))
    cost.hbm_bytes_read = 2 * update_bytes + indices
    cost.hbm_bytes_written = update_bytes
    names = called_computations(instruction)
    per_flops, per_trans, _ = _scalar_computation_flops(names[0] if names else None, ctx)
    count = _elements(updates[0]) if updates else 0
    cost.flops = per_flops * count
    cost.transcendentals = per_trans * count
    cost.derivation.append("scatter: 3 x update bytes + indices; combiner per update element")
    return cost


def _control_flow(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    names = called_computations(instruction)
    computations = [ctx.callee(name) for name in names]
    if not names or any(c is None for c in computations):
        cost.flops = cost.transcendentals = None
        cost.derivation.append(f"{instruction.opcode}: called computations not available")
        return cost
    subtotals = [_computation_cost(c, ctx) for c in computations if c is not None]
    if instruction.opcode == "conditional":
        total = subtotals[0]
        for other in subtotals[1:]:
            total.flops = max(total.flops or 0.0, other.flops or 0.0)
            total.transcendentals = max(total.transcendentals or 0.0, other.transcendentals or 0.0)
            total.hbm_bytes_read = max(total.hbm_bytes_read, other.hbm_bytes_read)
            total.hbm_bytes_written = max(total.hbm_bytes_written, other.hbm_bytes_written)
        how = "the costliest branch"
    else:
        total = OpCost(0.0, 0.0, 0.0, 0.0)
        for sub in subtotals:
            total.add(sub)
        how = "one pass over " + ", ".join(names)
    total.dtype = cost.dtype
    total.derivation.append(
        f"{instruction.opcode}: {how} (XLA's convention; trip count not applied)"
    )
    return total


def _wrapped_collective(instruction: Instruction, ctx: _Context) -> Instruction | None:
    """The collective an ``async-start`` runs (its called computation's collective), if any."""
    for name in called_computations(instruction):
        body = ctx.callee(name)
        if body is None:
            continue
        for inner in body.instructions:
            if _base_opcode(inner.opcode) in COLLECTIVE_KINDS:
                return inner
    return None


def _async_wrapper(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    """``async-start`` costs what its called computation costs (XLA); ``async-done`` waits.

    When the wrapped computation is a collective, both carry its ``CollectiveInfo`` and the
    pair is timed as that collective (on the done, see ``profan.roofline``).
    """
    if instruction.opcode == "async-start":
        total = _control_flow(instruction, ctx, cost)
        total.async_role = "start"
        start = instruction
    else:
        total = cost
        total.async_role = "done"
        total.derivation.append("async-done: waits for its async-start")
        start = ctx.operand(instruction, 0)
    inner = _wrapped_collective(start, ctx) if start is not None else None
    if inner is not None:
        kind = _base_opcode(inner.opcode)
        info = collective_info(inner, ctx.module, kind, ctx)
        from profan.cost.collectives import sent_bytes_per_device

        total.collective = info
        total.ici_bytes = sent_bytes_per_device(kind, info.full_bytes, info.group_size)
        total.derivation.append(f"asynchronous {kind}: V={info.full_bytes} B, groups of "
                                f"{info.group_size}")  # fmt: skip
    return total


def _async_copy(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    # A DMA between memory spaces (often host <-> HBM): the TPU compiler charges the size of the
    # array moved to both the start and the done; so does profan (the done measures the wait).
    if instruction.opcode == "copy-start":
        moved = ctx.operand_shape(instruction, 0)
        cost.async_role = "start"
    else:
        moved = instruction.shape
        cost.async_role = "done"
    size = float(sizes.array_bytes(moved)) if moved is not None and moved.is_array else 0.0
    cost.hbm_bytes_read, cost.hbm_bytes_written = size, 0.0
    # copy-start's result is (destination, source, context); copy-done's operand is that tuple
    pair = (
        instruction.shape
        if instruction.opcode == "copy-start"
        else ctx.operand_shape(instruction, 0)
    )
    if pair is not None and pair.is_tuple and len(pair.tuple_shapes) >= 2:
        destination, source = pair.tuple_shapes[0], pair.tuple_shapes[1]
        if sizes.memory_space(source) == HOST_MEMORY_SPACE:
            cost.transfer_direction = "to-device"
        elif sizes.memory_space(destination) == HOST_MEMORY_SPACE:
            cost.transfer_direction = "to-host"
    cost.host_transfer = cost.transfer_direction is not None
    cost.derivation.append(f"{instruction.opcode}: moves {size:.0f} bytes between memory spaces")
    return cost


# -------------------------------------------------------------------------------- collectives


def _decode_groups(text: str | None, module: Module | None) -> list[list[int]]:
    num_devices = None
    if module is not None:
        num_devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    if text is None:
        return [list(range(num_devices))] if num_devices else []
    try:
        from profan.hlo.devices import decode_replica_groups

        groups = decode_replica_groups(text, num_devices=num_devices)
    except Exception:
        groups = [int_list(g) for g in re.findall(r"\{([\d,\s]*)\}", text)]
    groups = [g for g in groups if g]
    if not groups and num_devices:
        groups = [list(range(num_devices))]
    return groups


def axis_decomposition(group: list[int]) -> tuple[int, ...]:
    """Sizes of the mesh axes a group of device ids spans, read off its strides.

    ``{0,16,32,…}`` is one axis; ``{0,1,4,5}`` is two axes of 2 (stride 1, then stride 4).
    A group that is no product of strided runs counts as one axis of its size.
    """
    ids = sorted(group)
    if len(ids) <= 2:
        return (len(ids),)
    sizes_found: list[int] = []
    while len(ids) > 1:
        stride = ids[1] - ids[0]
        run = 1
        while run < len(ids) and ids[run] - ids[run - 1] == stride:
            run += 1
        if len(ids) % run:
            return (len(group),)
        blocks = [ids[i : i + run] for i in range(0, len(ids), run)]
        if any(
            [b - block[0] for b in block] != [i * stride for i in range(run)] for block in blocks
        ):
            return (len(group),)
        sizes_found.append(run)
        ids = [block[0] for block in blocks]
    return tuple(sizes_found)


def collective_info(instruction: Instruction, module: Module | None, kind: str,
                    ctx: _Context | None = None) -> CollectiveInfo:  # fmt: skip
    """Group size, axes spanned and the full bytes ``V`` of a collective instruction."""
    ctx = ctx or _Context(module)
    groups = _decode_groups(instruction.attributes.get("replica_groups"), module)
    if kind == "collective-permute":
        pairs = instruction.attributes.get("source_target_pairs", "")
        devices = set(int_list(pairs))
        groups = [sorted(devices)] if devices else groups
    group_size = len(groups[0]) if groups else 1
    axis_sizes = axis_decomposition(groups[0]) if groups else (1,)
    in_bytes = sum(sizes.array_bytes(leaf) for s in ctx.operand_shapes(instruction) if s
                   for leaf in s.leaves() if leaf.is_array)  # fmt: skip
    out_shape = instruction.shape
    out_leaves = [leaf for leaf in out_shape.leaves() if leaf.is_array]
    if kind == "all-gather" and instruction.opcode.endswith("-start") and out_shape.is_tuple:
        out_leaves = [leaf for leaf in out_shape.tuple_shapes[-1].leaves() if leaf.is_array]
    out_bytes = sum(sizes.array_bytes(leaf) for leaf in out_leaves)
    if kind == "all-gather":
        full = out_bytes if out_bytes >= in_bytes else in_bytes * group_size
    elif kind == "collective-permute":
        full = in_bytes
    else:  # reduce-scatter, all-reduce, all-to-all: the input is the full array
        full = in_bytes if in_bytes else out_bytes
    return CollectiveInfo(
        kind=kind,
        full_bytes=int(full),
        group_size=group_size,
        groups=groups,
        n_axes=len(axis_sizes),
        axis_sizes=axis_sizes,
    )


def _collective(instruction: Instruction, ctx: _Context, cost: OpCost, kind: str) -> OpCost:
    from profan.cost.collectives import sent_bytes_per_device

    opcode = instruction.opcode
    if opcode.endswith("-done"):
        cost.async_role = "done"
        cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
        start = ctx.operand(instruction, 0)
        if start is not None:
            started = _collective(start, ctx, OpCost(0.0, 0.0, 0.0, 0.0), kind)
            cost.collective = started.collective
        cost.derivation.append(f"{opcode}: waits for its -start, which carries the transfer")
        return cost
    if opcode.endswith("-start"):
        cost.async_role = "start"
    info = collective_info(instruction, ctx.module, kind, ctx)
    cost.collective = info
    cost.ici_bytes = sent_bytes_per_device(kind, info.full_bytes, info.group_size)
    if kind == "all-reduce":
        # XLA: one FLOP per output element (the combiner applied once per element)
        cost.flops = float(sum(leaf.num_elements for leaf in instruction.shape.leaves()
                               if leaf.is_array))  # fmt: skip
        cost.hbm_bytes_written = float(
            sum(_size(leaf) for leaf in instruction.shape.leaves() if leaf.is_array)
        )
    cost.derivation.append(
        f"{opcode}: V={info.full_bytes} B over groups of {info.group_size} "
        f"({info.n_axes} axis/axes {list(info.axis_sizes)}), sends {cost.ici_bytes:.0f} B"
    )
    return cost


# ---------------------------------------------------------------------------------- fusions


def _fused_collective_kind(
    instruction: Instruction, ctx: _Context
) -> tuple[str, Instruction | None]:
    """A kCustom fusion that is really a collective (TPU: ``calls=%all-reduce-scatter.3``)."""
    names = called_computations(instruction)
    for name in names:
        lowered = name.lower()
        if lowered.startswith("all-reduce-scatter") or lowered.startswith("reduce-scatter"):
            kind = "reduce-scatter"
        elif lowered.startswith("all-gather"):
            kind = "all-gather"
        elif lowered.startswith("all-reduce"):
            kind = "all-reduce"
        elif lowered.startswith("all-to-all"):
            kind = "all-to-all"
        else:
            continue
        body = ctx.callee(name)
        inner = None
        if body is not None:
            inner = next(
                (i for i in body.instructions if _base_opcode(i.opcode) in COLLECTIVE_KINDS), None
            )
        return kind, inner
    return "", None


def _fusion_parameter_read_bytes(parameter: Instruction, ctx: _Context) -> float:
    """Bytes a fusion reads for one fused parameter (XLA's rules: slices read only the slice)."""
    size = 0.0
    shared = False
    own = float(_size(parameter.shape))
    for user in ctx.users(parameter):
        opcode = user.opcode
        if opcode == "slice":
            size += _size(user.shape)
        elif opcode == "dynamic-slice":
            if user.operands and user.operands[0].name.lstrip("%") == parameter.name:
                size += _size(user.shape)
            elif not shared:
                shared = True
                size += own
        elif opcode == "dynamic-update-slice":
            if user.operands and user.operands[0].name.lstrip("%") != parameter.name and not shared:
                shared = True
                size += own
        elif opcode in ("broadcast", "reshape"):
            size += own
        elif opcode == "get-tuple-element" and parameter.shape.is_tuple:
            size += _fusion_parameter_read_bytes(user, ctx)
        elif not shared:
            shared = True
            size += own
    return size


def _in_place_scatter_bytes(
    fusion: Instruction, body: Computation, ctx: _Context, read: float, written: float
) -> float | None:
    """Bytes a scatter-rooted fusion really moves: its buffer is updated in place, so instead of
    reading and writing the whole buffer (XLA's accounting) only the touched rows are read and
    written.  ``None`` when the fusion is not such a scatter."""
    root = body.root
    if root.opcode != "scatter" or fusion.shape.is_tuple or len(root.operands) < 3:
        return None
    target = body.get(root.operands[0].name)
    while target is not None and target.opcode in ("bitcast", "copy") and target.operands:
        target = body.get(target.operands[0].name)
    if target is None or target.opcode != "parameter":
        return None
    n = max(1, (len(root.operands) - 1) // 2)
    update = float(_size(ctx.operand_shape(root, n + 1)))
    buffer = float(_size(target.shape))
    return max(0.0, read - buffer + update) + max(0.0, written - _size(fusion.shape) + update)


def _fusion(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    names = called_computations(instruction)
    body = ctx.callee(names[0]) if names else None
    kind, inner = _fused_collective_kind(instruction, ctx)
    if kind:
        if inner is not None:
            info = collective_info(inner, ctx.module, kind, ctx)
        else:
            info = collective_info(instruction, ctx.module, kind, ctx)
        from profan.cost.collectives import sent_bytes_per_device

        cost.collective = info
        cost.ici_bytes = sent_bytes_per_device(kind, info.full_bytes, info.group_size)
        cost.derivation.append(f"fused {kind} ({names[0]}): V={info.full_bytes} B, "
                               f"groups of {info.group_size}")  # fmt: skip
    if body is None:
        cost.flops = cost.transcendentals = None
        cost.derivation.append(
            "fusion: body not available, FLOPs unknown; bytes = operands + outputs"
        )
        return cost
    inner_cost = _computation_cost(body, ctx)
    cost.flops = inner_cost.flops
    cost.transcendentals = inner_cost.transcendentals
    cost.unknown = inner_cost.unknown
    if inner_cost.collective is not None and cost.collective is None:
        cost.collective = inner_cost.collective
        cost.ici_bytes = inner_cost.ici_bytes
    dots = [i for i in body.instructions if i.opcode in ("dot", "convolution")]
    if dots:
        operand = ctx.operand_shape(dots[0], 0)
        array = _array(operand)
        if array is not None:
            cost.dtype = array.dtype
    # Outputs: each array written once; an in-place dynamic-update-slice writes only its update.
    root = body.root
    written = 0.0
    out_leaves = (
        list(instruction.shape.tuple_shapes) if instruction.shape.is_tuple else [instruction.shape]
    )
    for index, leaf in enumerate(out_leaves):
        if not leaf.is_array:
            if leaf.is_tuple:
                written += sum(_size(x) for x in leaf.leaves() if x.is_array)
            continue
        producer = root
        if instruction.shape.is_tuple and root.opcode == "tuple" and index < len(root.operands):
            producer = body.get(root.operands[index].name) or root
        if producer.opcode == "dynamic-update-slice":
            written += _size(ctx.operand_shape(producer, 1))
        else:
            written += _size(leaf)
    # Inputs: per fused parameter, what its users actually read; plus big constants.
    read = 0.0
    for parameter in body.params:
        read += _fusion_parameter_read_bytes(parameter, ctx)
    for constant in body.instructions:
        if constant.opcode == "constant" and constant.shape.num_elements > 1:
            read += _size(constant.shape)
    cost.hbm_bytes_read, cost.hbm_bytes_written = read, written
    in_place = _in_place_scatter_bytes(instruction, body, ctx, read, written)
    if in_place is not None:
        cost.roofline_hbm_bytes = in_place
        cost.derivation.append(
            f"in-place scatter: only the scattered rows move ({in_place:.0f} B), "
            "though XLA's accounting charges the whole buffer"
        )
    cost.derivation.append(
        f"fusion: FLOPs summed over {body.name} ({len(body.instructions)} instructions); "
        "bytes at the fusion boundary only"
    )
    return cost


def _plain_matmul_flops(lhs: Shape | None, rhs: Shape | None, out: Shape) -> int | None:
    """FLOPs of ``[M,K] x [K,N] -> [M,N]`` when the shapes admit only that reading."""
    result = _array(out)
    if lhs is None or rhs is None or result is None:
        return None
    if not (lhs.rank == rhs.rank == result.rank == 2):
        return None
    (m, k), (k2, n) = lhs.dims, rhs.dims
    if k != k2 or result.dims != (m, n):
        return None
    return 2 * m * n * k


def _fmha_forward_flops(config: dict, query: Shape, out: Shape) -> tuple[float, float] | None:
    """FLOPs and transcendentals of a cuDNN fused-attention forward call: ``S = Q K^T`` then
    ``O = softmax(S) V``; the score matrix's shape is in the config (``intermediate_tensor_shape``).
    """
    bmm1 = config.get("bmm1_dot_dimension_numbers")
    scores = config.get("intermediate_tensor_shape")
    result = _array(out)
    if not isinstance(bmm1, dict) or not isinstance(scores, dict) or result is None:
        return None
    try:
        score_dims = [int(d) for d in scores.get("dimensions", [])]
        contracting = [int(d) for d in bmm1.get("lhs_contracting_dimensions", [])]
    except (TypeError, ValueError):
        return None
    if not score_dims or not contracting:
        return None
    head_dim = math.prod(query.dims[d] for d in contracting)
    score_elements = math.prod(score_dims)
    first = FMA_FLOPS * score_elements * head_dim  # Q K^T
    second = FMA_FLOPS * result.num_elements * score_dims[-1]  # softmax(S) V
    return float(first + second), float(score_elements)  # one exp per score


def _custom_call(instruction: Instruction, ctx: _Context, cost: OpCost) -> OpCost:
    target = instruction.attributes.get("custom_call_target", "").strip('"')
    config = _backend_config(instruction) or {}
    lhs = ctx.operand_shape(instruction, 0)
    if MATMUL_CUSTOM_CALL.search(target):
        gemm = config.get("gemm_backend_config", config)
        dnums = gemm.get("dot_dimension_numbers") if isinstance(gemm, dict) else None
        if lhs is not None and isinstance(dnums, dict):
            contracting = [int(d) for d in dnums.get("lhs_contracting_dimensions", [])]
            cost.flops = float(dot_flops(lhs, instruction.shape, contracting))
            cost.transcendentals = 0.0
            lhs_array = _array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(f"custom-call {target}: a matmul per its dot dimension numbers")
            return cost
        plain = _plain_matmul_flops(lhs, ctx.operand_shape(instruction, 1), instruction.shape)
        if plain is not None:
            cost.flops, cost.transcendentals = float(plain), 0.0
            lhs_array = _array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(
                f"custom-call {target}: no dimension numbers; the shapes say [M,K] x [K,N]"
            )
            return cost
    fmha = config.get("cudnn_fmha_backend_config")
    if isinstance(fmha, dict) and "backward" not in target.lower() and lhs is not None:
        flops = _fmha_forward_flops(fmha, lhs, instruction.shape)
        if flops is not None:
            cost.flops, cost.transcendentals = flops
            lhs_array = _array(lhs)
            cost.dtype = lhs_array.dtype if lhs_array is not None else cost.dtype
            cost.derivation.append(
                f"custom-call {target}: fused attention, softmax(Q K^T) V per its two bmm "
                "dimension numbers (masked positions counted)"
            )
            return cost
    if ANNOTATION_CUSTOM_CALL.match(target):
        cost.flops, cost.transcendentals = 0.0, 0.0
        cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
        cost.derivation.append(f"custom-call {target}: an annotation, no work of its own")
        return cost
    if CONV_CUSTOM_CALL.search(target) and "dim_labels" in instruction.attributes:
        costed = _convolution(instruction, ctx, cost)
        if costed.flops is not None:
            costed.transcendentals = 0.0
            costed.derivation[-1] = f"custom-call {target}: " + costed.derivation[-1]
            return costed
    cost.flops = cost.transcendentals = None
    cost.unknown = True
    cost.derivation.append(
        f"custom-call {target or '?'}: unknown kernel, FLOPs not guessed; "
        "bytes = operands + outputs"
    )
    return cost


# ---------------------------------------------------------------------------------- totals


@dataclass(slots=True)
class ModuleTotals:
    flops: float
    transcendentals: float
    bytes_accessed: float
    unknown_ops: list[str] = field(default_factory=list)


def module_totals(
    module: Module, computations: Iterable[Computation] | None = None
) -> ModuleTotals:
    """Totals over the entry computation, the way XLA's cost analysis sums a module.

    Control flow (while/call/conditional) includes its called computations once; fusions
    their bodies' FLOPs.  Unknown FLOPs (custom calls) count 0 and are listed.
    """
    ctx = _Context(module)
    totals = ModuleTotals(0.0, 0.0, 0.0)
    for computation in computations or [module.entry]:
        for instruction in computation.instructions:
            cost = _estimate(instruction, ctx)
            if cost.flops is None or cost.unknown:
                totals.unknown_ops.append(instruction.name)
            totals.flops += cost.flops or 0.0
            totals.transcendentals += cost.transcendentals or 0.0
            totals.bytes_accessed += cost.hbm_bytes
    return totals


__all__ = [
    "CollectiveInfo",
    "ModuleTotals",
    "OpCost",
    "axis_decomposition",
    "collective_info",
    "estimate",
    "module_totals",
]

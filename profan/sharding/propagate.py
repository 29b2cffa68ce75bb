"""Following each value's split through the program, one handler per opcode.

``Propagator`` walks a computation in order and gives every instruction a
:class:`~profan.sharding.splits.ValueSplit`: parameters from their ``sharding=`` annotations,
then each op from its operands' splits.  Which rule applies is looked up in ``HANDLERS`` by
opcode (the way a Lark ``Transformer`` dispatches on rule names); ops of one collective kind
share a handler, the async ``*-done`` halves share one, and every other op falls back to the
same-shape rule (elementwise, copy, convert, select, …).  Each dot and convolution met on the way
is recorded as a :class:`~profan.sharding.model.MatmulSharding`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from profan.errors import HloSyntaxError
from profan.hlo.devices import Sharding, decode_sharding
from profan.hlo.graph import ModuleGraph
from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.opcodes import async_role, collective_kind
from profan.hlo.views import (
    called_computations,
    int_attribute,
    int_list_attribute,
    slice_ranges,
)
from profan.sharding.matmul import convolution, dot
from profan.sharding.mesh import Mesh
from profan.sharding.model import MatmulSharding
from profan.sharding.splits import (
    UNKNOWN,
    UNSPLIT_KNOWN,
    DimSplit,
    ValueSplit,
    array_all_to_all,
    join_chunks,
    reshape,
    slice_chunk,
    tuple_all_to_all,
    unknown,
)

# Computations nested deeper than this (fusions in fusions in loops…) are not followed.
MAX_DEPTH = 16


def _in_range(dims: list[int], rank: int) -> bool:
    return all(0 <= d < rank for d in dims)


@dataclass(slots=True)
class Site:
    """One instruction as a handler sees it: its operands' splits and where it is called from.

    ``params`` are the splits of the computation's parameters when a caller passed them;
    ``caller`` names the fusion (or call) whose body this is, for matmul records.
    """

    instruction: Instruction
    operands: list[ValueSplit]
    params: list[ValueSplit] | None
    caller: str | None

    @property
    def shape(self) -> Shape:
        return self.instruction.shape

    @property
    def rank(self) -> int:
        return len(self.instruction.shape.dims)

    @property
    def first(self) -> ValueSplit:
        return self.operands[0] if self.operands else ValueSplit()


Handler = Callable[["Propagator", Site], ValueSplit]


class Propagator:
    """Walks computations, giving every value a ValueSplit and recording every matmul."""

    def __init__(self, module: Module, mesh: Mesh) -> None:
        self.module = module
        self.graph = ModuleGraph(module)
        self.mesh = mesh
        self.axes_by_collective = {c.name: c.axes for c in mesh.collectives}
        self.matmuls: list[MatmulSharding] = []
        self.param_shapes: dict[str, tuple[tuple[int, ...], ValueSplit]] = {}
        self.notes: list[str] = []
        self.depth = 0
        self.followed: set[str] = set()

    # --- walking ----------------------------------------------------------------------------

    def run_computation(
        self, computation: Computation, params: list[ValueSplit] | None, caller: str | None
    ) -> ValueSplit:
        env: dict[str, ValueSplit] = {}
        self.depth += 1
        try:
            for instruction in computation.instructions:
                operands = [
                    env.get(operand.name.lstrip("%"), ValueSplit())
                    for operand in instruction.operands
                ]
                site = Site(instruction, operands, params, caller)
                env[instruction.name] = handler_for(instruction.opcode)(self, site)
        finally:
            self.depth -= 1
        return env.get(computation.root.name, unknown(computation.root.shape))

    def run_named(self, name: str, params: list[ValueSplit]) -> None:
        """Follow a computation called from elsewhere (loop body, branch) once."""
        try:
            computation = self.module.computation(name)
        except KeyError:
            return
        if name in self.followed:
            return  # a computation called from several places is followed once
        self.followed.add(name)
        self.run_computation(computation, params, None)

    def operand_shape(self, instruction: Instruction, index: int) -> Shape | None:
        return self.graph.operand_shape(instruction, index)

    # --- shardings --------------------------------------------------------------------------

    def split_from_sharding(self, text: str, shape: Shape) -> ValueSplit:
        try:
            sharding = decode_sharding(text)
        except HloSyntaxError:
            return unknown(shape)
        return self._split_for(sharding, shape)

    def _split_for(self, sharding: Sharding, shape: Shape) -> ValueSplit:
        if shape.is_tuple:
            if sharding.kind == "tuple" and len(sharding.elements) == len(shape.tuple_shapes):
                return ValueSplit(
                    elements=tuple(
                        self._split_for(s, e)
                        for s, e in zip(sharding.elements, shape.tuple_shapes, strict=True)
                    )
                )
            return ValueSplit(
                elements=tuple(self._split_for(sharding, e) for e in shape.tuple_shapes)
            )
        if sharding.kind in ("replicated", "maximal"):
            return ValueSplit(dims=tuple(UNSPLIT_KNOWN for _ in shape.dims))
        if not sharding.is_tiled or len(sharding.data_tile_dims) != len(shape.dims):
            return unknown(shape)
        dims = []
        for index, tiles in enumerate(sharding.data_tile_dims):
            if tiles == 1:
                dims.append(UNSPLIT_KNOWN)
            else:
                dims.append(DimSplit(tiles, self._axes_for_tile_dim(sharding, index), True))
        return ValueSplit(dims=tuple(dims))

    def _axes_for_tile_dim(self, sharding: Sharding, dim: int) -> tuple[str, ...]:
        """Axis names for the devices that jointly span one tile dimension of a sharding."""
        axes = self.mesh.axes_of_groups(sharding.device_groups_along(dim))
        if axes is None:
            return (f"?{sharding.tile_dims[dim]}",)
        return tuple(axes)


# --- handlers: structure ----------------------------------------------------------------------


def _parameter(propagator: Propagator, site: Site) -> ValueSplit:
    instruction = site.instruction
    number = instruction.parameter_number or 0
    if site.params is not None and number < len(site.params):
        return site.params[number]
    text = instruction.attributes.get("sharding")
    if not text:
        return unknown(site.shape)
    split = propagator.split_from_sharding(text, site.shape)
    if split.elements is None:
        split = ValueSplit(dims=split.dims, origin=instruction.name)
        propagator.param_shapes[instruction.name] = (site.shape.dims, split)
    return split


def _get_tuple_element(_propagator: Propagator, site: Site) -> ValueSplit:
    index = int_attribute(site.instruction, "index", 0) or 0
    elements = site.first.elements
    if elements is not None and 0 <= index < len(elements):
        return elements[index]
    return unknown(site.shape)


def _tuple(_propagator: Propagator, site: Site) -> ValueSplit:
    return ValueSplit(elements=tuple(site.operands))


def _call(propagator: Propagator, site: Site) -> ValueSplit:
    """A fusion, call or async-start: follow the called computation with the operands' splits."""
    instruction = site.instruction
    names = called_computations(instruction)
    if not names or propagator.depth > MAX_DEPTH:
        return unknown(site.shape)
    try:
        computation = propagator.module.computation(names[0])
    except KeyError:
        return unknown(site.shape)
    caller = site.caller if site.caller is not None else instruction.name
    result = propagator.run_computation(computation, site.operands, caller)
    if instruction.opcode == "async-start":
        return ValueSplit(elements=(ValueSplit(elements=tuple(site.operands)), result))
    return result


def _while(propagator: Propagator, site: Site) -> ValueSplit:
    # The body sees the loop-carried tuple: follow it once (a scan over layers keeps each
    # layer's shardings in that tuple), and assume the loop keeps the layout.
    body = site.instruction.attributes.get("body")
    if body and propagator.depth <= MAX_DEPTH:
        propagator.run_named(body.strip().lstrip("%"), [site.first])
    return site.first


def _conditional(propagator: Propagator, site: Site) -> ValueSplit:
    for index, name in enumerate(called_computations(site.instruction)):
        if index + 1 < len(site.operands) and propagator.depth <= MAX_DEPTH:
            propagator.run_named(name, [site.operands[index + 1]])
    return unknown(site.shape)


def _done(_propagator: Propagator, site: Site) -> ValueSplit:
    """The result of an async pair: the last element of the start's tuple (copy: the first)."""
    first = site.first
    if first.elements is not None and first.elements:
        return first.elements[-1] if site.instruction.opcode != "copy-done" else first.elements[0]
    return first if first.dims and len(first.dims) == site.rank else unknown(site.shape)


def _copy_start(_propagator: Propagator, site: Site) -> ValueSplit:
    return ValueSplit(elements=(site.first, site.first, ValueSplit()))


def _first(_propagator: Propagator, site: Site) -> ValueSplit:
    """Ops whose result is split as their operand (collective-permute, collective-broadcast)."""
    return site.first


# --- handlers: layout and shape ---------------------------------------------------------------


def _broadcast(_propagator: Propagator, site: Site) -> ValueSplit:
    first, rank = site.first, site.rank
    mapping = int_list_attribute(site.instruction, "dimensions")
    dims = [UNSPLIT_KNOWN if first.known else UNKNOWN for _ in range(rank)]
    for source, target in enumerate(mapping):
        if source < len(first.dims) and 0 <= target < rank:
            dims[target] = first.dims[source]
    return ValueSplit(dims=tuple(dims), hidden=first.hidden, partial=first.partial)


def _transpose(_propagator: Propagator, site: Site) -> ValueSplit:
    first, rank = site.first, site.rank
    perm = int_list_attribute(site.instruction, "dimensions")
    if sorted(perm) == list(range(rank)) and len(first.dims) == rank:
        return ValueSplit(
            dims=tuple(first.dims[p] for p in perm),
            hidden=first.hidden,
            partial=first.partial,
            origin=first.origin,
        )
    return unknown(site.shape)


def _reshape(propagator: Propagator, site: Site) -> ValueSplit:
    instruction = site.instruction
    source = propagator.operand_shape(instruction, 0) if instruction.operands else None
    if source is None:
        return unknown(site.shape)
    return reshape(site.first, source.dims, site.shape.dims)


def _reduce(_propagator: Propagator, site: Site) -> ValueSplit:
    first, shape = site.first, site.shape
    reduced = set(int_list_attribute(site.instruction, "dimensions"))
    if shape.is_tuple or not first.dims:
        return unknown(shape)
    kept = tuple(d for i, d in enumerate(first.dims) if i not in reduced)
    partial = list(first.partial)
    for i in sorted(reduced):
        if 0 <= i < len(first.dims):
            partial.extend(a for a in first.dims[i].axes if a not in partial)
    if len(kept) != site.rank:
        return unknown(shape)
    return ValueSplit(dims=kept, hidden=first.hidden, partial=tuple(partial))


def _same_shape(propagator: Propagator, site: Site) -> ValueSplit | None:
    """Same-shape ops (elementwise, copy, convert, select, dynamic-update-slice, …): the operand
    of the same local shape with the most known splits decides; ``None`` when none has it."""
    shape, rank = site.shape, site.rank
    if shape.is_tuple:
        return None
    candidates = [
        op
        for i, op in enumerate(site.operands)
        if op.elements is None
        and len(op.dims) == rank
        and (propagator.operand_shape(site.instruction, i) or shape).dims == shape.dims
    ]
    if not candidates:
        return None
    chosen = max(candidates, key=lambda op: (sum(d.factor > 1 for d in op.dims), op.known))
    unary = site.instruction.opcode in ("copy", "convert")
    return ValueSplit(
        dims=chosen.dims,
        hidden=chosen.hidden,
        partial=chosen.partial,
        origin=chosen.origin if unary else None,
        chunk=chosen.chunk if unary else None,
    )


def _elementwise(propagator: Propagator, site: Site) -> ValueSplit:
    """Every op without a handler of its own: the same-shape rule, else nothing known."""
    found = _same_shape(propagator, site)
    return found if found is not None else unknown(site.shape)


def _slice_like(propagator: Propagator, site: Site) -> ValueSplit:
    """slice, dynamic-slice, pad, reverse: the same-shape rule when the size did not change,
    else :func:`_kept_dims`."""
    found = _same_shape(propagator, site)
    return found if found is not None else _kept_dims(propagator, site)


def _concatenate(propagator: Propagator, site: Site) -> ValueSplit:
    """All the pieces of one value, in order, join back into it; else :func:`_kept_dims`."""
    found = _same_shape(propagator, site)
    if found is not None:
        return found
    instruction = site.instruction
    piece = propagator.operand_shape(instruction, 0) if instruction.operands else None
    if piece is not None:
        along = int_list_attribute(instruction, "dimensions")
        joined = join_chunks(site.operands, along, piece.dims, site.rank)
        if joined is not None:
            return joined
    return _kept_dims(propagator, site)


def _kept_dims(propagator: Propagator, site: Site) -> ValueSplit:
    """Dims whose size the op left unchanged keep the first operand's split; a slice that cuts
    one dim into equal parts records which part it is."""
    first, shape, instruction = site.first, site.shape, site.instruction
    if len(first.dims) != site.rank:
        return unknown(shape)
    source = propagator.operand_shape(instruction, 0)
    dims = tuple(
        d if source is not None and source.dims[i] == shape.dims[i] else UNKNOWN
        for i, d in enumerate(first.dims)
    )
    chunk = None
    if instruction.opcode == "slice" and source is not None:
        chunk = slice_chunk(first, source.dims, shape.dims, slice_ranges(instruction))
    return ValueSplit(dims=dims, hidden=first.hidden, chunk=chunk)


# --- handlers: collectives --------------------------------------------------------------------


def _collective(propagator: Propagator, site: Site) -> ValueSplit:
    """all-reduce, all-gather, reduce-scatter, all-to-all (and their async starts)."""
    instruction, operands, shape = site.instruction, site.operands, site.shape
    kind = collective_kind(instruction.opcode) or instruction.opcode
    axes = tuple(propagator.axes_by_collective.get(instruction.name) or ())
    size = propagator.mesh.size_of(axes) if axes else 0
    result: ValueSplit | None = None
    if kind == "all-to-all" and len(operands) > 1 and size == len(operands):
        result = tuple_all_to_all(operands, axes, size)
    if result is None and (len(operands) > 1 or shape.is_tuple):
        # Variadic collective: each operand independently.
        result = ValueSplit(
            elements=tuple(_collective_one(instruction, kind, op, axes, size) for op in operands)
        )
    if result is None:
        first = operands[0] if operands else unknown(shape)
        result = _collective_one(instruction, kind, first, axes, size)
    if async_role(instruction.opcode) == "start" and shape.is_tuple and kind != "all-reduce":
        return ValueSplit(elements=(site.first, result))
    return result


def _collective_one(
    instruction: Instruction,
    kind: str,
    value: ValueSplit,
    axes: tuple[str, ...],
    size: int,
) -> ValueSplit:
    if value.elements is not None:
        return value
    partial = tuple(a for a in value.partial if a not in axes)
    dims = list(value.dims)
    gathered = int_list_attribute(instruction, "dimensions")
    if kind == "all-gather" and gathered and 0 <= gathered[0] < len(dims):
        d = dims[gathered[0]]
        remaining = tuple(a for a in d.axes if a not in axes)
        factor = max(d.factor // size, 1) if size else 1
        dims[gathered[0]] = DimSplit(factor, remaining, True)
    elif kind == "reduce-scatter" and gathered and 0 <= gathered[0] < len(dims):
        d = dims[gathered[0]]
        dims[gathered[0]] = DimSplit(d.factor * max(size, 1), d.axes + axes, True)
    elif kind == "all-to-all" and _in_range(gathered, len(dims)):
        moved = array_all_to_all(value, gathered, axes, size)
        if moved is not None:
            return moved
    if kind == "all-to-all":
        # Pieces from every device of the group are exchanged: without a dim that the
        # group's axes split (or with unknown splits) nothing says which part of the
        # global array a dim now holds, so those dims become unknown rather than wrong.
        touched = set(gathered)
        dims = [
            UNKNOWN if (set(d.axes) & set(axes) or i in touched) else d for i, d in enumerate(dims)
        ]
    return ValueSplit(dims=tuple(dims), hidden=value.hidden, partial=partial)


# --- the table ----------------------------------------------------------------------------------

HANDLERS: dict[str, Handler] = {
    "parameter": _parameter,
    "get-tuple-element": _get_tuple_element,
    "tuple": _tuple,
    "dot": dot,
    "convolution": convolution,
    "fusion": _call,
    "call": _call,
    "async-start": _call,
    "while": _while,
    "conditional": _conditional,
    "copy-start": _copy_start,
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "bitcast": _reshape,
    "reduce": _reduce,
    "concatenate": _concatenate,
    "slice": _slice_like,
    "dynamic-slice": _slice_like,
    "pad": _slice_like,
    "reverse": _slice_like,
}

# By collective kind, for the sync op and its async start alike.
COLLECTIVE_HANDLERS: dict[str, Handler] = {
    "all-reduce": _collective,
    "all-gather": _collective,
    "reduce-scatter": _collective,
    "all-to-all": _collective,
    "collective-permute": _first,
    "collective-broadcast": _first,
}


@cache
def handler_for(opcode: str) -> Handler:
    """The handler of an opcode: its own, else the async-done one, else its collective kind's,
    else the same-shape rule."""
    found = HANDLERS.get(opcode)
    if found is not None:
        return found
    if opcode.endswith("-done"):
        return _done
    kind = collective_kind(opcode)
    if kind is not None and kind in COLLECTIVE_HANDLERS:
        return COLLECTIVE_HANDLERS[kind]
    return _elementwise

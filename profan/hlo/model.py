"""The typed in-memory model of an HLO module: plain dataclasses, no parsing logic.

Attribute values are kept as the raw text XLA printed (``Instruction.attributes``) so a parse
stays cheap and a module prints back exactly.  The model imports none of the modules that read
it: ``profan.hlo.views`` decodes attributes (metadata, backend config, called computations,
replica groups, …) on demand, ``profan.hlo.graph`` resolves names and ``profan.hlo.printer``
prints text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# Bits per element of each primitive type XLA prints.  Sub-byte types are packed.
DTYPE_BITS: dict[str, int] = {
    "pred": 8,
    "s1": 1,
    "s2": 2,
    "s4": 4,
    "s8": 8,
    "s16": 16,
    "s32": 32,
    "s64": 64,
    "u1": 1,
    "u2": 2,
    "u4": 4,
    "u8": 8,
    "u16": 16,
    "u32": 32,
    "u64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "c64": 64,
    "c128": 128,
    "f8e5m2": 8,
    "f8e4m3": 8,
    "f8e4m3fn": 8,
    "f8e4m3b11fnuz": 8,
    "f8e5m2fnuz": 8,
    "f8e4m3fnuz": 8,
    "f8e3m4": 8,
    "f8e8m0fnu": 8,
    "f4e2m1fn": 4,
}

# Dimension size XLA prints as ``?`` (unbounded dynamic).
UNBOUNDED_DIM = -1


@dataclass(frozen=True, slots=True)
class Layout:
    """``{minor_to_major:items}`` of an array shape.

    ``tiles`` holds each ``T(...)`` tile as a tuple of ints; ``None`` stands for ``*`` (a combined
    dimension) and ``()`` for a scalar tile.  ``memory_space`` 0 is HBM/device memory; ``S(1)`` is
    TPU VMEM; other values are other spaces (host memory, SMEM, …).  ``other`` keeps layout items
    profan has no field for, verbatim, in order, so the layout prints back unchanged.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int | None, ...], ...] = ()
    element_size_bits: int | None = None  # E(n)
    memory_space: int = 0  # S(n)
    dim_level_types: tuple[str, ...] = ()  # D(...)
    tail_padding_alignment: int | None = None  # L(n)
    index_primitive_type: str | None = None  # #(s32)
    pointer_primitive_type: str | None = None  # *(s32)
    dynamic_shape_metadata_prefix_bytes: int | None = None  # M(n)
    split_configs: tuple[str, ...] = ()  # SC(...)
    physical_shape: Shape | None = None  # P(...)
    other: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Shape:
    """An array, tuple, token or opaque shape.

    ``dims`` holds each dimension's size (or its bound, for ``<=N``); an unbounded ``?`` dimension
    is ``UNBOUNDED_DIM``.  ``dynamic`` marks which dimensions were printed dynamic.
    """

    dtype: str  # "f32", "bf16", …, or "tuple", "token", "opaque"
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = None
    tuple_shapes: tuple[Shape, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle as a constructor call: several times faster to load than slot-by-slot state,
        # which keeps parse_file's cache near-instant on 50,000-line modules.
        return (Shape, (self.dtype, self.dims, self.dynamic, self.layout, self.tuple_shapes))

    @property
    def is_tuple(self) -> bool:
        return self.dtype == "tuple"

    @property
    def is_array(self) -> bool:
        return self.dtype in DTYPE_BITS

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def element_bits(self) -> int:
        """Bits of one element; the layout's ``E(n)`` wins over the dtype's natural size."""
        if self.layout is not None and self.layout.element_size_bits:
            return self.layout.element_size_bits
        return DTYPE_BITS.get(self.dtype, 0)

    @property
    def num_elements(self) -> int:
        """Elements of an array (unbounded dims count as 0); 0 for tuples, tokens, opaque."""
        if not self.is_array:
            return 0
        count = 1
        for size in self.dims:
            count *= max(size, 0)
        return count

    def leaves(self) -> Iterator[Shape]:
        """Every non-tuple shape inside, depth first (the shape itself when not a tuple)."""
        if self.is_tuple:
            for element in self.tuple_shapes:
                yield from element.leaves()
        else:
            yield self


# The shape of an instruction the text printed without one, when it cannot be inferred (see
# profan.hlo.inference): its size is unknown.
UNKNOWN_SHAPE = Shape("unknown")


@dataclass(frozen=True, slots=True)
class Operand:
    """One operand reference: its name, and its shape when the text printed it."""

    name: str
    shape: Shape | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (Operand, (self.name, self.shape))


@dataclass(frozen=True, slots=True)
class Metadata:
    """``metadata={...}`` of an instruction (fields XLA does not print stay ``None``)."""

    op_type: str | None = None
    op_name: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    source_end_line: int | None = None
    source_column: int | None = None
    source_end_column: int | None = None
    stack_frame_id: int | None = None
    other: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where in the user's code an instruction came from."""

    file: str
    line: int
    function: str | None = None
    column: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(slots=True)
class Instruction:
    """One HLO instruction.

    ``attributes`` maps each ``name=value`` attribute to its value text exactly as printed, in
    printing order.  ``literal`` holds a constant's literal text; ``parameter_number`` a
    parameter's index.  ``computation`` is set to the name of the computation that holds it.
    An instruction printed without a shape gets the inferred one where that is plain (tuple,
    get-tuple-element, compare, elementwise), else ``Shape("unknown")``; a ``b(shape)`` buffer
    type is ``Shape("buffer", tuple_shapes=(shape,))``.
    """

    name: str
    opcode: str
    shape: Shape
    operands: list[Operand] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    is_root: bool = False
    literal: str | None = None
    parameter_number: int | None = None
    computation: str | None = field(default=None, compare=False)
    # A line as XProf shows it may leave operands out: ``fusion(...)`` or ``fusion(%a, %b,
    # ...(+3))``.  ``operands`` then holds only those shown; ``elided_operand_count`` says how
    # many more there are when the line tells (``...(+3)``).  Only ``parse_instruction`` accepts
    # this; a module never has it.
    operands_elided: bool = False
    elided_operand_count: int | None = None
    # A get-tuple-element the text did not print: newer XLA writes an element of a tuple result
    # as the operand `%name#N`; the parser adds the get-tuple-element (named `name#N`) that XLA's
    # IR has, and the printer leaves it out again.
    implicit: bool = False
    _metadata: Metadata | None = field(default=None, compare=False, repr=False)
    _backend_config: dict[str, Any] | bool | None = field(default=False, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # Memoised views are left out: they are rebuilt on first use.
        fields = (self.name, self.opcode, self.shape, self.operands, self.attributes)
        rest: tuple[Any, ...] = (
            self.is_root,
            self.literal,
            self.parameter_number,
            self.computation,
        )
        if self.operands_elided or self.implicit:
            rest += (self.operands_elided, self.elided_operand_count, self.implicit)
        return (Instruction, fields + rest)

    @property
    def operand_names(self) -> list[str]:
        return [operand.name for operand in self.operands]

    # Decoded views of the attributes (metadata, backend config, called computations, …) are
    # functions of profan.hlo.views; printing is profan.hlo.printer.  The two fields below are
    # where views memoise the costlier decodes.

    @property
    def backend_config(self) -> str | None:
        """The backend config's raw text as printed (quoted string or bare ``{...}``); decoded
        by ``profan.hlo.views.backend_config``."""
        return self.attributes.get("backend_config")

    @property
    def fusion_kind(self) -> str | None:
        """``kLoop``, ``kInput``, ``kOutput``, ``kCustom`` for fusions, else ``None``."""
        return self.attributes.get("kind") if self.opcode == "fusion" else None


@dataclass(slots=True)
class Computation:
    """A named computation: its instructions in printed order."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)
    is_entry: bool = False
    execution_thread: str | None = None
    # name index, and how many instructions it was built from (rebuilt when that changes)
    _by_name: dict[str, Instruction] | None = field(default=None, compare=False, repr=False)
    _indexed: int = field(default=-1, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Computation, (self.name, self.instructions, self.is_entry, self.execution_thread))

    @property
    def root(self) -> Instruction:
        for instruction in self.instructions:
            if instruction.is_root:
                return instruction
        return self.instructions[-1]

    @property
    def params(self) -> list[Instruction]:
        """Parameters in parameter-number order."""
        found = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(found, key=lambda i: i.parameter_number or 0)

    def __getitem__(self, name: str) -> Instruction:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def get(self, name: str) -> Instruction | None:
        if self._by_name is None or self._indexed != len(self.instructions):
            self._by_name = {i.name: i for i in self.instructions}
            self._indexed = len(self.instructions)
        return self._by_name.get(name.lstrip("%"))

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)


@dataclass(frozen=True, slots=True)
class FileLocation:
    """A row of the module's ``FileLocations`` table."""

    file_name_id: int
    function_name_id: int
    line: int
    end_line: int | None = None
    column: int | None = None
    end_column: int | None = None


@dataclass(frozen=True, slots=True)
class StackFrame:
    """A row of the module's ``StackFrames`` table (``parent_frame_id`` 0 = none)."""

    file_location_id: int
    parent_frame_id: int = 0


@dataclass(slots=True)
class StackFrameTables:
    """The module-level tables that ``metadata={stack_frame_id=N}`` points into (1-based ids)."""

    file_names: dict[int, str] = field(default_factory=dict)
    function_names: dict[int, str] = field(default_factory=dict)
    file_locations: dict[int, FileLocation] = field(default_factory=dict)
    stack_frames: dict[int, StackFrame] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.stack_frames or self.file_locations or self.file_names)


@dataclass(slots=True)
class Module:
    """An HLO module: header attributes, computations, and the stack-frame tables."""

    name: str
    computations: list[Computation] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)
    stack_frames: StackFrameTables = field(default_factory=StackFrameTables)
    _by_name: dict[str, Computation] | None = field(default=None, compare=False, repr=False)
    _indexed: int = field(default=-1, compare=False, repr=False)

    def has_memos(self) -> bool:
        """Whether a memoised view is set anywhere in the module (a name index, a decoded
        metadata or backend config): a module just built has none."""
        if self._by_name is not None or self._indexed != -1:
            return True
        for computation in self.computations:
            if computation._by_name is not None or computation._indexed != -1:
                return True
            for instruction in computation.instructions:
                if instruction._metadata is not None or instruction._backend_config is not False:
                    return True
        return False

    @property
    def entry(self) -> Computation:
        for computation in self.computations:
            if computation.is_entry:
                return computation
        return self.computations[-1]

    def computation(self, name: str) -> Computation:
        if self._by_name is None or self._indexed != len(self.computations):
            self._by_name = {c.name: c for c in self.computations}
            self._indexed = len(self.computations)
        return self._by_name[name.lstrip("%")]

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every computation, in printed order."""
        for computation in self.computations:
            yield from computation.instructions

    @property
    def num_devices(self) -> int:
        """Devices one execution runs on: partitions times replicas (at least 1)."""
        return max(self.num_partitions, 1) * max(self.replica_count, 1)

    @property
    def num_partitions(self) -> int:
        return int(self.attributes.get("num_partitions", "1"))

    @property
    def replica_count(self) -> int:
        return int(self.attributes.get("replica_count", "1"))

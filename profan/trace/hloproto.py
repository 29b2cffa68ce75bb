"""Serialized ``xla.HloProto`` (as embedded in traces) -> profan's HLO model, without jax.

The profiler stores each program it saw as a serialized ``HloProto`` in the ``/host:metadata``
plane.  This module decodes it with profan's own schema subset (``hlo.proto``) and builds
``profan.hlo.model`` objects directly.  Attribute values are produced in the exact text form XLA's
HLO printer writes (and the text parser keeps), e.g. ``replica_groups={{0,1},{2,3}}`` or
``[4,2]<=[2,4]T(1,0)``, ``lhs_contracting_dims={1}``, ``window={size=3x3 pad=1_1x1_1}``, so code
downstream works the same whichever source a module came from.
"""

from __future__ import annotations

from functools import cache

from google.protobuf.message import DecodeError, Message

from profan.errors import TraceError
from profan.hlo.model import (
    UNBOUNDED_DIM,
    Computation,
    FileLocation,
    Instruction,
    Layout,
    Module,
    Operand,
    Shape,
    StackFrame,
    StackFrameTables,
)
from profan.hlo.shapes import shape_to_text
from profan.hlo.verify import first_problem
from profan.trace.hloattrs import _attributes, _ints, _literal, frontend_attributes_text
from profan.trace.schema import load_schema

_COMBINED_DIMENSION = -(2**63)  # a tile dimension printed as '*'
# XLA stores an unbounded dynamic dimension ('?') as Shape::kUnboundedSize, INT64_MIN; the
# model holds it as UNBOUNDED_DIM, as the text parser does.
_UNBOUNDED_SIZE = -(2**63)


@cache
def _classes() -> dict[str, type[Message]]:
    return load_schema("hlo.proto")


@cache
def _enum_names(enum: str) -> dict[int, str]:
    descriptor = _classes()["xla.HloProto"].DESCRIPTOR.file.enum_types_by_name[enum]
    return {value.number: value.name for value in descriptor.values}


def _dtype(element_type: int) -> str:
    name = _enum_names("PrimitiveType").get(element_type, f"type{element_type}")
    return {"TUPLE": "tuple", "OPAQUE_TYPE": "opaque", "TOKEN": "token"}.get(name, name.lower())


def decode_hlo_proto(data: bytes, *, where: str) -> Message:
    """Parse serialized ``xla.HloProto`` bytes (``where`` names them in errors)."""
    try:
        return _classes()["xla.HloProto"].FromString(data)
    except DecodeError as error:
        raise TraceError(where, f"embedded HloProto does not decode: {error}") from None


def module_from_proto_bytes(data: bytes, *, where: str) -> Module:
    """A ``Module`` from serialized ``HloProto`` (or bare ``HloModuleProto``) bytes."""
    proto = decode_hlo_proto(data, where=where)
    module_proto = proto.hlo_module
    if not module_proto.computations:
        raise TraceError(where, "embedded HloProto holds no computations")
    module = module_from_proto(module_proto)
    # Verified as parsed text is (profan.hlo.verify), before it is cached or costed.
    problem = first_problem(module)
    if problem is not None:
        raise TraceError(where, f"invalid HLO: {problem}")
    return module


# ------------------------------------------------------------------------------ shapes


def _layout(proto: Message, rank: int) -> Layout | None:
    minor_to_major = tuple(proto.minor_to_major)
    tiles = tuple(
        tuple(None if d == _COMBINED_DIMENSION else d for d in tile.dimensions)
        for tile in proto.tiles
    )
    dim_level_names = {0: "D", 1: "C", 2: "S", 3: "H"}
    physical = _shape(proto.physical_shape) if proto.HasField("physical_shape") else None
    index_type = _dtype(proto.index_primitive_type) if proto.index_primitive_type else None
    pointer_type = _dtype(proto.pointer_primitive_type) if proto.pointer_primitive_type else None
    layout = Layout(
        minor_to_major=minor_to_major,
        tiles=tiles,
        element_size_bits=proto.element_size_in_bits or None,
        memory_space=proto.memory_space,
        dim_level_types=tuple(dim_level_names.get(t, "D") for t in proto.dim_level_types),
        tail_padding_alignment=(
            proto.tail_padding_alignment_in_elements
            if proto.tail_padding_alignment_in_elements > 1
            else None
        ),
        index_primitive_type=index_type,
        pointer_primitive_type=pointer_type,
        dynamic_shape_metadata_prefix_bytes=proto.dynamic_shape_metadata_prefix_bytes or None,
        split_configs=tuple(
            f"{c.dimension}:{','.join(map(str, c.split_indices))}" for c in proto.split_configs
        ),
        physical_shape=physical,
    )
    if rank == 0 and layout == Layout(minor_to_major=()):
        return None  # XLA prints a plain scalar with a default layout without braces
    return layout


def _shape(proto: Message) -> Shape:
    dtype = _dtype(proto.element_type)
    if dtype == "tuple":
        return Shape("tuple", tuple_shapes=tuple(_shape(s) for s in proto.tuple_shapes))
    if dtype in ("token", "opaque"):
        return Shape(dtype)
    dims = tuple(proto.dimensions)
    dynamic = tuple(proto.is_dynamic_dimension) or (False,) * len(dims)
    if _UNBOUNDED_SIZE in dims:
        dims = tuple(
            UNBOUNDED_DIM if d == _UNBOUNDED_SIZE and index < len(dynamic) and dynamic[index] else d
            for index, d in enumerate(dims)
        )
    layout = _layout(proto.layout, len(dims)) if proto.HasField("layout") else None
    return Shape(dtype, dims, dynamic, layout)


# The one shape printer is profan.hlo.shapes.shape_to_text; the old name stays importable for
# tests/test_trace_hloproto.py until it imports the printer itself.
shape_text = shape_to_text


# -------------------------------------------------------------------------- attributes


def module_from_proto(proto: Message) -> Module:
    """Build the model of one ``HloModuleProto``."""
    computation_names = {c.id: c.name for c in proto.computations}
    instruction_names = {i.id: i.name for c in proto.computations for i in c.instructions}
    instruction_shapes: dict[int, Shape] = {}
    schedule = {key: list(seq.instruction_ids) for key, seq in proto.schedule.sequences.items()}
    computations: list[Computation] = []
    for computation_proto in proto.computations:
        by_id = {i.id: i for i in computation_proto.instructions}
        order = schedule.get(computation_proto.id)
        if order is None or set(order) != set(by_id):
            order = [i.id for i in computation_proto.instructions]
        instructions: list[Instruction] = []
        for instruction_id in order:
            ip = by_id[instruction_id]
            shape = _shape(ip.shape)
            instruction_shapes[ip.id] = shape
            operands = [
                Operand(instruction_names.get(o, str(o)), instruction_shapes.get(o))
                for o in ip.operand_ids
            ]
            literal = _literal(ip.literal, shape) if ip.opcode == "constant" else None
            instructions.append(
                Instruction(
                    name=ip.name,
                    opcode=ip.opcode,
                    shape=shape,
                    operands=operands,
                    attributes=_attributes(ip, computation_names, instruction_names, shape),
                    is_root=ip.id == computation_proto.root_id,
                    literal=literal,
                    parameter_number=ip.parameter_number if ip.opcode == "parameter" else None,
                    computation=computation_proto.name,
                )
            )
        computations.append(
            Computation(
                name=computation_proto.name,
                instructions=instructions,
                is_entry=computation_proto.id == proto.entry_computation_id
                or (
                    not proto.entry_computation_id
                    and computation_proto.name == proto.entry_computation_name
                ),
                execution_thread=(
                    computation_proto.execution_thread
                    if computation_proto.execution_thread not in ("", "main")
                    else None
                ),
            )
        )
    return Module(
        name=proto.name,
        computations=computations,
        attributes=_module_attributes(proto, computations),
        stack_frames=_stack_frames(proto.stack_frame_index),
    )


def _module_attributes(proto: Message, computations: list[Computation]) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if proto.schedule.sequences:
        attrs["is_scheduled"] = "true"
    entries = list(proto.input_output_alias.entries)
    if entries:
        kinds = {1: "may-alias", 2: "must-alias"}
        attrs["input_output_alias"] = (
            "{ "
            + ", ".join(
                f"{_ints(e.output_shape_index)}: ({e.parameter_number}, "
                f"{_ints(e.parameter_shape_index)}, {kinds.get(e.kind, 'may-alias')})"
                for e in entries
            )
            + " }"
        )
    entry = next((c for c in computations if c.is_entry), None)
    if proto.HasField("host_program_shape") or entry is not None:
        program = proto.host_program_shape
        params = [shape_to_text(_shape(p)) for p in program.parameters]
        result = shape_to_text(_shape(program.result)) if program.HasField("result") else None
        if entry is not None and result is None:
            params = [shape_to_text(p.shape) for p in entry.params]
            result = shape_to_text(entry.root.shape)
        attrs["entry_computation_layout"] = "{(" + ", ".join(params) + ")->" + str(result) + "}"
    if proto.HasField("device_assignment"):
        assignment = proto.device_assignment
        if assignment.replica_count > 1:
            attrs["replica_count"] = str(assignment.replica_count)
        if assignment.computation_count > 1:
            attrs["num_partitions"] = str(assignment.computation_count)
    if proto.frontend_attributes.map:
        attrs["frontend_attributes"] = frontend_attributes_text(proto.frontend_attributes)
    return attrs


def _stack_frames(proto: Message) -> StackFrameTables:
    tables = StackFrameTables()
    for index, name in enumerate(proto.file_names, start=1):
        tables.file_names[index] = name
    for index, name in enumerate(proto.function_names, start=1):
        tables.function_names[index] = name
    for index, location in enumerate(proto.file_locations, start=1):
        tables.file_locations[index] = FileLocation(
            file_name_id=location.file_name_id,
            function_name_id=location.function_name_id,
            line=location.line,
            column=location.column or None,
        )
    for index, frame in enumerate(proto.stack_frames, start=1):
        tables.stack_frames[index] = StackFrame(frame.file_location_id, frame.parent_frame_id)
    return tables

"""The compiler's buffer assignment (``HloProto`` field 3) -> ``ProgramMemory`` per memory space.

Totals follow XLA's own ``CompiledMemoryStats`` (what ``compiled.memory_analysis()`` returns):
an allocation that is an entry parameter adds its size to the arguments (and to the alias total
when ``input_output_alias`` gives that parameter's buffer to an output); one that may be live out
adds to the outputs; one that is none of parameter, live-out, thread-local or constant is a
preallocated temporary.  The peak is XProf's memory viewer's (on GPU also XLA's own
``peak_memory_in_bytes``): the allocations that live the whole program (parameters, outputs,
constants) plus the peak of the heap-simulator replay of the temporaries
(``profan.memory.heap``).  Thread-local allocations (a thread's stack or registers, not device
memory) are reported apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf.message import Message

from profan.hlo import views
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.opcodes import memory_space_name
from profan.hlo.shapes import shape_to_text
from profan.memory.heap import HeapEvent, HeapReplay, replay
from profan.memory.model import (
    ALIASED,
    CONSTANT,
    OUTPUT,
    PARAMETER,
    SOURCE_BUFFER_ASSIGNMENT,
    TEMPORARY,
    THREAD_LOCAL,
    Buffer,
    ProgramMemory,
    TimelinePoint,
)


@dataclass(frozen=True, slots=True)
class _Logical:
    id: int
    size: int
    instruction_id: int
    shape_index: tuple[int, ...]
    colour: int


def allocation_kind(allocation: Message, aliased: set[tuple[int, tuple[int, ...]]]) -> str:
    """XProf's category of an allocation, with donation (parameter aliased to output) apart."""
    if allocation.is_entry_computation_parameter:
        key = (allocation.parameter_number, tuple(allocation.parameter_shape_index))
        return ALIASED if key in aliased else PARAMETER
    if allocation.maybe_live_out:
        return OUTPUT
    if allocation.is_thread_local:
        return THREAD_LOCAL
    if allocation.is_constant:
        return CONSTANT
    return TEMPORARY


def _whole_program(allocation: Message) -> bool:
    """Allocations the heap simulator does not see: they live for the whole execution.
    (Thread-local ones are not device memory: a thread's stack or registers.)"""
    return bool(
        allocation.is_entry_computation_parameter
        or allocation.is_constant
        or allocation.maybe_live_out
    )


class _Names:
    """Instruction facts by id, from the proto (ids) and profan's module (shapes, metadata)."""

    def __init__(self, proto: Message, module: Module | None) -> None:
        self.module = module
        self.by_id: dict[int, tuple[str, str, str]] = {}  # id -> (computation, name, opcode)
        for computation in proto.hlo_module.computations:
            for instruction in computation.instructions:
                self.by_id[instruction.id] = (
                    computation.name,
                    instruction.name,
                    instruction.opcode,
                )

    def instruction(self, instruction_id: int) -> tuple[str, str, str, Instruction | None]:
        computation, name, opcode = self.by_id.get(instruction_id, ("", f"#{instruction_id}", ""))
        found = None
        if self.module is not None and computation:
            try:
                found = self.module.computation(computation).get(name)
            except KeyError:
                found = None
        return computation, name, opcode, found


def _element_shape(shape: Shape, index: Sequence[int]) -> Shape | None:
    for position in index:
        if not shape.is_tuple or position >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[position]
    return shape


def _buffer(
    logical: _Logical,
    size: int,
    kind: str,
    allocation: Message,
    names: _Names,
) -> Buffer:
    computation, name, opcode, instruction = names.instruction(logical.instruction_id)
    label = name + (
        "{" + ",".join(map(str, logical.shape_index)) + "}" if logical.shape_index else ""
    )
    shape_text = ""
    source = op_path = None
    if instruction is not None:
        element = _element_shape(instruction.shape, logical.shape_index)
        shape_text = shape_to_text(element) if element is not None else ""
        op_path = views.metadata(instruction).op_name
        location = views.source_location(names.module, instruction) if names.module else None
        source = str(location) if location is not None else None
    return Buffer(
        name=label,
        size_bytes=size,
        kind=kind,
        shape=shape_text,
        opcode=opcode,
        computation=computation,
        source=source,
        op_path=op_path,
        logical_buffer_id=logical.id,
        allocation=allocation.index,
        parameter_number=(
            allocation.parameter_number if allocation.is_entry_computation_parameter else None
        ),
    )


def _trace_allocations(
    assignment: Message, allocation_of: dict[int, Message]
) -> dict[int, list[Message]]:
    """Heap-simulator traces by the allocation they place buffers into (found from the buffers
    the events name, as XProf does: the trace's own allocation index is not reliable)."""
    traces: dict[int, list[Message]] = defaultdict(list)
    for trace in assignment.heap_simulator_traces:
        for event in trace.events:
            allocation = allocation_of.get(event.buffer_id)
            if allocation is not None:
                traces[allocation.index].append(trace)
                break
    return traces


def _events(trace: Message) -> list[HeapEvent]:
    return [
        HeapEvent(
            e.kind, e.buffer_id, e.computation_name, e.instruction_name, e.share_with_canonical_id
        )
        for e in trace.events
    ]


def program_memory(proto: Message, module: Module | None, key: str) -> list[ProgramMemory]:
    """One ``ProgramMemory`` per memory space the buffer assignment uses (device first).

    ``proto``: a decoded ``xla.HloProto``; ``module``: profan's model of the same module (for
    shapes, metadata and source lines; optional); ``key``: the name to report it under."""
    assignment = proto.buffer_assignment
    if not assignment.buffer_allocations:
        return []
    names = _Names(proto, module)
    logicals = {
        b.id: _Logical(
            b.id, b.size, b.defined_at.instruction_id, tuple(b.defined_at.shape_index), b.color
        )
        for b in assignment.logical_buffers
    }
    aliased = {
        (entry.parameter_number, tuple(entry.parameter_shape_index))
        for entry in proto.hlo_module.input_output_alias.entries
    }
    allocation_of: dict[int, Message] = {}
    for allocation in assignment.buffer_allocations:
        for assigned in allocation.assigned:
            allocation_of[assigned.logical_buffer_id] = allocation
    traces = _trace_allocations(assignment, allocation_of)
    colours = sorted({a.color for a in assignment.buffer_allocations})
    return [
        _one_space(colour, assignment, logicals, aliased, traces, names, key) for colour in colours
    ]


def _one_space(
    colour: int,
    assignment: Message,
    logicals: dict[int, _Logical],
    aliased: set[tuple[int, tuple[int, ...]]],
    traces: dict[int, list[Message]],
    names: _Names,
    key: str,
) -> ProgramMemory:
    allocations = [a for a in assignment.buffer_allocations if a.color == colour]
    memory = ProgramMemory(
        module=key,
        memory_space=memory_space_name(colour),
        source=SOURCE_BUFFER_ASSIGNMENT,
        argument_bytes=0,
        output_bytes=0,
        alias_bytes=0,
        temp_bytes=0,
        peak_bytes=0,
    )
    fixed: list[Buffer] = []  # allocations present for the whole program (and untraced temps)
    sizes = {i: b.size for i, b in logicals.items()}
    best: tuple[Message, HeapReplay, Message] | None = None  # the main heap: largest peak
    heap_peaks = 0
    untraced = 0
    for allocation in allocations:
        kind = allocation_kind(allocation, aliased)
        if allocation.is_entry_computation_parameter:
            memory.argument_bytes += allocation.size
            if kind == ALIASED:
                memory.alias_bytes += allocation.size
        if allocation.maybe_live_out:
            memory.output_bytes += allocation.size
        if allocation.is_constant:
            memory.constant_bytes += allocation.size
        if allocation.is_thread_local:
            memory.thread_local_bytes += allocation.size
        members = [
            logicals[a.logical_buffer_id]
            for a in allocation.assigned
            if a.logical_buffer_id in logicals
        ]
        if kind == TEMPORARY:
            memory.temp_bytes += allocation.size
            memory.logical_temp_bytes += sum(m.size for m in members)
        if kind == THREAD_LOCAL:
            continue  # not on the device heap: reported as thread_local_bytes only
        replays = [(replay(_events(t), sizes), t) for t in traces.get(allocation.index, [])]
        if _whole_program(allocation) or not replays:
            if kind == TEMPORARY:
                untraced += 1
            if members:
                largest = max(members, key=lambda m: m.size)
                fixed.append(_buffer(largest, allocation.size, kind, allocation, names))
            continue
        heap, trace = max(replays, key=lambda pair: pair[0].peak_bytes)
        for problem in heap.problems:
            memory.notes.append(f"allocation {allocation.index}: {problem}")
        heap_peaks += heap.peak_bytes
        memory.fragmentation_bytes += allocation.size - heap.peak_bytes
        if best is None or heap.peak_bytes > best[1].peak_bytes:
            best = (allocation, heap, trace)
        for buffer_id in heap.live_at_peak:
            memory.live_at_peak.append(
                _buffer(logicals[buffer_id], sizes[buffer_id], kind, allocation, names)
            )
    base = sum(b.size_bytes for b in fixed)
    memory.heap_peak_bytes = heap_peaks
    memory.peak_bytes = base + heap_peaks
    memory.live_at_peak.extend(fixed)
    memory.live_at_peak.sort(key=lambda b: (-b.size_bytes, b.name))
    if untraced:
        memory.notes.append(
            f"{untraced} temporary allocation(s) without a heap-simulator trace are counted at "
            "their full size for the whole program"
        )
    if best is not None:
        allocation, heap, trace = best
        others = base + heap_peaks - heap.peak_bytes
        events = trace.events
        memory.timeline = [
            TimelinePoint(others + after, event.instruction_name, event.computation_name)
            for after, event in zip(heap.heap_after, events, strict=True)
        ]
        if heap.peak_position is not None:
            at = events[heap.peak_position]
            memory.peak_position = heap.peak_position
            memory.peak_instruction = at.instruction_name
            memory.peak_computation = at.computation_name
    return memory

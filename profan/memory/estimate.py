"""A static memory estimate from HLO text alone: liveness over a scheduled module's printed order.

For checking a dump before running it.  Arguments, outputs and donation come straight from the
entry computation's parameters, its root and ``input_output_alias``, sized as XLA sizes buffers
(arrays as stored, with tiling padding; 8 bytes per tuple element for a tuple's index table), so
they equal the compiler's totals.  The temporaries are an ESTIMATE: every value an instruction of
the entry computation defines is live from its definition to its last use in the printed order
(the schedule, when ``is_scheduled=true``), plus the same estimate of a loop body or branch while
that instruction runs.  It differs from the compiler's figure because it does not model:
- heap fragmentation (the compiler's temporary allocation is larger than its live peak);
- buffer sharing: XLA places an output on top of an operand that dies there (in-place fusions,
  dynamic-update-slice), which lowers the real peak;
- buffers XLA adds or removes after the printed module (copies for layouts or aliasing, thread-
  local scalars, collective scratch space, cuDNN/cuBLAS workspaces inside custom-call tuples are
  counted as the text shows them).
"""

from __future__ import annotations

import re

from profan.cost.bytes import array_bytes, memory_space
from profan.hlo import views
from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.shapes import shape_to_text
from profan.hlo.views import called_computations
from profan.memory.model import (
    ALIASED,
    CONSTANT,
    OUTPUT,
    PARAMETER,
    SOURCE_ESTIMATE,
    TEMPORARY,
    Buffer,
    ProgramMemory,
    TimelinePoint,
)

TUPLE_POINTER_BYTES = 8
# Instructions whose result is an operand's buffer (a view): they define no memory.  A while
# loop's state lives in its init operand's buffers (XLA updates the loop state in place).
_VIEWS = frozenset({"bitcast", "opt-barrier", "domain", "while"})
# Computations an instruction runs as a program of its own (its temporaries add to the caller's).
_NESTED_RUNNERS = frozenset({"while", "conditional", "call", "async-start"})
_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")

ESTIMATE_NOTE = (
    "estimate from the HLO text: liveness over the printed order; no heap fragmentation, no "
    "buffer sharing XLA may do (in-place outputs), no buffers XLA adds after this module"
)

# A buffer: the instruction that defines it and the shape index inside its result.
BufferKey = tuple[str, tuple[int, ...]]


def _device(shape: Shape) -> bool:
    return memory_space(shape) == 0


def allocation_bytes(shape: Shape) -> int:
    """Device-memory bytes XLA allocates for a value of ``shape``: each array as stored, plus
    one pointer per element of every tuple (its index table)."""
    if shape.is_tuple:
        return TUPLE_POINTER_BYTES * len(shape.tuple_shapes) + sum(
            allocation_bytes(element) for element in shape.tuple_shapes
        )
    return array_bytes(shape) if shape.is_array and _device(shape) else 0


def buffer_bytes(shape: Shape) -> int:
    """Bytes of the one buffer at a shape index: a tuple's index table, or the array."""
    if shape.is_tuple:
        return TUPLE_POINTER_BYTES * len(shape.tuple_shapes)
    return array_bytes(shape) if shape.is_array and _device(shape) else 0


def alias_entries(module: Module) -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """(output index, parameter number, parameter shape index) of each ``input_output_alias``."""

    def index(text: str) -> tuple[int, ...]:
        return tuple(int(i) for i in text.replace(" ", "").split(",") if i)

    text = module.attributes.get("input_output_alias", "")
    return [
        (index(output), int(number), index(parameter))
        for output, number, parameter in _ALIAS_ENTRY.findall(text)
    ]


def _element(shape: Shape, index: tuple[int, ...]) -> Shape | None:
    for position in index:
        if not shape.is_tuple or position >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[position]
    return shape


def _known(shape: Shape | None) -> bool:
    return shape is not None and (shape.is_tuple or shape.is_array or shape.dtype == "token")


def _indices(shape: Shape, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Every shape index of a shape: the tuple itself first, then its elements, depth first."""
    found = [prefix]
    if shape.is_tuple:
        for position, element in enumerate(shape.tuple_shapes):
            found.extend(_indices(element, (*prefix, position)))
    return found


class _Values:
    """Which buffer holds each (instruction, shape index) of one computation's values: views,
    get-tuple-element, tuple elements and async dones resolve to the buffer that defined them."""

    def __init__(self, computation: Computation) -> None:
        self.by_name = {i.name: i for i in computation.instructions}
        self._memo: dict[BufferKey, BufferKey] = {}

    def resolve(self, name: str, index: tuple[int, ...], depth: int = 0) -> BufferKey:
        key = (name, index)
        if key in self._memo:
            return self._memo[key]
        found = key
        instruction = self.by_name.get(name)
        if instruction is not None and depth < 10_000 and instruction.operands:
            opcode = instruction.opcode
            first = instruction.operands[0].name
            if opcode in _VIEWS and first in self.by_name:
                found = self.resolve(first, index, depth + 1)
            elif opcode == "get-tuple-element" and first in self.by_name:
                position = int(instruction.attributes.get("index", "0"))
                found = self.resolve(first, (position, *index), depth + 1)
            elif opcode == "tuple" and index:
                operand = (
                    instruction.operands[index[0]].name
                    if index[0] < len(instruction.operands)
                    else None
                )
                if operand in self.by_name:
                    found = self.resolve(operand, index[1:], depth + 1)
            elif opcode.endswith("-done") and first in self.by_name:
                started = self.by_name[first].shape
                if started.is_tuple:
                    # copy-start is (destination, source, context); the other starts hold
                    # (operands, result, ...): the done's result is element 0 or 1.
                    element = 0 if opcode == "copy-done" else 1
                    found = self.resolve(first, (element, *index), depth + 1)
                else:
                    found = self.resolve(first, index, depth + 1)
        self._memo[key] = found
        return found

    def buffers(self, name: str) -> set[BufferKey]:
        """Every buffer a value (all of its shape indices) lives in."""
        instruction = self.by_name.get(name)
        if instruction is None:
            return set()
        return {self.resolve(name, index) for index in _indices(instruction.shape)}

    def defined(self, instruction: Instruction) -> list[tuple[tuple[int, ...], int]]:
        """(shape index, bytes) of the buffers this instruction itself defines."""
        found = []
        for index in _indices(instruction.shape):
            if self.resolve(instruction.name, index) == (instruction.name, index):
                element = _element(instruction.shape, index)
                size = buffer_bytes(element) if element is not None else 0
                if size:
                    found.append((index, size))
        return found


def _liveness(
    computation: Computation, values: _Values, excluded: set[BufferKey]
) -> tuple[list[int], dict[BufferKey, tuple[int, int, int]]]:
    """Bytes of temporaries live at each position, and each temporary buffer's (first, last,
    bytes)."""
    last_use: dict[BufferKey, int] = {}
    for n, instruction in enumerate(computation.instructions):
        for operand in instruction.operands:
            for key in values.buffers(operand.name):
                last_use[key] = n
    spans: dict[BufferKey, tuple[int, int, int]] = {}
    live = [0] * (len(computation.instructions) + 1)
    for n, instruction in enumerate(computation.instructions):
        if instruction.opcode in ("parameter", "constant"):
            continue
        for index, size in values.defined(instruction):
            key = (instruction.name, index)
            if key in excluded:
                continue
            end = max(last_use.get(key, n), n)
            spans[key] = (n, end, size)
            live[n] += size
            live[end + 1] -= size
    running = 0
    for n in range(len(live)):
        running += live[n]
        live[n] = running
    return live[:-1], spans


def _nested_peak(module: Module, instruction: Instruction, depth: int = 0) -> int:
    """Temporaries of the loop bodies, branches or called computations an instruction runs."""
    if instruction.opcode not in _NESTED_RUNNERS or depth > 50:
        return 0
    peak = 0
    for name in called_computations(instruction):
        try:
            computation = module.computation(name)
        except KeyError:
            continue
        peak = max(peak, computation_temp_peak(module, computation, depth + 1)[0])
    return peak


def computation_temp_peak(
    module: Module, computation: Computation, depth: int = 0
) -> tuple[int, int, list[int], dict[BufferKey, tuple[int, int, int]]]:
    """(peak temporary bytes, position of the peak, live bytes by position, spans) of one
    computation; its parameters and whatever reaches its root are not temporaries."""
    values = _Values(computation)
    live, spans = _liveness(computation, values, values.buffers(computation.root.name))
    for n, instruction in enumerate(computation.instructions):
        live[n] += _nested_peak(module, instruction, depth)
    if not live:
        return 0, 0, live, spans
    peak = max(live)
    return peak, live.index(peak), live, spans


def _buffer(
    module: Module, instruction: Instruction, size: int, kind: str, index: tuple[int, ...] = ()
) -> Buffer:
    location = views.source_location(module, instruction)
    element = _element(instruction.shape, index) or instruction.shape
    return Buffer(
        name=instruction.name + ("{" + ",".join(map(str, index)) + "}" if index else ""),
        size_bytes=size,
        kind=kind,
        shape=shape_to_text(element),
        opcode=instruction.opcode,
        computation=instruction.computation or "",
        source=str(location) if location is not None else None,
        op_path=views.metadata(instruction).op_name,
        parameter_number=instruction.parameter_number,
    )


def estimate(module: Module) -> ProgramMemory:
    """The static estimate of one module's device memory (``source == "estimate"``)."""
    entry = module.entry
    memory = ProgramMemory(
        module=module.name,
        memory_space="device",
        source=SOURCE_ESTIMATE,
        argument_bytes=0,
        output_bytes=0,
        alias_bytes=0,
        temp_bytes=0,
        peak_bytes=0,
        notes=[ESTIMATE_NOTE],
    )
    if module.attributes.get("is_scheduled") != "true":
        memory.notes.append(
            "the module is not scheduled (is_scheduled=true missing): its printed order may "
            "not be the order it runs in"
        )
    fixed: list[Buffer] = []
    aliases = alias_entries(module)
    donated = {number for _, number, _ in aliases}
    aliased_outputs: dict[tuple[int, ...], int] = {}  # output index -> the parameter's bytes
    for parameter in entry.params:
        size = allocation_bytes(parameter.shape)
        memory.argument_bytes += size
        number = parameter.parameter_number or 0
        for _, alias_number, index in aliases:
            element = _element(parameter.shape, index) if alias_number == number else None
            if element is not None:
                memory.alias_bytes += allocation_bytes(element)
                for output, alias_number_, index_ in aliases:
                    if (alias_number_, index_) == (number, index):
                        aliased_outputs[output] = buffer_bytes(element)
        kind = ALIASED if number in donated else PARAMETER
        fixed.append(_buffer(module, parameter, size, kind))
    values = _Values(entry)
    root = entry.root
    seen: set[BufferKey] = set()
    repeated = 0
    for output_index in _indices(root.shape):
        name, index = values.resolve(root.name, output_index)
        copy = (name, index) in seen
        seen.add((name, index))
        if copy:
            # Two outputs in one buffer: XLA's copy insertion gives the second its own.
            repeated += 1
        instruction = values.by_name[name]
        element = _element(instruction.shape, index)
        size = buffer_bytes(element) if element is not None else 0
        donor = aliased_outputs.get(output_index)
        if donor is not None and donor != size:
            # A donated output is the parameter's buffer, whatever the text prints for it
            # (a shape left out, or one that does not match).
            if _known(element):
                memory.notes.append(
                    f"output {{{','.join(map(str, output_index))}}} is {size} B but aliases a "
                    f"{donor}-byte parameter: counted as the parameter's buffer"
                )
            size = donor
        memory.output_bytes += size
        if size and output_index not in aliased_outputs:
            # An aliased output lives in its parameter's buffer, listed once as that parameter;
            # any other output is a buffer of its own (XLA copies a parameter it returns).
            fixed.append(_buffer(module, instruction, size, OUTPUT, index))
    if repeated:
        memory.notes.append(
            f"{repeated} output(s) repeat a buffer another output holds: counted again, as the "
            "copy XLA adds"
        )
    for instruction in entry.instructions:
        if instruction.opcode == "constant":
            size = allocation_bytes(instruction.shape)
            memory.constant_bytes += size
            if size:
                fixed.append(_buffer(module, instruction, size, CONSTANT))
    unknown = [i.name for i in entry.instructions if not _known(i.shape)]
    if unknown:
        memory.notes.append(
            f"{len(unknown)} instruction(s) without a printed shape count 0 bytes: "
            + ", ".join(unknown[:5])
            + (" …" if len(unknown) > 5 else "")
        )
    peak, at, live, spans = computation_temp_peak(module, entry)
    memory.temp_bytes = peak
    memory.heap_peak_bytes = peak
    memory.peak_bytes = (
        memory.argument_bytes + memory.output_bytes - memory.alias_bytes + memory.constant_bytes
    )
    memory.peak_bytes += peak
    base = memory.peak_bytes - peak
    memory.timeline = [
        TimelinePoint(base + bytes_live, i.name, entry.name)
        for bytes_live, i in zip(live, entry.instructions, strict=True)
    ]
    if entry.instructions:
        memory.peak_position = at
        memory.peak_instruction = entry.instructions[at].name
        memory.peak_computation = entry.name
    for (name, index), (start, end, size) in spans.items():
        if start <= at <= end:
            instruction = values.by_name[name]
            memory.live_at_peak.append(_buffer(module, instruction, size, TEMPORARY, index))
    nested = live[at] - sum(b.size_bytes for b in memory.live_at_peak) if live else 0
    if nested > 0:
        memory.notes.append(
            f"{nested} bytes of the peak are temporaries of {entry.instructions[at].name}'s "
            "called computations"
        )
    memory.live_at_peak.extend(fixed)
    memory.live_at_peak.sort(key=lambda b: (-b.size_bytes, b.name))
    return memory

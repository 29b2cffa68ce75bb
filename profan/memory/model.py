"""The memory model: where one program's device memory goes, as plain dataclasses.

One ``ProgramMemory`` per (program, memory space).  Its figures come either from the compiler's
buffer assignment embedded in a trace (``source == "buffer-assignment"``) or from liveness over a
scheduled module's printed order (``source == "estimate"``); ``notes`` says what an estimate
leaves out.  Sizes are bytes per device.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Buffer kinds, as XProf's memory viewer groups allocations (plus donation made explicit).
PARAMETER = "parameter"
OUTPUT = "output"
ALIASED = "parameter aliased to output"
TEMPORARY = "temporary"
CONSTANT = "constant"
THREAD_LOCAL = "thread-local"
KINDS = (PARAMETER, OUTPUT, ALIASED, TEMPORARY, CONSTANT, THREAD_LOCAL)

SOURCE_BUFFER_ASSIGNMENT = "buffer-assignment"
SOURCE_ESTIMATE = "estimate"


@dataclass(frozen=True, slots=True)
class Buffer:
    """One buffer live at the peak: a logical buffer (the value an instruction defines at one
    shape index) or, for allocations that live the whole program, the allocation's largest one.
    ``size_bytes`` is what the buffer adds to the peak (an allocation's size for those)."""

    name: str  # defining instruction, with ``{i,j}`` for a tuple element
    size_bytes: int
    kind: str  # one of KINDS
    shape: str  # as XLA prints it, "" when unknown
    opcode: str = ""
    computation: str = ""
    source: str | None = None  # file:line of the user's code
    op_path: str | None = None  # metadata op_name (the JAX scope / argument path)
    logical_buffer_id: int | None = None
    allocation: int | None = None  # buffer-allocation index
    parameter_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Undonated:
    """An entry parameter the program replaces with a new value without donating it
    (``profan.memory.donation``)."""

    parameter: str  # instruction name
    parameter_number: int | None
    parameter_path: str | None  # JAX argument path, e.g. params['w1']
    output: str  # the instruction that computes the new value
    output_source: str | None  # file:line of that instruction
    shape: str
    size_bytes: int  # what donating it would save

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """The heap after one heap-simulator event (or one instruction, for an estimate)."""

    heap_bytes: int  # including the whole-program allocations
    instruction: str
    computation: str = ""


@dataclass(frozen=True, slots=True)
class Breakdown:
    """MODEL.md §6: where the peak goes, recovered from entry parameters, outputs and aliasing.

    ``parameters`` and ``optimizer_state`` are told apart by the argument paths JAX records in
    each entry parameter's metadata (``params['w1']``, ``opt_state.mu['w1']``); ``how`` says so,
    or that only donation could be used.  ``temporaries_at_peak`` holds the activations saved for
    the backward pass together with XLA's own temporaries (the buffer assignment cannot tell the
    two apart)."""

    parameters_bytes: int
    optimizer_state_bytes: int
    inputs_bytes: int  # entry parameters that are neither (the batch)
    outputs_bytes: int  # outputs not aliased to a parameter
    temporaries_at_peak_bytes: int
    other_bytes: int  # constants and thread-local
    how: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ProgramMemory:
    """Memory of one program in one memory space."""

    module: str  # module key (``name(program_id)`` for traces) or module name
    memory_space: str  # profan.hlo.opcodes.memory_space_name
    source: str  # SOURCE_BUFFER_ASSIGNMENT | SOURCE_ESTIMATE
    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int  # temporary allocations as assigned (estimate: the liveness peak)
    peak_bytes: int  # whole-program allocations + the simulated heap's peak
    constant_bytes: int = 0
    thread_local_bytes: int = 0
    heap_peak_bytes: int = 0  # the simulated heap alone, at its peak
    fragmentation_bytes: int = 0  # temporary allocation sizes beyond the heap's peak
    logical_temp_bytes: int = 0  # sum of the temporary logical buffers' own sizes
    peak_position: int | None = None  # index into ``timeline``
    peak_instruction: str | None = None
    peak_computation: str | None = None
    live_at_peak: list[Buffer] = field(default_factory=list)  # largest first
    timeline: list[TimelinePoint] = field(default_factory=list)
    breakdown: Breakdown | None = None
    undonated: list[Undonated] = field(default_factory=list)  # largest first
    hbm_bytes: float | None = None  # the chip's memory per device
    chip: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def headroom_bytes(self) -> float | None:
        return None if self.hbm_bytes is None else self.hbm_bytes - self.peak_bytes

    @property
    def peak_share_of_hbm(self) -> float | None:
        return None if not self.hbm_bytes else self.peak_bytes / self.hbm_bytes

    def top_buffers(self, count: int = 10) -> list[Buffer]:
        return self.live_at_peak[:count]

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        """The JSON form (SCHEMA: the ``memory`` list); the timeline is left out."""
        return {
            "module": self.module,
            "memory_space": self.memory_space,
            "source": self.source,
            "argument_bytes": self.argument_bytes,
            "output_bytes": self.output_bytes,
            "alias_bytes": self.alias_bytes,
            "temp_bytes": self.temp_bytes,
            "peak_bytes": self.peak_bytes,
            "constant_bytes": self.constant_bytes,
            "thread_local_bytes": self.thread_local_bytes,
            "heap_peak_bytes": self.heap_peak_bytes,
            "fragmentation_bytes": self.fragmentation_bytes,
            "peak_position": self.peak_position,
            "peak_instruction": self.peak_instruction,
            "peak_computation": self.peak_computation,
            "hbm_bytes": self.hbm_bytes,
            "headroom_bytes": self.headroom_bytes,
            "chip": self.chip,
            "breakdown": None if self.breakdown is None else self.breakdown.to_dict(),
            "top_buffers": [b.to_dict() for b in self.top_buffers(top)],
            "live_buffer_count": len(self.live_at_peak),
            "undonated": [u.to_dict() for u in self.undonated],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class MemoryReport:
    """Every program's memory in one trace or HLO file, largest peak first."""

    path: str
    programs: list[ProgramMemory] = field(default_factory=list)
    chip: str | None = None
    hbm_bytes: float | None = None  # per device, from the chip catalogue
    chip_approximate: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        return {
            "path": self.path,
            "chip": self.chip,
            "hbm_bytes": self.hbm_bytes,
            "chip_approximate": self.chip_approximate,
            "memory": [program.to_dict(top) for program in self.programs],
            "notes": list(self.notes),
        }

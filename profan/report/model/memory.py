"""The memory section of a report (JSON ``memory``): per program and memory space, the
compiler's buffer assignment as ``profan.memory`` reads it from the trace.

The buffer, donation and breakdown rows have the fields of ``profan.memory.model``'s (the JSON
of ``profan memory`` too); they are the report's own types so that reading a report back
imports none of the analysis (a test checks the fields agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class MemoryBuffer:
    """One buffer live at a program's peak: a logical buffer (the value an instruction defines
    at one shape index) or, for allocations that live the whole program, the allocation's
    largest one (JSON ``memory[].top_buffers[]``)."""

    #: the defining instruction, `{i}` for a tuple element
    name: str
    #: what the buffer adds to the peak (an allocation's size for whole-program ones)
    size_bytes: int
    #: `parameter`, `output`, `parameter aliased to output`, `temporary`, `constant`
    kind: str
    #: XLA's text of its shape (`""` when unknown)
    shape: str
    #: the defining instruction's opcode
    opcode: str = ""
    #: its computation
    computation: str = ""
    #: `file:line` of the user's code, or `null`
    source: str | None = None
    #: metadata `op_name` (the JAX scope) or JAX argument path, or `null`
    op_path: str | None = None
    #: XLA's logical buffer id
    logical_buffer_id: int | None = None
    #: buffer-allocation index
    allocation: int | None = None
    #: the entry parameter's number, for parameters
    parameter_number: int | None = None


@dataclass(frozen=True, slots=True)
class UndonatedInput:
    """An entry parameter the program replaces with a new value without donating it
    (``profan.memory.donation``; JSON ``memory[].undonated[]``)."""

    #: the parameter's instruction name
    parameter: str
    #: its number
    parameter_number: int | None
    #: its JAX argument path, e.g. `params['w1']`
    parameter_path: str | None
    #: the instruction that computes the new value
    output: str
    #: that instruction's `file:line`
    output_source: str | None
    #: its shape
    shape: str
    #: what donating it would save
    size_bytes: int


@dataclass(frozen=True, slots=True)
class PeakBreakdown:
    """MODEL.md §6: where a program's peak goes, recovered from entry parameters, outputs and
    aliasing (JSON ``memory[].breakdown``); the parts sum to the peak."""

    #: the model's parameters
    parameters_bytes: int
    #: optimizer state (told apart from parameters by JAX's argument paths in the parameters'
    #: metadata)
    optimizer_state_bytes: int
    #: other entry parameters (the batch)
    inputs_bytes: int
    #: outputs not aliased to a parameter
    outputs_bytes: int
    #: temporaries live at the peak (activations saved for the backward pass and XLA's own
    #: temporaries: the buffer assignment cannot tell them apart)
    temporaries_at_peak_bytes: int
    #: constants and thread-local buffers
    other_bytes: int
    #: how the parts were told apart, in words
    how: str


@dataclass(slots=True)
class MemoryEntry:
    """One program that ran in the profile, in one memory space its buffer assignment uses
    (JSON ``memory[]``).  Sizes are bytes per device."""

    #: the module key (`name(program_id)`, or the name when `--hlo` supplied it)
    module: str
    #: `device` (the device's main memory: HBM; RAM on CPU), `host` (pinned host memory, colour
    #: 5), `vmem`, or `S(n)`
    memory_space: str
    #: `buffer-assignment` (here always; `profan memory DUMP.txt` gives `estimate`)
    source: str = ""
    #: XLA's own total, as `compiled.memory_analysis()` (`argument_size_in_bytes`)
    argument_bytes: int = 0
    #: XLA's `output_size_in_bytes`
    output_bytes: int = 0
    #: XLA's `alias_size_in_bytes`: donated inputs reused for outputs
    alias_bytes: int = 0
    #: XLA's `temp_size_in_bytes`: the temporary allocations as assigned (fragmentation
    #: included)
    temp_bytes: int = 0
    #: the peak: allocations that live the whole program (parameters, outputs, constants) plus
    #: the peak of the heap-simulator replay of the temporaries (XProf's memory viewer and XLA's
    #: GPU `peak_memory_in_bytes` agree with it)
    peak_bytes: int = 0
    #: constants
    constant_bytes: int = 0
    #: thread-local buffers (not device memory; not in the peak)
    thread_local_bytes: int = 0
    #: the simulated heap alone, at its peak
    heap_peak_bytes: int = 0
    #: temporary allocation sizes beyond the heap's peak
    fragmentation_bytes: int = 0
    #: index of the heap-simulator event at the peak
    peak_position: int | None = None
    #: the instruction being placed at the peak
    peak_instruction: str | None = None
    #: its computation
    peak_computation: str | None = None
    #: the chip's memory per device (catalogue)
    hbm_bytes: float | None = None
    #: `hbm_bytes - peak_bytes`
    headroom_bytes: float | None = None
    #: the chip's catalogue name
    chip: str | None = None
    #: MODEL.md §6 split of the peak; its parts sum to `peak_bytes`
    breakdown: PeakBreakdown | None = None
    #: buffers live at the peak, largest first, at most 10
    top_buffers: list[MemoryBuffer] = field(default_factory=list)
    #: how many buffers are live at the peak in all
    live_buffer_count: int = 0
    #: entry parameters the program replaces with a new value without donating them (an output
    #: of their shape and dtype that they reach element for element, in a program that carries
    #: state; `docs/memory.md` §4); the `undonated-input` rule reports them. (Reports made before
    #: this definition listed every input that merely shared an output's shape)
    undonated: list[UndonatedInput] = field(default_factory=list)
    #: e.g. temporaries without a heap-simulator trace counted at full size
    notes: list[str] = field(default_factory=list)
    #: `[event index, heap bytes]`, at most 200 points, the peak always kept: the heap over
    #: program order, as the HTML draws it
    timeline: list[list[int]] = field(default_factory=list)

"""Kernels that ran inside GPU command buffers (CUDA graphs), attributed to HLO instructions.

When XLA runs a sequence of thunks as a command buffer, every kernel of the graph is recorded
with ``hlo_op`` = the buffer's name (``command_buffer_N``), which is no instruction of the
module.  What the trace does tell (learned from ``fixtures/gpu_transformer``, H100, JAX 0.11):

* the event's name is the kernel's name.  XLA names a fusion's kernel after the fusion with
  every character outside ``[A-Za-z0-9_]`` replaced by ``_`` (``loop_add_fusion.5`` ->
  ``loop_add_fusion_5``), and reuses one kernel for fusions that compile to the same code
  (``gemm_fusion_dot_15`` also runs for ``gemm_fusion_dot.16``, ``.17``, ``.18``);
* ``unique_hlo_op_id``, when present, is the HloProto id of the instruction the buffer was
  built around (a ``while`` whose whole loop runs as one graph), not of each kernel's own
  instruction.  Buffers of top-level thunks carry none;
* library kernels (cuBLAS ``nvjet_*``, cuDNN, memset and memcpy nodes) carry no instruction name.

So a kernel is attributed, within its buffer's scope (the computations its ``while``/``call``
runs, else the entry computation and what it calls), in three passes:

1. **by name**: the instruction whose sanitized name is the kernel's.  A kernel shared by
   identical fusions (same opcode, shapes and fused computation) is handed to them in schedule
   order, one after the other, as the graph runs them.  Sanitizing can give two instructions
   one name (``loop_broadcast_fusion.1`` and ``loop_broadcast_fusion#1``, the get-tuple-element
   a newer HLO dump writes as an operand): an instruction that launches nothing
   (``LAUNCHES_NO_KERNEL``: get-tuple-element, bitcast, tuple, parameter, control flow…) is
   never a kernel's namesake, nor one this buffer does not run; of several left, the one whose
   name is the kernel's unchanged wins, else the first in module order.  Each such choice is
   told (``attribute(decisions=)``; a note of the profile);
2. **by position**: a library kernel goes to the library instruction of its kind (cuBLAS gemm
   custom call, cuDNN custom call, copy or slicing fusion for memcpy) scheduled between the
   instructions of the named kernels around it; memsets go with the kernel that follows them;
3. whatever is left is reported as unmatched, with the reason.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from profan.hlo.model import Computation, Instruction, Module
from profan.hlo.opcodes import BOOKKEEPING_OPCODES, CONTROL_FLOW_OPCODES
from profan.hlo.views import called_computations

COMMAND_BUFFER = re.compile(r"^command_buffer_\d+$")
# An unattributed kernel keeps the name ``command_buffer_N/<kernel>`` (an op of no module).
UNATTRIBUTED_NAME = re.compile(r"^command_buffer_\d+/")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")
_CONTROL_FLOW = ("while", "call", "conditional", "async-start")
UNATTRIBUTED = "kernel inside a command buffer (CUDA graph) not attributable to an instruction"
# Instructions that launch no kernel of their own: views, tuples, tokens, ids, and control flow
# (the kernels of its body carry their own names).
LAUNCHES_NO_KERNEL = BOOKKEEPING_OPCODES | CONTROL_FLOW_OPCODES


def kernel_name(instruction_name: str) -> str:
    """The name XLA gives the kernel of a fusion called ``instruction_name``."""
    return _NOT_IDENTIFIER.sub("_", instruction_name)


def _kind_of_kernel(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith("memset"):
        return "memset"
    if lowered.startswith("memcpy"):
        return "memcpy"
    if "cudnn" in lowered:
        return "cudnn"
    if lowered.startswith(("nvjet", "cublas", "sm90_xmma", "sm80_xmma", "cutlass", "ampere_")):
        return "gemm"
    return "library"


def _kind_of_instruction(instruction: Instruction) -> str | None:
    """Which library kernels an instruction may launch (None: only kernels named after it)."""
    if instruction.opcode == "custom-call":
        target = instruction.attributes.get("custom_call_target", "").lower()
        if "cudnn" in target:
            return "cudnn"
        if "cublas" in target or "gemm" in target or "hipblas" in target:
            return "gemm"
        return "library"
    if instruction.opcode in ("copy", "copy-start"):
        return "memcpy"
    if (
        instruction.opcode == "fusion"
        and "dynamic" in instruction.name
        and "slice" in (instruction.name)
    ):
        return "memcpy"  # XLA runs a slice of a stacked buffer as a device-to-device memcpy
    return None


@dataclass(slots=True)
class _Scope:
    """The instructions one command buffer may run, in schedule order."""

    order: list[Instruction] = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    # kernel name -> its namesake and the identical fusions (schedule order)
    by_kernel: dict[str, list[Instruction]] = field(default_factory=dict)
    # kernel name -> why its namesake was chosen among several instructions of that name
    decisions: dict[str, str] = field(default_factory=dict)


def _fingerprint(instruction: Instruction, module: Module) -> tuple:
    """What makes two fusions compile to the same kernel: opcode, shapes, fused computation."""
    body: tuple = ()
    for name in called_computations(instruction):
        try:
            computation = module.computation(name)
        except KeyError:
            continue
        body += tuple(
            (i.opcode, str(i.shape), tuple(sorted(k for k in i.attributes if k != "metadata")))
            for i in computation.instructions
        )
    operands = tuple(str(o.shape) for o in instruction.operands)
    return (instruction.opcode, str(instruction.shape), operands, body)


def _scope(module: Module, roots: list[Computation], descend: bool = True) -> _Scope:
    scope = _Scope()
    seen: set[str] = set()

    def visit(computation: Computation) -> None:
        if computation.name in seen:
            return
        seen.add(computation.name)
        for instruction in computation.instructions:
            scope.position[instruction.name] = len(scope.order)
            scope.order.append(instruction)
            if descend and instruction.opcode in _CONTROL_FLOW:
                for name in called_computations(instruction):
                    try:
                        visit(module.computation(name))
                    except KeyError:
                        continue

    for root in roots:
        visit(root)
    prints: dict[str, tuple] = {}

    def fingerprint(instruction: Instruction) -> tuple:
        if instruction.name not in prints:
            prints[instruction.name] = _fingerprint(instruction, module)
        return prints[instruction.name]

    groups: dict[tuple, list[Instruction]] = defaultdict(list)
    for instruction in scope.order:
        if instruction.opcode == "fusion":
            groups[fingerprint(instruction)].append(instruction)
    # A kernel is named after one fusion anywhere in the module (XLA compiles each distinct
    # fusion once); identical fusions in this scope run it too.
    namesakes: dict[str, list[Instruction]] = defaultdict(list)
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode == "fusion" or instruction.name in scope.position:
                namesakes[kernel_name(instruction.name)].append(instruction)

    def runs_here(instruction: Instruction) -> list[Instruction]:
        if instruction.opcode == "fusion":
            return groups.get(fingerprint(instruction), [])
        return [instruction] if instruction.name in scope.position else []

    for kernel, named in namesakes.items():
        chosen, decision = _namesake(kernel, named, runs_here)
        if chosen is not None:
            scope.by_kernel[kernel] = runs_here(chosen)
        if decision is not None:
            scope.decisions[kernel] = decision
    return scope


def _namesake(
    kernel: str,
    named: list[Instruction],
    runs_here: Callable[[Instruction], list[Instruction]],
) -> tuple[Instruction | None, str | None]:
    """The instruction a kernel called ``kernel`` was made for, among ``named`` (every
    instruction of that sanitized name, module order), and the rule that chose it when there
    were several (None when there was one)."""
    launching = [i for i in named if i.opcode not in LAUNCHES_NO_KERNEL]
    here = [i for i in launching if runs_here(i)]
    if not here:
        return None, None
    if len(named) == 1:
        return here[0], None
    exact = [i for i in here if i.name == kernel]
    chosen = (exact or here)[0]
    launches = {i.name for i in launching}
    runs = {i.name for i in here}
    reasons = [f"{i.name} ({i.opcode}) launches no kernel" for i in named if i.name not in launches]
    reasons += [
        f"{i.name} does not run in this command buffer" for i in launching if i.name not in runs
    ]
    if len(here) > 1:
        reasons.append(
            f"{chosen.name} is the kernel's name unchanged"
            if exact
            else f"{chosen.name} comes first in the module"
        )
    listed = ", ".join(f"{i.name} ({i.opcode})" for i in named)
    return chosen, (
        f"kernel {kernel} is the sanitized name of {listed}: joined to {chosen.name} "
        f"({'; '.join(reasons)})"
    )


def _roots(module: Module, around: str | None) -> list[Computation]:
    if around is not None:
        for computation in module.computations:
            found = computation.get(around)
            if found is not None:
                return [module.computation(n) for n in called_computations(found)]
    return [c for c in module.computations if c.is_entry]


def attribute(
    kernels: list[str],
    buffers: list[str],
    around: list[str | None],
    module: Module,
    decisions: list[str] | None = None,
) -> list[str | None]:
    """The instruction each kernel (in start order, on one device) ran for, or None.

    ``kernels``: kernel names; ``buffers``: their ``hlo_op`` (the command buffer's name);
    ``around``: the name of the instruction their ``unique_hlo_op_id`` names, if any;
    ``decisions``: given, each rule that chose among instructions of one sanitized name, for a
    kernel that ran, is appended to it once.
    """
    out: list[str | None] = [None] * len(kernels)
    scopes: dict[str | None, _Scope] = {}
    # Executions: runs of consecutive kernels of one buffer.
    segments: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(kernels) + 1):
        if index == len(kernels) or buffers[index] != buffers[start]:
            segments.append((start, index))
            start = index
    for begin, end in segments:
        key = around[begin]
        if key not in scopes:
            # A buffer built around an instruction runs what it calls; one without runs
            # top-level thunks of the entry (a loop run as a graph is a buffer of its own).
            scopes[key] = _scope(module, _roots(module, key), descend=key is not None)
        scope = scopes[key]
        if decisions is not None and scope.decisions:
            for kernel in dict.fromkeys(kernels[begin:end]):
                decision = scope.decisions.get(kernel)
                if decision is not None and decision not in decisions:
                    decisions.append(decision)
        _by_name(kernels, begin, end, scope, out)
        _by_position(kernels, begin, end, scope, out)
    return out


def _by_name(kernels: list[str], begin: int, end: int, scope: _Scope, out: list) -> None:
    observed = set(kernels[begin:end])
    seen: dict[str, int] = defaultdict(int)
    members_of: dict[str, list[Instruction]] = {}
    for index in range(begin, end):
        kernel = kernels[index]
        if kernel not in members_of:
            # An identical fusion uses this kernel unless a kernel of its own name ran.
            members_of[kernel] = [
                m
                for m in scope.by_kernel.get(kernel, [])
                if kernel_name(m.name) == kernel or kernel_name(m.name) not in observed
            ]
        members = members_of[kernel]
        if not members:
            continue
        out[index] = members[seen[kernel] % len(members)].name
        seen[kernel] += 1


def _by_position(kernels: list[str], begin: int, end: int, scope: _Scope, out: list) -> None:
    named = [i for i in range(begin, end) if out[i] is not None]
    kinds = [_kind_of_kernel(k) for k in kernels[begin:end]]
    for gap_start, gap_end in zip([begin - 1, *named], [*named, end], strict=True):
        if gap_end - gap_start <= 1:
            continue
        low = scope.position[out[gap_start]] if gap_start >= begin else -1
        high = scope.position[out[gap_end]] if gap_end < end else len(scope.order)
        if high <= low:  # the gap wraps around a loop body: after low, then up to high
            window = scope.order[low + 1 :] + scope.order[:high]
        else:
            window = scope.order[low + 1 : high]
        candidates: dict[str, list[Instruction]] = defaultdict(list)
        for instruction in window:
            kind = _kind_of_instruction(instruction)
            if kind is not None:
                candidates[kind].append(instruction)
        used: dict[str, int] = defaultdict(int)
        for index in range(gap_start + 1, gap_end):
            kind = kinds[index - begin]
            if kind == "memset":
                continue
            pool = candidates.get(kind) or (candidates.get("library") if kind != "memcpy" else [])
            if not pool:
                continue
            if kind == "cudnn" and len(pool) == 1:
                out[index] = pool[0].name  # one cuDNN call launches several kernels
                continue
            if used[kind] < len(pool):
                out[index] = pool[used[kind]].name
                used[kind] += 1
        # A memset prepares the buffers of the kernel that follows it.
        for index in range(gap_end - 1, gap_start, -1):
            if kinds[index - begin] == "memset" and index + 1 < end and out[index + 1]:
                out[index] = out[index + 1]

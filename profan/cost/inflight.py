"""What a fusion hands through without touching it: in-place pass-throughs and the asynchronous
collectives it carries.

XLA's cost analysis lets a backend leave fusion inputs and outputs out of the fusion's bytes
(``HloCostAnalysis::ShouldFilterFusionInput`` / ``ShouldFilterFusionOutputIndex``).  The TPU
backend does so for two kinds of value, and so does profan:

* **pass-through**: an output that is a parameter, unchanged, in the buffer the fusion aliases
  to that parameter (``output_to_operand_aliasing={{1}: (0, {})}``): nothing is read or written;
* **a carried collective**: TPU's collective matmuls fuse an ``all-gather`` (or
  ``reduce-scatter``, ...) into the convolution fusion that overlaps it.  The collective's
  result only leaves the fusion, into a buffer aliased to an operand; the transfer is the work of
  the ``async-collective-start``/``-done`` ops that bracket it, which carry its bytes (the TPU
  compiler's per-op figures: a convolution fusion with ``all-gather(bf16[1,512,16,128])``
  inside is charged its convolution's operands and result only).  Its input, and the sync flags
  (``u32[]{:S(2)}``) and offsets that pass through with it, are the collective's too.

A collective whose result the fusion itself uses (``async-collective-start`` hands it to the
``AsyncCollectiveStart`` custom call) is the fusion's own work and is charged as usual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from profan.cost.context import CostContext
from profan.hlo.model import Computation, Instruction
from profan.hlo.opcodes import COLLECTIVE_OPCODES

_ALIAS = re.compile(r"\{(\d*)\}\s*:\s*\(\s*(\d+)")


@dataclass(frozen=True, slots=True)
class InFlight:
    """Outputs (by tuple index) and parameters (by number) the fusion does not move itself."""

    outputs: frozenset[int] = frozenset()
    parameters: frozenset[int] = frozenset()
    collectives: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return bool(self.outputs or self.parameters)


def output_aliases(fusion: Instruction) -> dict[int, int]:
    """Output tuple index -> operand number (``output_to_operand_aliasing``; ``{}`` is 0)."""
    text = fusion.attributes.get("output_to_operand_aliasing", "")
    return {int(output or 0): int(operand) for output, operand in _ALIAS.findall(text)}


def _is_collective(instruction: Instruction) -> bool:
    found = COLLECTIVE_OPCODES.get(instruction.opcode)
    return found is not None and found[1] == "sync"


def in_flight(fusion: Instruction, body: Computation, model: CostContext) -> InFlight:
    """The outputs and parameters of ``fusion`` that pass through it untouched (see above)."""
    aliases = output_aliases(fusion)
    root = body.root
    if not aliases or root.opcode != "tuple":
        return InFlight()
    outputs: set[int] = set()
    carried: list[Instruction] = []
    for index, operand in enumerate(root.operands):
        producer = body.get(operand.name)
        if producer is None or index not in aliases:
            continue
        if producer.opcode == "parameter":
            if producer.parameter_number == aliases[index]:
                outputs.add(index)
        elif _is_collective(producer) and all(u is root for u in model.users(producer)):
            outputs.add(index)
            carried.append(producer)
    carried_names = {c.name for c in carried}
    parameters: set[int] = set()
    for parameter in body.params:
        users = model.users(parameter)
        if not users or parameter.parameter_number is None:
            continue
        if all(u is root or u.name in carried_names for u in users):
            forwarded = [i for i, o in enumerate(root.operands) if o.name == parameter.name]
            if all(i in outputs for i in forwarded):
                parameters.add(parameter.parameter_number)
    return InFlight(frozenset(outputs), frozenset(parameters), tuple(sorted(carried_names)))

"""Undonated inputs: entry parameters the program could have handed to an output.

An entry parameter with the same shape and dtype as an output, not aliased to it, exists twice
at the end of a step (MODEL.md §6: donation); donating it (``jax.jit(..., donate_argnums=...)``)
would save its size.  Parameters and outputs are paired one to one, largest first.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from profan.memory.model import OUTPUT, PARAMETER, ProgramMemory

_LAYOUT = re.compile(r"\{[^{}]*\}$")


def logical_shape(shape_text: str) -> str:
    """``f32[128,128]{1,0}`` -> ``f32[128,128]`` (dtype and dims only)."""
    return _LAYOUT.sub("", shape_text.strip())


@dataclass(frozen=True, slots=True)
class Undonated:
    parameter: str  # instruction name
    parameter_number: int | None
    parameter_path: str | None  # JAX argument path, e.g. params['w1']
    output: str
    output_source: str | None  # file:line of the instruction that writes the output
    shape: str
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def undonated_inputs(memory: ProgramMemory) -> list[Undonated]:
    parameters = [b for b in memory.live_at_peak if b.kind == PARAMETER and b.shape]
    outputs = [b for b in memory.live_at_peak if b.kind == OUTPUT and b.shape]
    free: dict[str, list] = {}
    for output in outputs:
        free.setdefault(logical_shape(output.shape), []).append(output)
    found = []
    for parameter in sorted(parameters, key=lambda b: -b.size_bytes):
        candidates = free.get(logical_shape(parameter.shape))
        if not candidates or not parameter.size_bytes:
            continue
        output = candidates.pop(0)
        found.append(
            Undonated(
                parameter=parameter.name,
                parameter_number=parameter.parameter_number,
                parameter_path=parameter.op_path,
                output=output.name,
                output_source=output.source,
                shape=logical_shape(parameter.shape),
                size_bytes=parameter.size_bytes,
            )
        )
    return found

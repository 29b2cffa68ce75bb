"""The computations a module runs as ordinary (not fused) code, with how often each runs.

Transitional: ``profan.hlo.graph`` (being added) becomes the one home of this walk; this module
goes when it lands.
"""

from __future__ import annotations

from profan.hlo.model import Computation, Module
from profan.hlo.opcodes import CONTROL_FLOW_OPCODES
from profan.hlo.views import called_computations, trip_count


def scheduled_computations(module: Module) -> list[tuple[Computation, int]]:
    """The entry and every computation it runs as non-fused code (while bodies and conditions,
    called computations, branches), with execution counts: a while loop's known trip count
    multiplies what it runs (1 when the backend config does not record one)."""
    found: list[tuple[Computation, int]] = []
    seen: set[str] = set()

    def visit(computation: Computation, count: int) -> None:
        if computation.name in seen:
            return
        seen.add(computation.name)
        found.append((computation, count))
        for instruction in computation.instructions:
            if instruction.opcode not in CONTROL_FLOW_OPCODES:
                continue
            times = count
            if instruction.opcode == "while":
                times *= trip_count(instruction) or 1
            for name in called_computations(instruction):
                try:
                    visit(module.computation(name), times)
                except KeyError:
                    continue

    visit(module.entry, 1)
    return found

"""Graph checks: an instruction that depends on itself through its operands or control
predecessors; a computation that calls itself (directly or not), or any call into the entry
computation."""

from __future__ import annotations

from profan.hlo.model import Computation, Instruction, Module
from profan.hlo.verify.problem import Problem
from profan.hlo.views import (
    CALLED_COMPUTATION_ATTRIBUTES,
    called_computations,
    control_predecessors,
)

_CALL_KEYS = frozenset(CALLED_COMPUTATION_ATTRIBUTES)


def call_problem(module: Module) -> Problem | None:
    """A call into the entry computation, or a computation that reaches itself by calls."""
    names = {computation.name for computation in module.computations}
    entry = module.entry.name
    callees: dict[str, list[tuple[str, Instruction]]] = {}
    for computation in module.computations:
        found = callees[computation.name] = []
        for instruction in computation.instructions:
            if _CALL_KEYS.isdisjoint(instruction.attributes):
                continue
            for callee in called_computations(instruction):
                if callee == entry:
                    reason = f"calls the entry computation %{entry}"
                    return Problem(computation.name, instruction.name, reason, callee)
                if callee in names:
                    found.append((callee, instruction))
    # Depth-first over the call graph with an explicit stack: 1 = on the path, 2 = done.
    state: dict[str, int] = {}
    for root in callees:
        if root in state:
            continue
        state[root] = 1
        path: list[tuple[str, int]] = [(root, 0)]
        while path:
            caller, next_edge = path[-1]
            edges = callees[caller]
            if next_edge == len(edges):
                state[caller] = 2
                path.pop()
                continue
            path[-1] = (caller, next_edge + 1)
            callee, instruction = edges[next_edge]
            seen = state.get(callee)
            if seen == 1:
                reason = f"calls %{callee}, which calls back into %{caller}: recursion"
                if callee == caller:
                    reason = f"calls its own computation %{callee}: recursion"
                return Problem(caller, instruction.name, reason, callee)
            if seen is None:
                state[callee] = 1
                path.append((callee, 0))
    return None


def _dependencies(instruction: Instruction) -> list[str]:
    names = [operand.name for operand in instruction.operands]
    if "control-predecessors" in instruction.attributes:
        names += control_predecessors(instruction)
    return names


def cycle_problem(module: Module) -> Problem | None:
    for computation in module.computations:
        problem = _computation_cycle(computation)
        if problem is not None:
            return problem
    return None


def _computation_cycle(computation: Computation) -> Problem | None:
    instructions = computation.instructions
    order = {instruction.name: index for index, instruction in enumerate(instructions)}
    # Printed in dependency order (nearly always): no cycle is possible.
    forward = False
    for index, instruction in enumerate(instructions):
        for name in _dependencies(instruction):
            if order.get(name, -1) >= index:
                forward = True
                break
        if forward:
            break
    if not forward:
        return None
    # Kahn's algorithm: what never becomes free of unplaced dependencies lies on or after a cycle.
    users: list[list[int]] = [[] for _ in instructions]
    waiting = [0] * len(instructions)
    for index, instruction in enumerate(instructions):
        for name in set(_dependencies(instruction)):
            source = order.get(name)
            if source is not None:
                users[source].append(index)
                waiting[index] += 1
    free = [index for index, count in enumerate(waiting) if count == 0]
    while free:
        for user in users[free.pop()]:
            waiting[user] -= 1
            if waiting[user] == 0:
                free.append(user)
    for index, instruction in enumerate(instructions):
        if waiting[index]:
            stuck = [n for n in _dependencies(instruction) if waiting[order.get(n, index)] > 0]
            at = stuck[0] if stuck else None
            reason = f"depends on itself through its operands (a cycle through %{at})"
            return Problem(computation.name, instruction.name, reason, at)
    return None

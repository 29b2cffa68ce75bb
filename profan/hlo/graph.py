"""The dataflow and call graph of a module: users, operands and their shapes, the schedule walk.

``ModuleGraph(module)`` is built once per module and answers the name lookups analyses make for
every instruction: the computation that holds it, the instruction behind each operand and that
operand's shape, the instructions that use it, the computations it calls.  Without a module (a
single line as XProf shows it) only what the line itself printed is known.

``scheduled_computations(module)`` walks the entry and every computation it runs as ordinary,
non-fused code (``while`` bodies and conditions, ``call`` targets, ``conditional`` branches) and
says how often each runs per execution of the entry, from the loops' trip counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.opcodes import CONTROL_FLOW_OPCODES
from profan.hlo.views import called_computations, trip_count


class ModuleGraph:
    """Name lookups over one module (or none, for a single instruction line)."""

    def __init__(self, module: Module | None) -> None:
        self.module = module
        # computation name -> operand name -> the instructions that use it (each once)
        self._users: dict[str, dict[str, list[Instruction]]] = {}
        self._scheduled: list[ScheduledComputation] | None = None

    def computation(self, name: str) -> Computation | None:
        """The computation called ``name``, ``None`` when the module has none of that name."""
        if self.module is None:
            return None
        try:
            return self.module.computation(name)
        except KeyError:
            return None

    def computation_of(self, instruction: Instruction) -> Computation | None:
        """The computation that holds ``instruction``."""
        if instruction.computation is None:
            return None
        return self.computation(instruction.computation)

    def called(self, instruction: Instruction) -> list[Computation]:
        """The computations ``instruction`` calls that the module defines, in printed order."""
        found = (self.computation(name) for name in called_computations(instruction))
        return [computation for computation in found if computation is not None]

    def operand(self, instruction: Instruction, index: int) -> Instruction | None:
        """The instruction behind operand ``index`` (an implicit get-tuple-element for an
        operand printed ``%name#N``); ``None`` without a module or out of range."""
        computation = self.computation_of(instruction)
        if computation is None or not 0 <= index < len(instruction.operands):
            return None
        return computation.get(instruction.operands[index].name)

    def operand_shape(self, instruction: Instruction, index: int) -> Shape | None:
        """Operand ``index``'s shape: as the text printed it, else its instruction's shape;
        ``None`` when neither is known.  The shape may be unknown
        (``profan.hlo.shapes.is_unknown``) when the text left it out and it cannot be
        inferred."""
        if not 0 <= index < len(instruction.operands):
            return None
        operand = instruction.operands[index]
        if operand.shape is not None:
            return operand.shape
        found = self.operand(instruction, index)
        return found.shape if found is not None else None

    def operand_shapes(self, instruction: Instruction) -> list[Shape | None]:
        return [self.operand_shape(instruction, i) for i in range(len(instruction.operands))]

    def users(self, instruction: Instruction) -> list[Instruction]:
        """The instructions of the same computation that take ``instruction`` as an operand,
        in printed order, each once however many times it uses it."""
        computation = self.computation_of(instruction)
        if computation is None:
            return []
        table = self._users.get(computation.name)
        if table is None:
            table = {}
            for candidate in computation.instructions:
                for name in dict.fromkeys(candidate.operand_names):
                    table.setdefault(name, []).append(candidate)
            self._users[computation.name] = table
        return table.get(instruction.name, [])

    def scheduled(self) -> list[ScheduledComputation]:
        """``scheduled_computations`` of the module (computed once)."""
        if self._scheduled is None:
            self._scheduled = scheduled_computations(self.module) if self.module else []
        return self._scheduled


@dataclass(frozen=True, slots=True)
class ScheduledComputation:
    """A computation that runs as ordinary code, and how often per execution of the entry.

    ``count`` multiplies the trip counts of the loops around it (a loop's condition runs once
    more than its body).  ``count_is_exact`` is False when a loop on the way has no known trip
    count (it is counted as running once, so ``count`` is a lower bound) or when the computation
    is a branch of a ``conditional`` (each branch is counted as if taken, an upper bound).
    """

    computation: Computation
    count: int
    count_is_exact: bool = True


def _calls(instruction: Instruction, graph: ModuleGraph) -> list[tuple[Computation, int, bool]]:
    """(computation, runs per execution of ``instruction``, exact) for each one it calls."""
    opcode = instruction.opcode
    found: list[tuple[Computation, int, bool]] = []
    if opcode == "while":
        trips = trip_count(instruction)
        body_name = _single_name(instruction, "body")
        condition_name = _single_name(instruction, "condition")
        for name in called_computations(instruction):
            callee = graph.computation(name)
            if callee is None:
                continue
            if trips is None:
                found.append((callee, 1, False))
            elif name == condition_name and name != body_name:
                found.append((callee, trips + 1, True))
            else:
                found.append((callee, trips, True))
    elif opcode == "conditional":
        branches = graph.called(instruction)
        # one branch of several runs; a computation that is every branch runs every time
        found = [(callee, 1, len(branches) == 1) for callee in branches]
    else:
        found = [(callee, 1, True) for callee in graph.called(instruction)]
    return found


def _single_name(instruction: Instruction, key: str) -> str | None:
    value = instruction.attributes.get(key)
    return value.strip().lstrip("%") if value else None


def scheduled_computations(module: Module) -> list[ScheduledComputation]:
    """The entry and every computation it runs as non-fused code (``while``, ``call``,
    ``conditional``; not fusion bodies, reducers or async wrappers), each once, in the order
    a depth-first walk from the entry meets them, with its execution count summed over every
    place that runs it."""
    graph = ModuleGraph(module)
    order: list[Computation] = []
    edges: dict[str, list[tuple[str, int, bool]]] = {}
    seen: set[str] = set()

    def visit(computation: Computation) -> None:
        seen.add(computation.name)
        order.append(computation)
        out = edges.setdefault(computation.name, [])
        for instruction in computation.instructions:
            if instruction.opcode not in CONTROL_FLOW_OPCODES:
                continue
            for callee, times, exact in _calls(instruction, graph):
                out.append((callee.name, times, exact))
                if callee.name not in seen:
                    visit(callee)

    visit(module.entry)
    # Counts flow from callers to callees; a computation's count is final once every caller's
    # is (the call graph of valid HLO has no cycles).
    callers: dict[str, int] = {c.name: 0 for c in order}
    for targets in edges.values():
        for name, _, _ in targets:
            callers[name] += 1
    counts = {c.name: 0 for c in order}
    exact = {c.name: True for c in order}
    counts[module.entry.name] = 1
    ready = [module.entry.name]
    while ready:
        name = ready.pop()
        for callee, times, callee_exact in edges.get(name, ()):
            counts[callee] += counts[name] * times
            exact[callee] = exact[callee] and exact[name] and callee_exact
            callers[callee] -= 1
            if callers[callee] == 0:
                ready.append(callee)
    return [ScheduledComputation(c, counts[c.name], exact[c.name]) for c in order]

"""The collectives around each matmul: which ones its result feeds and which feed its operands.

A matmul's result that feeds an all-reduce (or reduce-scatter) over some axes is a partial sum
over them; an operand that comes out of an all-gather of an entry parameter is a weight gathered
before use (FSDP).  Both are recorded on the matmul as evidence, and the first fills in the
split of a contraction that no sharding annotation reached.
"""

from __future__ import annotations

from profan.attribute import classify
from profan.hlo.graph import ModuleGraph
from profan.hlo.model import Instruction, Module
from profan.hlo.opcodes import collective_kind
from profan.sharding.mesh import Mesh
from profan.sharding.model import MatmulSharding

# Cheap ops a value passes through on its way to (or from) a collective.
_PASS_THROUGH = {
    "convert", "bitcast", "copy", "reshape", "transpose", "get-tuple-element", "tuple",
    "add", "multiply", "subtract", "select", "maximum", "negate", "fusion",
}  # fmt: skip

# How many such ops are followed from a matmul.
HOPS = 4


class _Graph:
    """Who uses what (``profan.hlo.graph``), where each instruction lives, and categories,
    built once (modules reach 50,000 instructions)."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.graph = ModuleGraph(module)
        self.where: dict[str, str] = {}
        self.by_name: dict[tuple[str, str], Instruction] = {}
        for computation in module.computations:
            for instruction in computation.instructions:
                self.where.setdefault(instruction.name, computation.name)
                self.by_name[(computation.name, instruction.name)] = instruction
        self.labels: dict[int, str] = {}

    def category(self, instruction: Instruction) -> str:
        key = id(instruction)
        if key not in self.labels:
            self.labels[key] = classify(instruction, self.module).category
        return self.labels[key]

    def downstream_collectives(self, computation: str, name: str) -> list[Instruction]:
        """Collectives reached from ``name`` through a few cheap ops in the same computation."""
        found: list[Instruction] = []
        frontier = [name]
        for _ in range(HOPS):
            following: list[str] = []
            for current in frontier:
                instruction = self.by_name.get((computation, current))
                users = self.graph.users(instruction) if instruction is not None else []
                for user in users:
                    if self.category(user) == "collective":
                        found.append(user)
                    elif user.opcode in _PASS_THROUGH:
                        following.append(user.name)
            frontier = following
        return found

    def upstream(self, computation: str, name: str) -> list[Instruction]:
        """Collectives and parameters reached backwards from ``name`` through cheap ops."""
        found: list[Instruction] = []
        frontier = [name]
        for _ in range(HOPS):
            following: list[str] = []
            for current in frontier:
                source = self.by_name.get((computation, current))
                if source is None:
                    continue
                if self.category(source) == "collective" or source.opcode == "parameter":
                    found.append(source)
                elif source.opcode in _PASS_THROUGH - {"fusion"} or (
                    source.opcode == "fusion"
                    and self.category(source) in ("data-movement", "elementwise")
                ):
                    following.extend(o.name.lstrip("%") for o in source.operands)
            frontier = following
        return found


def _kind(instruction: Instruction) -> str:
    return collective_kind(instruction.opcode) or instruction.opcode


def add_collective_evidence(module: Module, mesh: Mesh, matmuls: list[MatmulSharding]) -> None:
    """Record the collectives around each matmul, and use them as the split when nothing else
    says: an all-reduce of the result means a split contraction (when no annotation reaches
    the operands)."""
    axes_of = {c.name: c.axes for c in mesh.collectives}
    graph = _Graph(module)
    for matmul in matmuls:
        # A dot inside a fused computation is looked at from the fusion, in the fusion's caller.
        site_name = matmul.name
        site_computation = graph.where.get(site_name)
        if site_computation is None:
            continue
        for collective in graph.downstream_collectives(site_computation, site_name):
            axes = axes_of.get(collective.name)
            if axes is None:
                continue
            kind = _kind(collective)
            if any(f["name"] == collective.name for f in matmul.feeds):
                continue
            matmul.feeds.append({"kind": kind, "name": collective.name, "axes": axes})
            matmul.evidence.append(f"result feeds {kind} {collective.name} over {axes}")
            if (
                kind in ("all-reduce", "reduce-scatter")
                and axes
                and not matmul.annotated
                and not matmul.partial_sum_axes
                and matmul.contracting[0]
            ):
                _split_contraction(matmul, axes, mesh.size_of(axes), kind)
        site = graph.by_name.get((site_computation, site_name))
        if site is None:
            continue
        operands = site.operands[:2] if site.opcode == "dot" else site.operands
        for index, operand in enumerate(operands):
            for collective in graph.upstream(site_computation, operand.name.lstrip("%")):
                axes = axes_of.get(collective.name)
                if collective.opcode == "parameter" or axes is None:
                    continue
                kind = _kind(collective)
                if any(f["name"] == collective.name for f in matmul.fed_by):
                    continue
                # Only the entry's parameters are known to be weights or inputs; a loop's
                # carried tuple mixes both.
                gathered_from = [
                    s.name
                    for o in collective.operands
                    for s in graph.upstream(site_computation, o.name.lstrip("%"))
                    if s.opcode == "parameter" and site_computation == module.entry.name
                ]
                matmul.fed_by.append(
                    {
                        "kind": kind,
                        "name": collective.name,
                        "axes": axes,
                        "operand": index,
                        "from_parameter": gathered_from[0] if gathered_from else None,
                    }
                )
                what = f"parameter {gathered_from[0]}" if gathered_from else "an activation"
                matmul.evidence.append(
                    f"operand {index} is {what} through {kind} {collective.name} over {axes}"
                )


def _split_contraction(matmul: MatmulSharding, axes: list[str], size: int, kind: str) -> None:
    lhs_dim = matmul.contracting[0][0]
    rhs_dim = matmul.contracting[1][0]
    lhs_at = lhs_dim + len(matmul.global_lhs) - len(matmul.local_lhs)
    rhs_at = rhs_dim + len(matmul.global_rhs) - len(matmul.local_rhs)
    matmul.global_lhs[lhs_at] *= size
    matmul.global_rhs[rhs_at] *= size
    matmul.lhs_split[lhs_at] = list(axes)
    matmul.rhs_split[rhs_at] = list(axes)
    matmul.partial_sum_axes = list(axes)
    matmul.evidence.append(
        f"no sharding annotation reaches the operands; the {kind} of the result over {axes} "
        f"sums partial products, so the contracted dim is split {size}-way"
    )

"""What the report needs to know about each scored op, read once here so that it never looks an
instruction up again: category, named scope, op path, source line, program position, result
shape, and a collective's groups and mesh axes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from profan.attribute import classify, op_name_of, scope_of
from profan.cost import OpCost
from profan.errors import HloSyntaxError
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.opcodes import COLLECTIVE_OPCODES
from profan.hlo.shapes import shape_to_text
from profan.hlo.views import replica_groups, source_location, source_target_pairs

if TYPE_CHECKING:
    from profan.sharding import ShardingReport


def mesh_axes_by_name(report: ShardingReport | None) -> dict[str, tuple[str, ...]]:
    """Collective name -> the names of the mesh axes it runs over (from the sharding analysis)."""
    mesh = report.mesh if report is not None else None
    if mesh is None:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for collective in mesh.collectives:
        if collective.axes:
            found[collective.name] = tuple(collective.axes)
    return found


def axis_sizes(report: ShardingReport | None, axes: tuple[str, ...] | None) -> tuple[int, ...]:
    """Sizes of named mesh axes (empty when the mesh or an axis is unknown)."""
    mesh = report.mesh if report is not None else None
    if mesh is None or not axes:
        return ()
    shape = mesh.shape
    if any(axis not in shape for axis in axes):
        return ()
    return tuple(shape[axis] for axis in axes)


def program_positions(module: Module) -> dict[tuple[str | None, str], int]:
    """(computation, instruction name) -> the instruction's index in program order (computations
    in the module's order, instructions in printed order, counted across computations)."""
    positions: dict[tuple[str | None, str], int] = {}
    index = 0
    for computation in module.computations:
        for instruction in computation.instructions:
            positions[(computation.name, instruction.name)] = index
            index += 1
    return positions


def _without_layout(shape: Shape) -> Shape:
    if shape.is_tuple:
        return dataclasses.replace(
            shape, tuple_shapes=tuple(_without_layout(s) for s in shape.tuple_shapes)
        )
    return dataclasses.replace(shape, layout=None) if shape.layout is not None else shape


def shape_text(shape: Shape) -> str:
    """The result shape as XLA prints it, without layouts: ``f32[8,32]``, ``(f32[8], s32[])``."""
    return shape_to_text(_without_layout(shape))


def _output_bytes(shape: Shape) -> int:
    return sum(leaf.num_elements * leaf.element_bits // 8 for leaf in shape.leaves())


def _groups(instruction: Instruction, module: Module) -> tuple[int | None, int | None]:
    """(group size, number of groups) as the text says: source-target pairs count as one group of
    that many pairs; ``{}`` is one group of every device; unreadable or absent groups are
    unknown."""
    try:
        pairs = source_target_pairs(instruction)
        if pairs is not None:
            return (len(pairs) or None), None
        if "replica_groups" not in instruction.attributes:
            return None, None
        devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
        groups = replica_groups(instruction, devices)
    except HloSyntaxError:
        return None, None
    if not groups:
        return devices, 1
    return len(groups[0]), len(groups)


@dataclasses.dataclass(frozen=True, slots=True)
class CollectiveFacts:
    """A collective's kind, groups, mesh axes and bytes, as its instruction says."""

    kind: str  # one of profan.cost.collectives.KINDS
    group_size: int | None  # devices in a group (source-target pairs: their count); None: unread
    num_groups: int | None
    axes: tuple[str, ...] | None  # the mesh axes it runs over (sharding analysis), if known
    full_bytes: int | None  # the full array along the collective's axis (the cost model's)
    output_bytes: int  # its result's bytes


def collective_facts(
    instruction: Instruction, module: Module, cost: OpCost, axes: tuple[str, ...] | None
) -> CollectiveFacts | None:
    """A collective's facts (``None`` for other ops)."""
    found = COLLECTIVE_OPCODES.get(instruction.opcode)
    if found is None:
        return None
    group_size, num_groups = _groups(instruction, module)
    return CollectiveFacts(
        kind=found[0],
        group_size=group_size,
        num_groups=num_groups,
        axes=tuple(axes) if axes else None,
        full_bytes=cost.collective.full_bytes if cost.collective is not None else None,
        output_bytes=_output_bytes(instruction.shape),
    )


@dataclasses.dataclass(slots=True)
class OpFacts:
    """Facts of one op the report shows (``None`` where the op has no instruction)."""

    category: str = "other"
    scope: str | None = None
    op_path: str | None = None
    source: str | None = None
    position: int | None = None
    shape: str | None = None
    collective: CollectiveFacts | None = None


def op_facts(
    instruction: Instruction,
    module: Module,
    cost: OpCost,
    positions: dict[tuple[str | None, str], int],
    axes: tuple[str, ...] | None,
) -> OpFacts:
    location = source_location(module, instruction)
    return OpFacts(
        category=classify(instruction, module).category,
        scope=scope_of(instruction) or None,
        op_path=op_name_of(instruction) or None,
        source=str(location) if location else None,
        position=positions.get((instruction.computation, instruction.name)),
        shape=shape_text(instruction.shape),
        collective=collective_facts(instruction, module, cost, axes),
    )

"""Collectives: who talks to whom (replica groups, the mesh axes a group spans), the full array
``V`` the interconnect model times, and the bytes each device sends.

A collective's time on a chip is the roofline's business (``profan.roofline.interconnect``);
here only the facts of the instruction are read.  Async pairs: the ``-start`` carries the
transfer, the ``-done`` waits for it; both carry the ``CollectiveInfo``.  Fusions that are really
collectives (TPU's ``calls=%all-reduce-scatter.3``) and ``async-start`` wrapping a collective are
recognised here too.
"""

from __future__ import annotations

from profan.cost import bytes as sizes
from profan.cost.context import CostContext, size
from profan.cost.model import CollectiveInfo, OpCost
from profan.errors import HloSyntaxError
from profan.hlo.model import Instruction, Module
from profan.hlo.opcodes import base_opcode
from profan.hlo.views import called_computations, replica_groups, source_target_pairs

# Collective kinds profan models, keyed by the HLO opcode with any -start/-done removed.
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
ASYNC_KIND_OPCODES = frozenset(
    kind + suffix for kind in KINDS for suffix in ("", "-start", "-done", "-update")
)


def sent_bytes_per_device(kind: str, full_bytes: int, group_size: int) -> float:
    """Bytes one device sends over the interconnect for the collective (its ``ici_bytes``)."""
    if group_size <= 1:
        return 0.0
    share = (group_size - 1) / group_size
    if kind == "all-reduce":
        return 2 * share * full_bytes
    if kind == "collective-permute":
        return float(full_bytes)
    return share * full_bytes


def _device_groups(instruction: Instruction, module: Module | None) -> tuple[list[list[int]], str]:
    """The collective's device groups, and a note when they are not what the text says: a
    missing or unreadable ``replica_groups`` is read as XLA reads ``{}``, one group of every
    device."""
    num_devices = None
    if module is not None:
        num_devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    note = ""
    try:
        groups = replica_groups(instruction, num_devices) or []
    except HloSyntaxError as error:
        groups = []
        note = f"replica_groups unreadable ({error.reason}): one group of all devices assumed"
    groups = [g for g in groups if g]
    if not groups and num_devices:
        groups = [list(range(num_devices))]
    return groups, note


def axis_decomposition(group: list[int]) -> tuple[int, ...]:
    """Sizes of the mesh axes a group of device ids spans, read off its strides.

    ``{0,16,32,…}`` is one axis; ``{0,1,4,5}`` is two axes of 2 (stride 1, then stride 4).
    A group that is no product of strided runs counts as one axis of its size.
    """
    ids = sorted(group)
    if len(ids) <= 2:
        return (len(ids),)
    sizes_found: list[int] = []
    while len(ids) > 1:
        stride = ids[1] - ids[0]
        run = 1
        while run < len(ids) and ids[run] - ids[run - 1] == stride:
            run += 1
        if len(ids) % run:
            return (len(group),)
        blocks = [ids[i : i + run] for i in range(0, len(ids), run)]
        if any(
            [b - block[0] for b in block] != [i * stride for i in range(run)] for block in blocks
        ):
            return (len(group),)
        sizes_found.append(run)
        ids = [block[0] for block in blocks]
    return tuple(sizes_found)


def collective_info(instruction: Instruction, model: CostContext, kind: str) -> CollectiveInfo:
    """Group size, axes spanned and the full bytes ``V`` of a collective instruction."""
    groups, note = _device_groups(instruction, model.module)
    if kind == "collective-permute":
        pairs = source_target_pairs(instruction) or []
        devices = {device for pair in pairs for device in pair}
        groups = [sorted(devices)] if devices else groups
    group_size = len(groups[0]) if groups else 1
    axis_sizes = axis_decomposition(groups[0]) if groups else (1,)
    in_bytes = sum(
        sizes.array_bytes(leaf)
        for shape in model.operand_shapes(instruction)
        if shape
        for leaf in shape.leaves()
        if leaf.is_array
    )
    out_shape = instruction.shape
    out_leaves = [leaf for leaf in out_shape.leaves() if leaf.is_array]
    if kind == "all-gather" and instruction.opcode.endswith("-start") and out_shape.is_tuple:
        out_leaves = [leaf for leaf in out_shape.tuple_shapes[-1].leaves() if leaf.is_array]
    out_bytes = sum(sizes.array_bytes(leaf) for leaf in out_leaves)
    if kind == "all-gather":
        full = out_bytes if out_bytes >= in_bytes else in_bytes * group_size
    elif kind == "collective-permute":
        full = in_bytes
    else:  # reduce-scatter, all-reduce, all-to-all: the input is the full array
        full = in_bytes if in_bytes else out_bytes
    return CollectiveInfo(
        kind=kind,
        full_bytes=int(full),
        group_size=group_size,
        groups=groups,
        n_axes=len(axis_sizes),
        axis_sizes=axis_sizes,
        groups_note=note,
    )


def attach(cost: OpCost, info: CollectiveInfo) -> None:
    """Give ``cost`` the collective and the bytes each device sends for it."""
    cost.collective = info
    cost.ici_bytes = sent_bytes_per_device(info.kind, info.full_bytes, info.group_size)


def collective(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """A collective op (or one half of an async pair)."""
    return _collective(instruction, model, cost, base_opcode(instruction.opcode))


def _collective(instruction: Instruction, model: CostContext, cost: OpCost, kind: str) -> OpCost:
    opcode = instruction.opcode
    if opcode.endswith("-done"):
        cost.async_role = "done"
        cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
        start = model.operand(instruction, 0)
        if start is not None:
            started = _collective(start, model, OpCost(0.0, 0.0, 0.0, 0.0), kind)
            cost.collective = started.collective
        cost.derivation.append(f"{opcode}: waits for its -start, which carries the transfer")
        return cost
    if opcode.endswith("-start"):
        cost.async_role = "start"
    info = collective_info(instruction, model, kind)
    attach(cost, info)
    if kind == "all-reduce":
        # XLA: one FLOP per output element (the combiner applied once per element)
        leaves = [leaf for leaf in instruction.shape.leaves() if leaf.is_array]
        cost.flops = float(sum(leaf.num_elements for leaf in leaves))
        cost.hbm_bytes_written = float(sum(size(leaf) for leaf in leaves))
    cost.derivation.append(
        f"{opcode}: V={info.full_bytes} B over groups of {info.group_size} "
        f"({info.n_axes} axis/axes {list(info.axis_sizes)}), sends {cost.ici_bytes:.0f} B"
    )
    if info.groups_note:
        cost.derivation.append(info.groups_note)
    return cost


def fused_collective_kind(
    instruction: Instruction, model: CostContext
) -> tuple[str, Instruction | None]:
    """A kCustom fusion that is really a collective (TPU: ``calls=%all-reduce-scatter.3``): its
    kind and the collective inside its body, if any (``("", None)`` for other fusions)."""
    for name in called_computations(instruction):
        lowered = name.lower()
        if lowered.startswith("all-reduce-scatter") or lowered.startswith("reduce-scatter"):
            kind = "reduce-scatter"
        elif lowered.startswith("all-gather"):
            kind = "all-gather"
        elif lowered.startswith("all-reduce"):
            kind = "all-reduce"
        elif lowered.startswith("all-to-all"):
            kind = "all-to-all"
        else:
            continue
        body = model.callee(name)
        inner = None
        if body is not None:
            inner = next((i for i in body.instructions if base_opcode(i.opcode) in KINDS), None)
        return kind, inner
    return "", None


def wrapped_collective(instruction: Instruction, model: CostContext) -> Instruction | None:
    """The collective an ``async-start`` runs (its called computation's collective), if any."""
    for name in called_computations(instruction):
        body = model.callee(name)
        if body is None:
            continue
        for inner in body.instructions:
            if base_opcode(inner.opcode) in KINDS:
                return inner
    return None

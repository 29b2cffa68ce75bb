"""Data movement: slices, updates in place, gathers and scatters, transposes, copies between
memory spaces, and the default of every other op (operands read, output written once)."""

from __future__ import annotations

from profan.cost import bytes as sizes
from profan.cost.context import CostContext, elements, size
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.opcodes import HOST_MEMORY_SPACE
from profan.hlo.views import called_computations


def default_bytes(instruction: Instruction, model: CostContext) -> tuple[float, float]:
    """Operands read + output written.  A tuple-shaped result (multi-operand sort, a tuple
    all-to-all) is charged its arrays, as XLA 0.10 does; only ``tuple`` itself is charged its
    pointer table (``tuple_``)."""
    read = sum(size(shape) for shape in model.operand_shapes(instruction))
    shape = instruction.shape
    if shape.is_tuple:
        written = sum(size(leaf) for leaf in shape.leaves() if leaf.is_array)
    else:
        written = size(shape)
    return float(read), float(written)


def free(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
    cost.derivation.append(f"{instruction.opcode}: no data moved, no math")
    return cost


def data_movement(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    cost.derivation.append(
        f"{instruction.opcode}: data movement, operands read and output written once"
    )
    return cost


def tuple_(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    cost.hbm_bytes_read = 0.0
    cost.hbm_bytes_written = float(size(instruction.shape))
    cost.derivation.append("tuple: only its pointer table is written")
    return cost


def slice_(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    out = float(size(instruction.shape))
    cost.hbm_bytes_read, cost.hbm_bytes_written = out, out
    cost.derivation.append("slice: reads only the sliced part")
    return cost


def dynamic_slice(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    out = float(size(instruction.shape))
    cost.hbm_bytes_read = out + size(model.operand_shape(instruction, 1))
    cost.hbm_bytes_written = out
    cost.derivation.append("dynamic-slice: reads the slice and its start index")
    return cost


def dynamic_update_slice(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    update = float(size(model.operand_shape(instruction, 1)))
    cost.hbm_bytes_read = update + size(model.operand_shape(instruction, 2))
    cost.hbm_bytes_written = update
    cost.derivation.append(
        "dynamic-update-slice: operand 0 is updated in place; only the update moves"
    )
    return cost


def gather(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    out = float(size(instruction.shape))
    cost.hbm_bytes_read = out + size(model.operand_shape(instruction, 1))
    cost.hbm_bytes_written = out
    cost.derivation.append("gather: reads as much as it writes, plus the indices")
    return cost


def scatter(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    operands = len(instruction.operands)
    n = max(1, (operands - 1) // 2)  # scatter(operands..., indices, updates...)
    updates = [model.operand_shape(instruction, n + 1 + i) for i in range(n)]
    update_bytes = float(sum(size(shape) for shape in updates))
    indices = float(size(model.operand_shape(instruction, n)))
    cost.hbm_bytes_read = 2 * update_bytes + indices
    cost.hbm_bytes_written = update_bytes
    names = called_computations(instruction)
    per_flops, per_trans, _ = model.scalar_computation_flops(names[0] if names else None)
    count = elements(updates[0]) if updates else 0
    cost.flops = per_flops * count
    cost.transcendentals = per_trans * count
    cost.derivation.append("scatter: 3 x update bytes + indices; combiner per update element")
    return cost


def _is_layout_bitcast(instruction: Instruction, model: CostContext) -> bool:
    operand = model.operand_shape(instruction, 0)
    if operand is None or operand.layout is None or instruction.shape.layout is None:
        return False
    return sizes.physical_dims(operand) == sizes.physical_dims(instruction.shape)


def transpose(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    if not _is_layout_bitcast(instruction, model):
        return data_movement(instruction, model, cost)
    cost.hbm_bytes_read = cost.hbm_bytes_written = 0.0
    cost.derivation.append("transpose: only relabels dims (a bitcast)")
    return cost


def async_copy(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """``copy-start``/``copy-done``: a DMA between memory spaces.  The start reads the source,
    the done writes the destination, each in the memory space it lives in (the TPU compiler's
    per-op figures: the golden v5p profile's ``copy-start`` of ``bf16[1,2048,2048]`` from HBM
    into ``S(1)`` reads 8 MiB of HBM and its ``copy-done`` writes 8 MiB of VMEM; on the v6e
    trace a copy from host memory ``S(5)`` reads 5.37 GB of host memory on its start and writes
    them to HBM on its done).  A copy within HBM moves the array on both halves."""
    start = instruction.opcode == "copy-start"
    cost.async_role = "start" if start else "done"
    # copy-start's result is (destination, source, context); copy-done's operand is that tuple
    pair = instruction.shape if start else model.operand_shape(instruction, 0)
    moved = model.operand_shape(instruction, 0) if start else instruction.shape
    destination = source = moved
    if pair is not None and pair.is_tuple and len(pair.tuple_shapes) >= 2:
        destination, source = pair.tuple_shapes[0], pair.tuple_shapes[1]
    spaces = sorted(sizes.spaces_of([destination, source]))
    if source is not None and sizes.memory_space(source) == HOST_MEMORY_SPACE:
        cost.transfer_direction = "to-device"
    elif destination is not None and sizes.memory_space(destination) == HOST_MEMORY_SPACE:
        cost.transfer_direction = "to-host"
    cost.host_transfer = cost.transfer_direction is not None
    if start:
        cost.hbm_bytes_read, cost.hbm_bytes_written = float(size(source)), 0.0
    else:
        cost.hbm_bytes_read, cost.hbm_bytes_written = 0.0, float(size(destination))
    array = moved if moved is not None and moved.is_array else None
    moved_bytes = sizes.logical_bytes(array) if array is not None else 0
    cost.derivation.append(
        f"{instruction.opcode}: a copy of {moved_bytes} bytes between memory spaces "
        f"{[sizes.space_label(s) for s in spaces]}; the start reads the source, the done writes "
        "the destination"
    )
    return cost

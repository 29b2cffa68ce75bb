"""Control flow (``while``, ``call``, ``conditional``) and ``async-start``/``async-done``: the cost
of the called computations, counted as XLA's cost analysis counts them (a loop body once)."""

from __future__ import annotations

from profan.cost.collectives import attach, collective_info, wrapped_collective
from profan.cost.context import CostContext, size
from profan.cost.kernels.model import weaker_source
from profan.cost.model import OpCost
from profan.hlo.model import Instruction
from profan.hlo.opcodes import base_opcode
from profan.hlo.views import called_computations


def _larger(first: float | None, second: float | None) -> float | None:
    """The larger of two figures; unknown when either is (a branch we cannot cost may be it)."""
    return None if first is None or second is None else max(first, second)


def _loop_alone(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """A ``while`` seen without its body (an op profile, a pasted line): its own figures.  Its
    body's ops run, and are costed, as ops of their own; the loop state stays in its buffers
    (the result aliases the operand), so the loop itself moves only the state's pointer tables
    and does no math."""
    cost.flops = cost.transcendentals = 0.0
    cost.hbm_bytes_read = float(sum(size(s) for s in model.operand_shapes(instruction)))
    cost.hbm_bytes_written = float(size(instruction.shape))
    cost.derivation.append(
        "while without its body: its own figures (the body's ops are costed as ops of their "
        "own; the loop state stays in place: only its pointer tables move)"
    )
    return cost


def control_flow(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    names = called_computations(instruction)
    computations = [model.callee(name) for name in names]
    if not names or any(c is None for c in computations):
        if instruction.opcode == "while" and instruction.shape.is_tuple:
            return _loop_alone(instruction, model, cost)
        cost.flops = cost.transcendentals = None
        cost.derivation.append(f"{instruction.opcode}: called computations not available")
        return cost
    subtotals = [model.computation_cost(c) for c in computations if c is not None]
    if instruction.opcode == "conditional":
        total = subtotals[0]
        for other in subtotals[1:]:
            total.flops = _larger(total.flops, other.flops)
            total.transcendentals = _larger(total.transcendentals, other.transcendentals)
            total.hbm_bytes_read = max(total.hbm_bytes_read, other.hbm_bytes_read)
            total.hbm_bytes_written = max(total.hbm_bytes_written, other.hbm_bytes_written)
            total.unknown = total.unknown or other.unknown
            total.flops_source = weaker_source(total.flops_source, other.flops_source)
            total.bytes_source = weaker_source(total.bytes_source, other.bytes_source)
        how = "the costliest branch"
    else:
        total = OpCost(0.0, 0.0, 0.0, 0.0)
        for sub in subtotals:
            total.add(sub)
        how = "one pass over " + ", ".join(names)
    total.dtype = cost.dtype
    total.derivation.append(
        f"{instruction.opcode}: {how} (XLA's convention; trip count not applied)"
    )
    return total


def async_wrapper(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    """``async-start`` costs what its called computation costs (XLA); ``async-done`` waits.

    When the wrapped computation is a collective, both carry its ``CollectiveInfo`` and the
    pair is timed as that collective (on the done, see ``profan.roofline``).
    """
    if instruction.opcode == "async-start":
        total = control_flow(instruction, model, cost)
        total.async_role = "start"
        start: Instruction | None = instruction
    else:
        total = cost
        total.async_role = "done"
        total.derivation.append("async-done: waits for its async-start")
        start = model.operand(instruction, 0)
    inner = wrapped_collective(start, model) if start is not None else None
    if inner is not None:
        kind = base_opcode(inner.opcode)
        info = collective_info(inner, model, kind)
        attach(total, info)
        total.derivation.append(
            f"asynchronous {kind}: V={info.full_bytes} B, groups of {info.group_size}"
        )
    return total

"""Fusions: FLOPs summed over the fused body; HBM bytes only at the fusion's boundary, with what
the body really reads of each parameter (a slice reads only the slice, also through a nested
fusion: a scanned layer's weights are read one layer at a time) and really writes (a
dynamic-update-slice writes only its update); what the fusion only hands through (in-place
pass-throughs, the async collectives it carries: ``profan.cost.inflight``) costs it nothing."""

from __future__ import annotations

from profan.cost.collectives import attach, collective_info, fused_collective_kind
from profan.cost.context import CostContext, first_array, size
from profan.cost.demand import parameter_read_bytes
from profan.cost.inflight import InFlight, in_flight
from profan.cost.matmul import mark_matrix_math
from profan.cost.model import OpCost
from profan.hlo.model import Computation, Instruction
from profan.hlo.views import called_computations


def _nested_parameter(user: Instruction, index: int, model: CostContext) -> Instruction | None:
    """Parameter ``index`` of the computation the nested fusion ``user`` calls."""
    names = called_computations(user)
    body = model.callee(names[0]) if names else None
    if body is None:
        return None
    return next((p for p in body.params if p.parameter_number == index), None)


def _parameter_read_bytes(parameter: Instruction, model: CostContext) -> float:
    """Bytes a fusion reads for one fused parameter (XLA's ``FusionParameterReadBytes``: slices
    read only the slice; a nested fusion reads what its own parameter reads)."""
    own = float(size(parameter.shape))
    # a parameter that is its computation's result (a nested operand fusion that only hands
    # it on) is read whole
    read = own if parameter.is_root else 0.0
    shared = parameter.is_root
    for user in model.users(parameter):
        opcode = user.opcode
        if opcode == "fusion":
            indices = [i for i, o in enumerate(user.operands) if o.name == parameter.name]
            inner = [_nested_parameter(user, i, model) for i in indices]
            if all(p is not None for p in inner):
                read += sum(_parameter_read_bytes(p, model) for p in inner if p is not None)
            elif not shared:
                shared = True
                read += own
        elif opcode == "slice":
            read += size(user.shape)
        elif opcode == "dynamic-slice":
            if user.operands and user.operands[0].name.lstrip("%") == parameter.name:
                read += size(user.shape)
            elif not shared:
                shared = True
                read += own
        elif opcode == "dynamic-update-slice":
            if user.operands and user.operands[0].name.lstrip("%") != parameter.name and not shared:
                shared = True
                read += own
        elif opcode in ("broadcast", "reshape"):
            read += own
        elif opcode == "get-tuple-element" and parameter.shape.is_tuple:
            read += _parameter_read_bytes(user, model)
        elif not shared:
            shared = True
            read += own
    return read


def _in_place_scatter_bytes(
    fusion: Instruction, body: Computation, model: CostContext, read: float, written: float
) -> float | None:
    """Bytes a scatter-rooted fusion really moves: its buffer is updated in place, so instead of
    reading and writing the whole buffer (XLA's accounting) only the touched rows are read and
    written.  ``None`` when the fusion is not such a scatter."""
    root = body.root
    if root.opcode != "scatter" or fusion.shape.is_tuple or len(root.operands) < 3:
        return None
    target = body.get(root.operands[0].name)
    while target is not None and target.opcode in ("bitcast", "copy") and target.operands:
        target = body.get(target.operands[0].name)
    if target is None or target.opcode != "parameter":
        return None
    n = max(1, (len(root.operands) - 1) // 2)
    update = float(size(model.operand_shape(root, n + 1)))
    buffer = float(size(target.shape))
    return max(0.0, read - buffer + update) + max(0.0, written - size(fusion.shape) + update)


def _written_bytes(
    fusion: Instruction,
    body: Computation,
    model: CostContext,
    passing: InFlight,
    *,
    through_aliases: bool = False,
) -> float:
    """Each output array written once; an in-place dynamic-update-slice writes only its update
    (XLA's accounting looks at the output's producer; ``through_aliases`` also finds the update
    behind a bitcast of it); an output the fusion only hands through is not written."""
    root = body.root
    written = 0.0
    shape = fusion.shape
    out_leaves = list(shape.tuple_shapes) if shape.is_tuple else [shape]
    for index, leaf in enumerate(out_leaves):
        if index in passing.outputs:
            continue
        if not leaf.is_array:
            if leaf.is_tuple:
                written += sum(size(x) for x in leaf.leaves() if x.is_array)
            continue
        producer = root
        if shape.is_tuple and root.opcode == "tuple" and index < len(root.operands):
            producer = body.get(root.operands[index].name) or root
        while through_aliases and producer.opcode in ("bitcast", "reshape") and producer.operands:
            producer = body.get(producer.operands[0].name) or producer
            if producer.opcode not in ("bitcast", "reshape", "dynamic-update-slice"):
                break
        if producer.opcode == "dynamic-update-slice":
            written += size(model.operand_shape(producer, 1))
        else:
            written += size(leaf)
    return written


def _demanded_bytes(
    instruction: Instruction, body: Computation, model: CostContext, cost: OpCost, passing: InFlight
) -> None:
    """The roofline's bytes: what the body's outputs need of each parameter
    (``profan.cost.demand``), where that is less than XLA's accounting."""
    read, partial = parameter_read_bytes(body, model, skip=passing.parameters)
    read += sum(
        size(c.shape)
        for c in body.instructions
        if c.opcode == "constant" and c.shape.num_elements > 1
    )
    written = _written_bytes(instruction, body, model, passing, through_aliases=True)
    if read + written >= cost.hbm_bytes:
        return
    cost.roofline_hbm_bytes = read + written
    cost.derivation.append(
        f"the fused computation reads only what its outputs need ({read:.0f} B read, "
        f"{written:.0f} B written; XLA's accounting: {cost.hbm_bytes:.0f} B): " + "; ".join(partial)
    )


def _mark_async_half(body: Computation, model: CostContext, cost: OpCost) -> None:
    """A fusion holding a call that marks one half of an asynchronous pair (XLA TPU's
    ``AsyncCollectiveDone`` in an async-collective-done fusion: its event is the wait for the
    collective) is that half."""
    roles = {
        model.estimate(inner).async_role for inner in body.instructions
        if inner.opcode == "custom-call"
    } - {None}  # fmt: skip
    if len(roles) == 1:
        cost.async_role = roles.pop()
        cost.derivation.append(f"the {cost.async_role} of an asynchronous pair (its marker call)")


def fusion(instruction: Instruction, model: CostContext, cost: OpCost) -> OpCost:
    names = called_computations(instruction)
    body = model.callee(names[0]) if names else None
    kind, inner = fused_collective_kind(instruction, model)
    if kind:
        info = collective_info(inner if inner is not None else instruction, model, kind)
        attach(cost, info)
        cost.derivation.append(
            f"fused {kind} ({names[0]}): V={info.full_bytes} B, groups of {info.group_size}"
        )
    if body is None:
        cost.flops = cost.transcendentals = None
        cost.bytes_source = "upper-bound"
        cost.derivation.append(
            "fusion: body not available, FLOPs unknown; bytes = operands + outputs in full, an "
            "upper bound (with its body a fusion may read only slices of its operands and update "
            "its output in place)"
        )
        return cost
    inner_cost = model.computation_cost(body)
    _mark_async_half(body, model, cost)
    cost.flops = inner_cost.flops
    cost.transcendentals = inner_cost.transcendentals
    cost.unknown = inner_cost.unknown
    cost.flops_source = inner_cost.flops_source
    if inner_cost.collective is not None and cost.collective is None:
        cost.collective = inner_cost.collective
        cost.ici_bytes = inner_cost.ici_bytes
    dots = [i for i in body.instructions if i.opcode in ("dot", "convolution")]
    if dots:
        array = first_array(model.operand_shape(dots[0], 0))
        if array is not None:
            cost.dtype = array.dtype
        mark_matrix_math(dots[0], cost)
    passing = in_flight(instruction, body, model)
    written = _written_bytes(instruction, body, model, passing)
    # Inputs: per fused parameter, what its users actually read; plus big constants.
    read = 0.0
    for parameter in body.params:
        if parameter.parameter_number not in passing.parameters:
            read += _parameter_read_bytes(parameter, model)
    for constant in body.instructions:
        if constant.opcode == "constant" and constant.shape.num_elements > 1:
            read += size(constant.shape)
    cost.hbm_bytes_read, cost.hbm_bytes_written = read, written
    in_place = _in_place_scatter_bytes(instruction, body, model, read, written)
    if in_place is not None:
        cost.roofline_hbm_bytes = in_place
        cost.derivation.append(
            f"in-place scatter: only the scattered rows move ({in_place:.0f} B), "
            "though XLA's accounting charges the whole buffer"
        )
    else:
        _demanded_bytes(instruction, body, model, cost, passing)
    if passing:
        carried = ", ".join(passing.collectives)
        cost.derivation.append(
            f"outputs {sorted(passing.outputs)} and parameters {sorted(passing.parameters)} only "
            "pass through in place"
            + (
                f"; {carried} is carried asynchronously (its bytes are the async-collective "
                "start/done ops')"
                if carried
                else ""
            )
        )
    cost.derivation.append(
        f"fusion: FLOPs summed over {body.name} ({len(body.instructions)} instructions); "
        "bytes at the fusion boundary only"
    )
    return cost

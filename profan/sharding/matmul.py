"""The propagation handlers of ``dot`` and ``convolution``: the result's split from the operands'
splits, and a :class:`~profan.sharding.model.MatmulSharding` record of the global shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from profan.attribute import is_backward, scope_of
from profan.hlo.views import int_list_attribute, metadata
from profan.sharding.model import MatmulSharding
from profan.sharding.splits import (
    UNKNOWN,
    ValueSplit,
    dims_or_unknown,
    global_dims,
    merge,
    split_map,
    unknown,
)

if TYPE_CHECKING:
    from profan.sharding.propagate import Propagator, Site


def dot(propagator: Propagator, site: Site) -> ValueSplit:
    """Batch dims keep both operands' (merged) split, free dims their operand's; a split
    contracted dim makes the result a partial sum over its axes."""
    instruction, shape = site.instruction, site.shape
    if len(site.operands) < 2:
        return unknown(shape)
    lhs, rhs = site.operands[0], site.operands[1]
    lhs_shape = propagator.operand_shape(instruction, 0)
    rhs_shape = propagator.operand_shape(instruction, 1)
    if lhs_shape is None or rhs_shape is None:
        return unknown(shape)
    lb = int_list_attribute(instruction, "lhs_batch_dims")
    rb = int_list_attribute(instruction, "rhs_batch_dims")
    lc = int_list_attribute(instruction, "lhs_contracting_dims")
    rc = int_list_attribute(instruction, "rhs_contracting_dims")
    lhs_dims = dims_or_unknown(lhs, len(lhs_shape.dims))
    rhs_dims = dims_or_unknown(rhs, len(rhs_shape.dims))
    if (
        any(not 0 <= d < len(lhs_dims) for d in lb + lc)
        or any(not 0 <= d < len(rhs_dims) for d in rb + rc)
        or len(lb) != len(rb)
        or len(lc) != len(rc)
    ):
        propagator.notes.append(
            f"{instruction.name}: dot dimension numbers do not fit its operands"
        )
        return unknown(shape)
    lf = [i for i in range(len(lhs_dims)) if i not in lb and i not in lc]
    rf = [i for i in range(len(rhs_dims)) if i not in rb and i not in rc]
    out_dims = (
        [merge(lhs_dims[a], rhs_dims[b]) for a, b in zip(lb, rb, strict=False)]
        + [lhs_dims[i] for i in lf]
        + [rhs_dims[i] for i in rf]
    )
    partial: list[str] = []
    for a, b in zip(lc, rc, strict=False):
        merged = merge(lhs_dims[a], rhs_dims[b])
        partial.extend(x for x in merged.axes if x not in partial)
    hidden = lhs.hidden + rhs.hidden
    evidence: list[str] = []
    for side, value in (("lhs", lhs), ("rhs", rhs)):
        if value.origin:
            evidence.append(f"{side} comes from parameter {value.origin} (its sharding=)")
        elif value.known:
            evidence.append(f"{side} split followed from parameter shardings")
    result = ValueSplit(
        dims=tuple(out_dims), hidden=hidden, partial=tuple(partial) + lhs.partial + rhs.partial
    )
    propagator.matmuls.append(
        MatmulSharding(
            name=site.caller or instruction.name,
            dot=instruction.name,
            computation=instruction.computation,
            opcode="dot",
            dtype=shape.dtype,
            local_lhs=list(lhs_shape.dims),
            local_rhs=list(rhs_shape.dims),
            local_out=list(shape.dims),
            global_lhs=[s for s, _ in lhs.hidden] + global_dims(lhs_shape.dims, lhs_dims),
            global_rhs=[s for s, _ in rhs.hidden] + global_dims(rhs_shape.dims, rhs_dims),
            global_out=[s for s, _ in hidden] + global_dims(shape.dims, out_dims),
            lhs_split=split_map(lhs_dims, len(lhs.hidden), lhs.hidden),
            rhs_split=split_map(rhs_dims, len(rhs.hidden), rhs.hidden),
            out_split=split_map(out_dims, len(hidden), hidden),
            contracting=(lc, rc),
            partial_sum_axes=list(partial),
            evidence=evidence,
            batch=(lb, rb),
            op_name=metadata(instruction).op_name,
            scope=scope_of(instruction),
            backward=is_backward(instruction),
            annotated=lhs.known or rhs.known,
        )
    )
    return result


def _batch_labels(labels: str) -> tuple[int, int] | None:
    """Positions of ``b`` in the input and output parts of ``dim_labels=b01f_01io->b01f``."""
    parts = labels.replace("->", "_").split("_")
    if len(parts) != 3:
        return None
    in_labels, _, out_labels = parts
    if "b" not in in_labels or "b" not in out_labels:
        return None
    return in_labels.index("b"), out_labels.index("b")


def convolution(propagator: Propagator, site: Site) -> ValueSplit:
    """Convolutions keep their local shapes: only the batch split (``dim_labels`` 'b') is
    followed; the record says so."""
    instruction, shape = site.instruction, site.shape
    if len(site.operands) < 2:
        return unknown(shape)
    lhs_shape = propagator.operand_shape(instruction, 0)
    rhs_shape = propagator.operand_shape(instruction, 1)
    if lhs_shape is None or rhs_shape is None:
        return unknown(shape)
    lhs_dims = dims_or_unknown(site.operands[0], len(lhs_shape.dims))
    rhs_dims = dims_or_unknown(site.operands[1], len(rhs_shape.dims))
    out_dims = [UNKNOWN for _ in shape.dims]
    batch = _batch_labels(instruction.attributes.get("dim_labels", ""))
    if batch is not None and batch[0] < len(lhs_dims) and batch[1] < len(out_dims):
        out_dims[batch[1]] = lhs_dims[batch[0]]
    propagator.matmuls.append(
        MatmulSharding(
            name=site.caller or instruction.name,
            dot=instruction.name,
            computation=instruction.computation,
            opcode="convolution",
            dtype=shape.dtype,
            local_lhs=list(lhs_shape.dims),
            local_rhs=list(rhs_shape.dims),
            local_out=list(shape.dims),
            global_lhs=global_dims(lhs_shape.dims, lhs_dims),
            global_rhs=global_dims(rhs_shape.dims, rhs_dims),
            global_out=global_dims(shape.dims, out_dims),
            lhs_split=split_map(lhs_dims, 0, ()),
            rhs_split=split_map(rhs_dims, 0, ()),
            out_split=split_map(out_dims, 0, ()),
            contracting=([], []),
            partial_sum_axes=[],
            evidence=["convolution: only the batch dimension's split is followed"],
        )
    )
    return ValueSplit(dims=tuple(out_dims))

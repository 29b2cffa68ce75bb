"""One ``OpRecord`` per (module, op) of a loaded profile, typed as its figures are: cost and
roofline terms, measured time, efficiency, and the facts the report shows
(``profan.roofline.facts``).

A record's figures are totals over the op's executions (``occurrences``) unless a name says
otherwise.  A figure the op lacks is ``None`` (an op without an instruction has no opcode, a
synchronous op no async span), never a NaN; counts are ints.  ``profan.roofline.checks`` adds
``note`` and ``faster_executions``.  The report's ``OpEntry`` takes every field of the same
name as it is (``profan.report.analysis.build``; the few whose JSON form differs are set
there): a new per-op figure is a field here and the lines that compute it, and the same field
in ``OpEntry`` if the report should carry it.

Every op's FLOPs and bytes carry their source (``flops_source``, ``bytes_source``).  The
compiler's own per-op figures in the trace (``trace_flops``, ``trace_bytes``) are used only where
they are plausible (``profan.cost.kernels.reconcile``): they fill a figure profan cannot model and
raise a lower bound, never go below the op's own lower bound (no 0 bytes for an op with
operands), and where they disagree with a modelled figure by more than 2x both are kept and the
derivation says so.  ``cost_source`` is ``trace`` when either figure came from the trace,
``none`` for ops without an instruction or trace figures, else ``profan``.  Async pairs are
scored on the done (``profan.roofline.spans``); a start has no roofline time of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from profan.chips import Chip
from profan.cost import OpCost
from profan.cost.kernels import reconcile
from profan.hlo.model import Instruction
from profan.roofline.facts import CollectiveFacts, OpFacts, axis_sizes, op_facts
from profan.roofline.megacore import Accounting
from profan.roofline.scoring import ModuleScoring
from profan.roofline.spans import async_efficiency, async_spans, key_column, spans_of_done
from profan.roofline.terms import async_start_times, op_times, row_ici_bytes

if TYPE_CHECKING:
    from profan.sharding import ShardingReport
    from profan.trace.profile import Profile


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One op of a profile against the roofline, over all its executions."""

    module: str  # the module's name as the trace names it
    name: str  # the HLO instruction's name (the trace's op name)
    opcode: str | None  # None where the op has no instruction
    category: str  # profan.attribute's category ("other" without an instruction)
    occurrences: int  # executions, all devices
    measured_s: float  # their measured time (an async done's: only its exposed wait)
    flops: float | None  # None: unknown
    hbm_bytes: float  # what the roofline charges to HBM
    ici_bytes: float  # interconnect bytes (an async collective's on its done)
    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    t_host_s: float
    t_transcendental_s: float
    roofline_s: float  # the ideal time: the largest term
    bound_by: str  # profan.roofline.terms.BOUNDS, "none", "async-start" or "unknown"
    # roofline over measured time (an async done's: over its start-to-done spans); None where
    # either is zero or a done has no span
    efficiency: float | None
    source: str | None  # file:line (the trace's, else the HLO metadata's)
    cost_source: str  # "profan", "trace" (a figure came from the trace) or "none" (no HLO)
    flops_source: str  # profan.cost.kernels.SOURCES
    bytes_source: str
    peak: str | None  # the FLOP/s peak of the compute term: bf16, tf32, bf16/6, …
    trace_flops: float | None  # the profiler's own figures, where the trace has them
    trace_bytes: float | None
    dtype: str | None  # element type of the math
    async_role: str | None  # "start" | "done" for async pairs
    link: str  # the link an async transfer occupies: its bound, with a host copy's direction
    module_key: str | None  # key into Profile.modules; None where the module's HLO is missing
    # async dones: the start-to-done spans of the trace's async line (their total, and count)
    # and the measured wait; None for other ops, and for a done without spans
    async_span_s: float | None
    async_span_n: int | None
    exposed_wait_s: float | None
    scope: str | None  # named scope (op path without its primitive)
    op_path: str | None  # metadata op_name
    position: int | None  # index in program order (profan.roofline.facts)
    shape: str | None  # result shape without layouts
    collective: CollectiveFacts | None
    derivation: str  # how the figures were derived, "; "-joined
    bytes_by_space: dict[str, float]  # bytes per memory space: ``hbm`` first
    # executions measured faster than the roofline, and why (profan.roofline.checks)
    faster_executions: int
    note: str | None


def _present(value: Any) -> bool:
    """Whether a trace stat (a cell of the grouped op table) is there: not None, not NaN."""
    return value is not None and not pd.isna(value)


def _number(value: Any) -> float | None:
    """A trace stat as a float, ``None`` where the trace has none."""
    return float(value) if _present(value) else None


def _implicit_element(instruction: Instruction) -> OpCost:
    """The trace ran a kernel under the name of one element (``%fusion#1``) of a multi-output
    op: what that kernel did is not in the HLO (XLA's element is a free get-tuple-element)."""
    cost = OpCost(None, None, 0.0, 0.0, flops_source="unknown", bytes_source="unknown")
    cost.derivation.append(
        f"the trace ran {instruction.name} as its own kernel: the work of one element of a "
        "multi-output op is not in the HLO, so its cost is unknown"
    )
    return cost


def op_records(
    profile: Profile,
    chip: Chip,
    shardings: dict[str, ShardingReport] | None,
    accounting: Accounting | None = None,
    scorings: dict[str, ModuleScoring] | None = None,
) -> list[OpRecord]:
    """One record per (module, op), in order of first appearance: its cost and roofline times
    over its executions (``chip``: the figures the trace's accounting is scored against, see
    ``profan.roofline.megacore``).
    ``scorings``: module key -> its scoring prepared beforehand (``ModuleScoring``, for the
    same module object and sharding), else built here."""
    spans_by_op = async_spans(profile)
    ops = profile.ops
    aggregations: dict[str, tuple[str, str]] = {
        "occurrences": ("duration_s", "size"),
        "measured_s": ("duration_s", "sum"),
    }
    for column in ("trace_flops", "trace_bytes_accessed", "source"):
        if column in ops:
            aggregations[column] = (column, "first")  # first non-null value
    # One row per op, in order of first appearance (the groups of the op's identity columns).
    group_of, first_rows = profile.op_groups()
    firsts = ops.iloc[first_rows]
    summary = pd.concat(
        [
            pd.DataFrame(
                {
                    "module": firsts["module"].to_numpy(dtype=object),
                    "_key": key_column(firsts["module_key"]).to_numpy(),
                    "op_name": firsts["op_name"].to_numpy(dtype=object),
                }
            ),
            ops.groupby(group_of, sort=False).agg(**aggregations).reset_index(drop=True),
        ],
        axis=1,
    )
    prepared = scorings or {}
    scorings = {}
    slice_devices = profile.device.count or None
    records: list[OpRecord] = []
    for record in summary.to_dict("records"):
        module_key, op_name = record["_key"], record["op_name"]
        module = profile.modules.get(module_key) if module_key else None
        instruction = profile.instruction(module_key, op_name) if module is not None else None
        facts = OpFacts()
        mesh_axes: tuple[int, ...] = ()
        if instruction is not None and module is not None:
            scoring = scorings.get(module_key)
            if scoring is None:
                sharding = shardings.get(module_key) if shardings else None
                scoring = prepared.get(module_key)
                if (
                    scoring is None
                    or scoring.module is not module
                    or scoring.sharding is not sharding
                ):
                    scoring = ModuleScoring(module, sharding)
                scorings[module_key] = scoring
            cost = (
                _implicit_element(instruction)
                if instruction.implicit
                else scoring.estimate(instruction)
            )
            if accounting is not None:
                cost = accounting.share(cost)
            cost_source = "profan"
            axes = scoring.axes_by_name.get(op_name)
            mesh_axes = axis_sizes(scoring.sharding, axes)
            facts = op_facts(instruction, module, cost, scoring.positions, axes)
        else:
            cost = OpCost(None, None, 0.0, 0.0, flops_source="unknown", bytes_source="unknown")
            cost_source = "none"
        trace_flops = _number(record.get("trace_flops"))
        trace_bytes = _number(record.get("trace_bytes_accessed"))
        flops, flops_source, flops_note = reconcile(
            cost.flops, cost.flops_source, trace_flops, what="FLOPs"
        )
        model_bytes = cost.roofline_bytes if cost.bytes_source != "unknown" else None
        # the trace's bytes_accessed counts every memory space: held to profan's all-space
        # figure, and the HBM share is what the other spaces leave of it
        elsewhere = cost.all_space_bytes - cost.roofline_bytes
        all_bytes, bytes_source, bytes_note = reconcile(
            None if model_bytes is None else model_bytes + elsewhere,
            cost.bytes_source,
            trace_bytes,
            what="bytes",
        )
        hbm_bytes = None if all_bytes is None else max(all_bytes - elsewhere, 0.0)
        cost.flops, cost.flops_source, cost.bytes_source = flops, flops_source, bytes_source
        if hbm_bytes is not None and hbm_bytes != model_bytes:
            cost.hbm_bytes_read, cost.hbm_bytes_written = hbm_bytes, 0.0
            cost.roofline_hbm_bytes = None
        if "trace" in (flops_source, bytes_source):
            cost_source = "trace"
        cost.derivation.extend(note for note in (flops_note, bytes_note) if note)
        times = op_times(cost, chip, mesh_axes=mesh_axes or None, slice_devices=slice_devices)
        if cost.async_role == "start":
            times = async_start_times(times)
        occurrences = int(record["occurrences"])
        measured = float(record["measured_s"])
        roofline = times.roofline_s * occurrences
        efficiency = roofline / measured if measured > 0 and roofline > 0 else None
        unknown = cost_source == "none" or cost.flops_source == cost.bytes_source == "unknown"
        span_total: float | None = None
        span_n: int | None = None
        exposed_wait: float | None = None
        derivation = cost.derivation + times.notes
        if cost.async_role == "done":
            # The done's measured time is only the exposed wait for a transfer that ran alongside
            # other ops; the transfer itself is scored over its start-to-done spans.
            exposed_wait = measured
            efficiency, span_total, span_n, note = async_efficiency(
                times.roofline_s, spans_of_done(spans_by_op, module_key, op_name, instruction)
            )
            derivation = [*derivation, note]
        trace_source = record.get("source")
        source = trace_source if _present(trace_source) else facts.source
        records.append(
            OpRecord(
                module=str(record["module"]),
                name=str(op_name),
                opcode=instruction.opcode if instruction is not None else None,
                category=facts.category,
                occurrences=occurrences,
                measured_s=measured,
                flops=None if cost.flops is None else float(cost.flops * occurrences),
                # (float of the product: a figure the cost model counted in ints stays exact
                # until it is one number)
                hbm_bytes=float(cost.roofline_bytes * occurrences),
                ici_bytes=float(row_ici_bytes(cost) * occurrences),
                t_compute_s=times.t_compute_s * occurrences,
                t_hbm_s=times.t_hbm_s * occurrences,
                t_ici_s=times.t_ici_s * occurrences,
                t_host_s=times.t_host_s * occurrences,
                t_transcendental_s=times.t_transcendental_s * occurrences,
                roofline_s=roofline,
                bound_by="unknown" if unknown else times.bound_by,
                efficiency=efficiency,
                source=str(source) if source else None,
                cost_source=cost_source,
                flops_source=cost.flops_source,
                bytes_source=cost.bytes_source,
                peak=times.peak,
                trace_flops=None if trace_flops is None else trace_flops * occurrences,
                trace_bytes=None if trace_bytes is None else trace_bytes * occurrences,
                dtype=cost.dtype,
                async_role=cost.async_role,
                # which link an async transfer occupies (host links are full duplex)
                link=(
                    f"{times.bound_by}:{cost.transfer_direction}"
                    if cost.transfer_direction
                    else times.bound_by
                ),
                module_key=module_key or None,
                async_span_s=span_total,
                async_span_n=span_n,
                exposed_wait_s=exposed_wait,
                scope=facts.scope,
                op_path=facts.op_path,
                position=facts.position,
                shape=facts.shape,
                collective=facts.collective,
                derivation="; ".join(derivation),
                bytes_by_space={
                    space: float(moved * occurrences)
                    for space, moved in cost.bytes_by_space.items()
                },
                faster_executions=0,  # profan.roofline.checks counts them, and says why
                note=None,
            )
        )
    return records

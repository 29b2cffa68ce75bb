"""Parallelism strategies (data, FSDP, tensor, sequence, expert, pipeline) and the evidence.

Each label names the mesh axes it runs along and cites the matmuls and collectives that support
it.  Token axes (data, sequence) are read off forward matmuls' activations (JAX puts them on the
lhs); model axes off weights (the rhs) and contracted dims; FSDP off weights gathered from entry
parameters; pipelines off collective-permute chains.  An all-to-all alone is not evidence of
experts (FSDP and sequence-parallel programs reshard with it too): expert parallelism is named
only when expert weights are split along the all-to-all's axes, or the program's own op names
say so.
"""

from __future__ import annotations

from collections.abc import Iterable

from profan.attribute import block_kind
from profan.errors import HloSyntaxError
from profan.hlo.model import Instruction, Module
from profan.hlo.views import metadata, source_target_pairs
from profan.sharding.mesh import CollectiveAxes, Mesh
from profan.sharding.model import MatmulSharding, StrategyLabel

# Words in an op's name path that say it belongs to a mixture-of-experts block.
_EXPERT_WORDS = ("moe", "expert")


class _Labels:
    """Strategy labels keyed by (strategy, axes), each with up to six pieces of evidence."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, tuple[str, ...]], list[str]] = {}

    def add(self, strategy: str, axes: Iterable[str], why: str) -> None:
        bucket = self.found.setdefault((strategy, tuple(axes)), [])
        if why not in bucket and len(bucket) < 6:
            bucket.append(why)

    def labels(self) -> list[StrategyLabel]:
        return [StrategyLabel(s, list(a), why) for (s, a), why in self.found.items()]


def _token_axes(matmuls: list[MatmulSharding]) -> tuple[set[str], set[str]]:
    """(batch axes, sequence axes): the axes splitting forward matmuls' non-contracted lhs dims;
    the leading dim is the batch, later ones the sequence.  Batch axes include sequence axes."""
    batch_axes: set[str] = set()
    sequence_axes: set[str] = set()
    for m in matmuls:
        if m.backward:
            continue
        offset = len(m.global_lhs) - len(m.local_lhs)
        for dim, axes in m.lhs_split.items():
            local_dim = dim - offset
            if local_dim in m.contracting[0] or (local_dim in m.batch[0] and local_dim != 0):
                continue
            (batch_axes if local_dim <= 0 else sequence_axes).update(axes)
    sequence_axes -= batch_axes
    return batch_axes | sequence_axes, sequence_axes


def _matmul_labels(
    labels: _Labels, m: MatmulSharding, batch_axes: set[str], sequence_axes: set[str]
) -> None:
    lhs_offset = len(m.global_lhs) - len(m.local_lhs)
    rhs_offset = len(m.global_rhs) - len(m.local_rhs)
    # A dot summed over a batch axis (one that splits the leading lhs dim of forward
    # matmuls) is a weight gradient (activations^T · gradients).
    weight_gradient = bool(m.partial_sum_axes) and set(m.partial_sum_axes) <= batch_axes
    for axis in m.partial_sum_axes:
        if weight_gradient:
            labels.add(
                "sequence/context parallel" if axis in sequence_axes else "data parallel",
                [axis],
                f"{m.name}: weight-gradient matmul contracts the {axis}-split tokens and its "
                f"result is summed over {axis}",
            )
        else:
            labels.add(
                "tensor parallel (row split)",
                [axis],
                f"{m.name}: contracted feature dim split along {axis}; partial results "
                f"summed over {axis}",
            )
    if weight_gradient:
        return
    contracted_axes = set(m.partial_sum_axes)
    for dim, axes in m.lhs_split.items():
        local_dim = dim - lhs_offset
        if any(a in contracted_axes for a in axes) or local_dim in m.contracting[0]:
            continue
        if local_dim < 0 or local_dim == 0:
            labels.add(
                "data parallel", axes, f"{m.name}: lhs batch dim split along {', '.join(axes)}"
            )
        elif local_dim in m.batch[0]:
            labels.add(
                "tensor parallel (batched dims, e.g. attention heads)",
                axes,
                f"{m.name}: batch dim {dim} of a batched matmul split along {', '.join(axes)}",
            )
        elif not m.backward:
            # Only forward matmuls: a backward one's lhs is often a transposed activation
            # (x^T in x^T·dy) whose free dim is a feature, split after an all-to-all.
            labels.add(
                "sequence/context parallel",
                axes,
                f"{m.name}: lhs dim {dim} (not the leading batch dim, not contracted) split "
                f"along {', '.join(axes)}",
            )
    for dim, axes in m.rhs_split.items():
        local_dim = dim - rhs_offset
        if any(a in contracted_axes for a in axes) or local_dim in m.contracting[1]:
            continue
        if local_dim < 0 or local_dim in m.batch[1]:
            continue
        if set(axes) <= batch_axes:
            # The weight stays split along the batch axis while it is used: FSDP-style
            # sharding without a gather, not a separate model-parallel axis.
            labels.add(
                "FSDP/ZeRO",
                axes,
                f"{m.name}: rhs dim {dim} stays split along batch axis {', '.join(axes)}",
            )
            continue
        labels.add(
            "tensor parallel (column split)",
            axes,
            f"{m.name}: rhs non-contracted dim {dim} split along {', '.join(axes)}",
        )


def _gathered_operand_labels(labels: _Labels, matmuls: list[MatmulSharding]) -> None:
    """FSDP / ZeRO: weights all-gathered before use; activations gathered are resharding."""
    for m in matmuls:
        for source in m.fed_by:
            if source["kind"] != "all-gather":
                continue
            if source["from_parameter"]:
                labels.add(
                    "FSDP/ZeRO",
                    source["axes"],
                    f"{m.name}: operand {source['operand']} is parameter "
                    f"{source['from_parameter']} all-gathered over {source['axes']} before use",
                )
            else:
                labels.add(
                    "sequence/context parallel or resharding (possible)",
                    source["axes"],
                    f"{m.name}: operand {source['operand']} is an activation all-gathered over "
                    f"{source['axes']} before use",
                )


def _expert_weights(matmuls: list[MatmulSharding], axes: set[str]) -> list[str]:
    """Batched forward matmuls outside attention whose weight (rhs) batch dim is split along
    ``axes``: expert weights stacked on a leading expert dim and sharded by expert."""
    found: list[str] = []
    for m in matmuls:
        if m.backward or not m.batch[1] or block_kind(m.scope) == "attention":
            continue
        offset = len(m.global_rhs) - len(m.local_rhs)
        for local_dim in m.batch[1]:
            split = set(m.rhs_split.get(local_dim + offset, ()))
            if split and split <= axes:
                found.append(
                    f"{m.name}: the weight's batch dim {local_dim} (experts) is split along "
                    f"{', '.join(sorted(split))}"
                )
    return found


def _expert_op_name(instruction: Instruction | None) -> str | None:
    """The op name of a collective when it names experts (``…/moe/…``, ``…/experts/…``)."""
    op_name = metadata(instruction).op_name if instruction is not None else None
    if op_name and any(word in op_name.lower() for word in _EXPERT_WORDS):
        return op_name
    return None


def _all_to_all_labels(
    labels: _Labels, module: Module, mesh: Mesh, matmuls: list[MatmulSharding]
) -> None:
    for c in mesh.collectives:
        if c.kind not in ("all-to-all", "ragged-all-to-all") or not c.axes:
            continue
        evidence = _expert_weights(matmuls, set(c.axes))
        op_name = _expert_op_name(_find(module, c.computation, c.name))
        if op_name is not None:
            evidence.append(f"{c.name}: its op name says experts ({op_name})")
        if evidence:
            labels.add("expert parallel (possible)", c.axes, f"{c.kind} over {c.axes}")
            for why in evidence:
                labels.add("expert parallel (possible)", c.axes, why)
        else:
            labels.add(
                "resharding (all-to-all)",
                c.axes,
                f"{c.name}: {c.kind} over {c.axes}; no expert weights are split along "
                f"{', '.join(c.axes)} and no op name says experts, so not read as expert "
                f"parallelism",
            )


def _permute_labels(labels: _Labels, module: Module, collectives: list[CollectiveAxes]) -> None:
    for c in collectives:
        if c.kind != "collective-permute" or not c.axes:
            continue
        instruction = _find(module, c.computation, c.name)
        pairs: list[tuple[int, int]] = []
        if instruction is not None:
            try:
                pairs = source_target_pairs(instruction) or []
            except HloSyntaxError:
                pairs = []
        sources = {s for s, _ in pairs}
        targets = {t for _, t in pairs}
        if pairs and sources != targets:
            labels.add("pipeline", c.axes, f"{c.name}: collective-permute chain (not a ring)")
        elif pairs:
            labels.add(
                "ring / pipeline (possible)",
                c.axes,
                f"{c.name}: collective-permute ring over {c.axes}",
            )


def strategies(module: Module, mesh: Mesh, matmuls: list[MatmulSharding]) -> list[StrategyLabel]:
    """Every strategy the evidence supports, along which axes, with its evidence."""
    labels = _Labels()
    batch_axes, sequence_axes = _token_axes(matmuls)
    for m in matmuls:
        _matmul_labels(labels, m, batch_axes, sequence_axes)
    _gathered_operand_labels(labels, matmuls)
    kinds_by_axes: dict[tuple[str, ...], set[str]] = {}
    for c in mesh.collectives:
        if c.axes:
            kinds_by_axes.setdefault(tuple(c.axes), set()).add(c.kind)
    for axes, kinds in kinds_by_axes.items():
        if "reduce-scatter" in kinds and "all-gather" in kinds:
            why = f"both all-gather and reduce-scatter run over {list(axes)}"
            labels.add("FSDP/ZeRO", axes, why)
    _all_to_all_labels(labels, module, mesh, matmuls)
    _permute_labels(labels, module, mesh.collectives)
    return labels.labels()


def _find(module: Module, computation: str | None, name: str) -> Instruction | None:
    try:
        return module.computation(computation or "").get(name)
    except KeyError:
        return None

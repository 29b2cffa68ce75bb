"""What each HLO instruction is: a category (``CATEGORIES``) with a finer kind and the reason.

``classify(instruction, module)`` labels every instruction; fusions are labelled by what their
fused computation does (a dot inside → ``matmul``; a reduce → ``reduction``; only layout/indexing
ops → ``data-movement``; arithmetic → ``elementwise``).  Opcode tables come from
``profan.hlo.opcodes``, attributes are read through ``profan.hlo.views``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from profan.hlo.graph import ModuleGraph
from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.hlo.opcodes import (
    BOOKKEEPING_OPCODES,
    COLLECTIVE_OPCODES,
    CONTROL_FLOW_OPCODES,
    DATA_MOVEMENT_OPCODES,
    ELEMENTWISE_LIKE_OPCODES,
    ELEMENTWISE_OPCODES,
    HOST_CUSTOM_CALL_TARGETS,
    HOST_MEMORY_SPACE,
    HOST_OPCODES,
    MATMUL_OPCODES,
    REDUCTION_OPCODES,
)
from profan.hlo.views import backend_config, called_computations, custom_call_target

CATEGORIES = (
    "matmul",
    "collective",
    "elementwise",
    "reduction",
    "data-movement",
    "host",
    "control",
    "custom",
    "other",
)

# Elementwise work: math XLA costs per element, and element-by-element producers (iota, rng).
_ELEMENTWISE = ELEMENTWISE_OPCODES | ELEMENTWISE_LIKE_OPCODES

# Custom-call targets that are library matmuls/convolutions.
_MATMUL_TARGET = re.compile(
    r"^(__cublas\$+(gemm|lt\$matmul)|__cublas\$lt\$matmul\$f8|__cudnn\$+conv|__cudnn\$fmha"
    r"|__hipblas|__hipblaslt|__rocblas|__miopen\$conv|__op\$block_scaled_dot|__onednn\$matmul"
    r"|__onednn\$convolution|te_fused_attn)",
    re.IGNORECASE,
)
# Custom-call targets that are user kernels (Pallas/Mosaic, Triton).
_KERNEL_TARGET = re.compile(
    r"^(tpu_custom_call|__gpu\$xla\.gpu\.triton|triton_kernel_call|mosaic_gpu.*|__triton.*)$"
)
# Custom calls that only annotate (sharding markers) — no work on the device.
_ANNOTATION_TARGETS = {
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
    "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape",
    "LayoutConstraint", "ShardBarrierFrom", "ShardBarrierTo", "__xla_internal_call_marker_before",
    "__xla_internal_call_marker_after", "AllocateBuffer",
}  # fmt: skip
# A fused TPU collective: a kCustom fusion whose called computation is named after a collective.
_FUSED_COLLECTIVE_NAME = re.compile(
    r"^%?(all-reduce-scatter|reduce-scatter|all-gather|all-reduce|all-to-all|ragged-all-to-all"
    r"|collective-permute)"
)


@dataclass(frozen=True, slots=True)
class Classification:
    """One instruction's label: ``category`` (one of CATEGORIES), a finer ``kind``, and why."""

    category: str
    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"category": self.category, "kind": self.kind, "reason": self.reason}


# --- small readers ---------------------------------------------------------------------------


def _attr(instruction: Instruction, name: str) -> str | None:
    value = instruction.attributes.get(name)
    return value.strip() if isinstance(value, str) else value


def backend_kind(instruction: Instruction) -> str | None:
    """``fusion_backend_config.kind`` (GPU: ``__triton_gemm``, ``__cublas$gemm``…) if present."""
    config = backend_config(instruction)
    if not isinstance(config, dict):
        return None
    for key in ("fusion_backend_config", "fusion_config"):
        section = config.get(key)
        if isinstance(section, dict) and isinstance(section.get("kind"), str):
            return section["kind"]
    return None


def _computation(module: Module | None, name: str) -> Computation | None:
    if module is None:
        return None
    try:
        return module.computation(name)
    except KeyError:
        return None


def _is_host_shape(shape: Shape | None) -> bool:
    if shape is None:
        return False
    return any(
        leaf.layout is not None and leaf.layout.memory_space == HOST_MEMORY_SPACE
        for leaf in shape.leaves()
    )


def _operand_shapes(instruction: Instruction, module: Module | None) -> list[Shape]:
    """The operands' shapes that the text or the module knows."""
    shapes = ModuleGraph(module).operand_shapes(instruction)
    return [shape for shape in shapes if shape is not None]


# --- the body of a fusion ----------------------------------------------------------------------


def _body_opcodes(module: Module | None, names: Iterable[str], depth: int = 0) -> list[str]:
    """Opcodes in the called computations, following nested fusions/calls (not reducers)."""
    found: list[str] = []
    for name in names:
        computation = _computation(module, name)
        if computation is None:
            continue
        for inner in computation.instructions:
            found.append(inner.opcode)
            if inner.opcode in ("fusion", "call", "async-start") and depth < 8:
                found.extend(_body_opcodes(module, called_computations(inner), depth + 1))
    return found


def _classify_body(opcodes: list[str], what: str) -> Classification | None:
    present = set(opcodes)
    matmuls = present & MATMUL_OPCODES
    if matmuls:
        return Classification("matmul", sorted(matmuls)[0], f"{what} contains {sorted(matmuls)[0]}")
    collectives = [op for op in opcodes if op in COLLECTIVE_OPCODES]
    if collectives:
        kind = COLLECTIVE_OPCODES[collectives[0]][0]
        return Classification("collective", kind, f"{what} contains {collectives[0]}")
    reductions = present & REDUCTION_OPCODES
    if reductions:
        return Classification(
            "reduction", sorted(reductions)[0], f"{what} contains {sorted(reductions)[0]}"
        )
    compute = present & _ELEMENTWISE - {"iota"}
    if compute:
        shown = ", ".join(sorted(compute)[:4])
        return Classification("elementwise", "fusion", f"{what} computes {shown}")
    moves = present & DATA_MOVEMENT_OPCODES
    if moves:
        shown = ", ".join(sorted(moves)[:4])
        return Classification("data-movement", "fusion", f"{what} only moves data ({shown})")
    if present & _ELEMENTWISE:
        return Classification("elementwise", "fusion", f"{what} computes iota")
    return None


# --- classify ------------------------------------------------------------------------------------


def classify(instruction: Instruction, module: Module | None = None) -> Classification:
    """The category of one instruction, with the reason for it."""
    opcode = instruction.opcode
    if opcode in COLLECTIVE_OPCODES:
        kind, mode = COLLECTIVE_OPCODES[opcode]
        if kind in ("send", "recv") and (_attr(instruction, "is_host_transfer") == "true"):
            return Classification("host", f"{kind}-host", f"{opcode} with is_host_transfer=true")
        return Classification("collective", kind, f"{opcode} ({mode})")
    if opcode in ("send-done", "recv-done"):
        kind = opcode.removesuffix("-done")
        if _attr(instruction, "is_host_transfer") == "true":
            return Classification("host", f"{kind}-host", f"{opcode} with is_host_transfer=true")
        return Classification("collective", kind, f"{opcode} (async-done)")
    if opcode in MATMUL_OPCODES:
        return Classification("matmul", opcode, f"{opcode} instruction")
    if opcode in HOST_OPCODES:
        return Classification("host", opcode, f"{opcode} moves data between host and device")
    if opcode in ("copy-start", "copy-done", "copy", "dynamic-update-slice", "dynamic-slice"):
        shapes = [instruction.shape, *_operand_shapes(instruction, module)]
        if any(_is_host_shape(shape) for shape in shapes):
            # copy-start's shape is (destination, source, context): the destination says where.
            destination = instruction.shape
            if destination.is_tuple and destination.tuple_shapes:
                destination = destination.tuple_shapes[0]
            direction = "to host" if _is_host_shape(destination) else "from host"
            return Classification(
                "host", opcode, f"{opcode} {direction} (memory space S({HOST_MEMORY_SPACE}))"
            )
    if opcode == "custom-call":
        return _classify_custom_call(instruction)
    if opcode == "fusion":
        return _classify_fusion(instruction, module)
    if opcode in ("async-start", "async-update", "async-done"):
        called = called_computations(instruction)
        body = _body_opcodes(module, called)
        wrapped = _classify_body(body, f"{opcode} of {', '.join(called) or 'a computation'}")
        if wrapped is not None:
            return Classification(wrapped.category, wrapped.kind, wrapped.reason)
        if "custom-call" in body:
            return Classification("custom", "async", f"{opcode} wraps a custom-call")
        return Classification("other", opcode, f"{opcode} wraps no recognised op")
    if opcode in CONTROL_FLOW_OPCODES:
        return Classification("control", opcode, f"{opcode} runs other computations")
    if opcode in REDUCTION_OPCODES:
        return Classification("reduction", opcode, f"{opcode} instruction")
    if opcode in DATA_MOVEMENT_OPCODES:
        return Classification("data-movement", opcode, _movement_reason(instruction, module))
    if opcode in _ELEMENTWISE:
        return Classification("elementwise", opcode, f"{opcode} instruction")
    if opcode in BOOKKEEPING_OPCODES:
        return Classification("other", opcode, f"{opcode} does no device work by itself")
    if opcode in ("sort", "top-k"):
        return Classification("other", opcode, f"{opcode} (sorting)")
    if opcode in ("fft", "cholesky", "triangular-solve"):
        return Classification("other", opcode, f"{opcode} (linear algebra library call)")
    return Classification("other", opcode, f"opcode {opcode} has no category")


def _movement_reason(instruction: Instruction, module: Module | None) -> str:
    opcode = instruction.opcode
    if opcode == "copy":
        shapes = _operand_shapes(instruction, module)
        if shapes and shapes[0].dims == instruction.shape.dims:
            source = shapes[0].layout
            target = instruction.shape.layout
            if source is not None and target is not None and source != target:
                return "copy that only changes the layout/tiling (relayout)"
        return "copy instruction"
    return f"{opcode} instruction"


def _classify_custom_call(instruction: Instruction) -> Classification:
    target = custom_call_target(instruction) or ""
    if target in HOST_CUSTOM_CALL_TARGETS:
        return Classification("host", target, f"custom-call {target} moves data to/from host")
    if _MATMUL_TARGET.match(target):
        kind = "attention" if ("fmha" in target or "attn" in target) else "library"
        return Classification("matmul", kind, f"custom-call {target} is a library matmul/conv")
    if _KERNEL_TARGET.match(target):
        return Classification("custom", "kernel", f"custom-call {target} is a user kernel")
    if target in _ANNOTATION_TARGETS:
        return Classification("other", "annotation", f"custom-call {target} only annotates")
    return Classification("custom", "custom-call", f"custom-call {target or '(no target)'}")


def _classify_fusion(instruction: Instruction, module: Module | None) -> Classification:
    kind = instruction.fusion_kind or "kLoop"
    called = called_computations(instruction)
    backend = backend_kind(instruction) or ""
    what = f"{kind} fusion of {called[0]}" if called else f"{kind} fusion"
    if called and _FUSED_COLLECTIVE_NAME.match(called[0]):
        collective = _FUSED_COLLECTIVE_NAME.match(called[0]).group(1)  # type: ignore[union-attr]
        return Classification(
            "collective", collective, f"{what}: a fused {collective} (named by its computation)"
        )
    if backend in ("__triton_gemm", "__cublas$gemm", "__cublas$lt$matmul", "__cudnn$fusion"):
        return Classification("matmul", backend, f"{what} with backend kind {backend}")
    body = _body_opcodes(module, called)
    if body:
        found = _classify_body(body, what)
        if found is not None:
            return found
        if "custom-call" in body:
            return Classification("custom", "fusion", f"{what} wraps a custom-call")
        return Classification("other", "fusion", f"{what} holds only bookkeeping ops")
    if kind in ("kOutput", "kConvolution") or "gemm" in backend:
        return Classification("matmul", kind, f"{what} (fused computation not available)")
    return Classification("other", "fusion", f"{what}: fused computation not available")


# --- op events of a profile ------------------------------------------------------------------


def classify_ops(profile: Any) -> list[Classification]:
    """A classification for every row of ``profile.ops`` (a ``profan.trace.Profile``).

    Rows whose instruction is not in the module's HLO are still labelled: by the opcode their
    name implies (``fusion.3`` → a fusion whose body is unknown, ``all-reduce.1`` → collective),
    with the reason saying the HLO was missing.
    """
    cache: dict[tuple[str | None, str], Classification] = {}
    labels: list[Classification] = []
    for module_key, op_name in zip(profile.ops["module_key"], profile.ops["op_name"], strict=True):
        key = (module_key if isinstance(module_key, str) else None, str(op_name))
        found = cache.get(key)
        if found is None:
            found = _classify_event(profile, *key)
            cache[key] = found
        labels.append(found)
    return labels


_OPCODE_FROM_NAME = re.compile(r"^%?([a-z][a-z\-]*?)(?:[._]\d+)*(?:\.clone.*)?$")


def _classify_event(profile: Any, module_key: str | None, op_name: str) -> Classification:
    instruction = profile.instruction(module_key, op_name) if module_key else None
    if instruction is not None:
        return classify(instruction, profile.modules.get(module_key))
    match = _OPCODE_FROM_NAME.match(op_name)
    guess = match.group(1) if match else ""
    if guess in COLLECTIVE_OPCODES:
        kind, _mode = COLLECTIVE_OPCODES[guess]
        return Classification("collective", kind, f"{op_name}: named like {guess} (no HLO)")
    for category, opcodes in (
        ("matmul", MATMUL_OPCODES),
        ("elementwise", _ELEMENTWISE),
        ("reduction", REDUCTION_OPCODES),
        ("data-movement", DATA_MOVEMENT_OPCODES),
        ("control", CONTROL_FLOW_OPCODES),
        ("host", HOST_OPCODES),
    ):
        if guess in opcodes:
            return Classification(category, guess, f"{op_name}: named like {guess} (no HLO)")
    return Classification("other", "unknown", f"{op_name}: not in the module's HLO")

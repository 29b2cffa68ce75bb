"""What each HLO instruction is (a category with a reason) and where in the code it came from.

``classify(instruction, module)`` labels every instruction with one of ``CATEGORIES``; fusions
are labelled by what their fused computation does (a dot inside → ``matmul``; a reduce →
``reduction``; only layout/indexing ops → ``data-movement``; arithmetic → ``elementwise``).
``scope_of`` reads the JAX named-scope path out of ``metadata={op_name=…}``; ``group_by_scope``
and ``repeated_scopes`` turn those paths into per-layer / per-block groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from profan.hlo.model import Computation, Instruction, Module, Shape

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

# XLA's memory space number for host memory (``S(5)`` in a layout).
HOST_MEMORY_SPACE = 5

COLLECTIVE_KINDS = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "ragged-all-to-all",
    "collective-permute",
    "collective-broadcast",
    "send",
    "recv",
)
_COLLECTIVE_OPCODES: dict[str, tuple[str, str]] = {}
for _kind in COLLECTIVE_KINDS:
    _COLLECTIVE_OPCODES[_kind] = (_kind, "sync")
    _COLLECTIVE_OPCODES[_kind + "-start"] = (_kind, "async-start")
    _COLLECTIVE_OPCODES[_kind + "-done"] = (_kind, "async-done")

MATMUL_OPCODES = {"dot", "convolution", "ragged-dot", "scaled-dot"}

ELEMENTWISE_OPCODES = {
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "clz", "compare", "complex", "convert",
    "cos", "divide", "erf", "exp", "exponential", "exponential-minus-one", "expm1", "floor",
    "imag", "is-finite", "log", "log-plus-one", "log1p", "logistic", "map", "maximum", "minimum",
    "multiply", "negate", "not", "or", "popcnt", "power", "real", "reduce-precision", "remainder",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "select", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sin", "sqrt", "stochastic-convert",
    "subtract", "tan", "tanh", "xor", "bitcast-convert", "rng", "rng-bit-generator",
    "rng-get-and-update-state", "iota",
}  # fmt: skip

REDUCTION_OPCODES = {"reduce", "reduce-window", "select-and-scatter", "all-reduce-scatter"}

DATA_MOVEMENT_OPCODES = {
    "copy", "transpose", "dynamic-slice", "dynamic-update-slice", "pad", "concatenate", "gather",
    "scatter", "slice", "reshape", "dynamic-reshape", "bitcast", "broadcast", "reverse",
    "copy-start", "copy-done",
}  # fmt: skip

CONTROL_OPCODES = {"while", "conditional", "call"}

# Ops that move no data and compute nothing by themselves.
BOOKKEEPING_OPCODES = {
    "parameter", "constant", "tuple", "get-tuple-element", "after-all", "add-dependency",
    "partition-id", "replica-id", "opt-barrier", "domain", "get-dimension-size",
    "set-dimension-size", "token",
}  # fmt: skip

HOST_OPCODES = {"infeed", "outfeed"}
HOST_CUSTOM_CALLS = {"MoveToHost", "MoveToDevice", "HostExecute", "Pin", "Unpin"}

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


# --- small readers that work whether or not the parser has decoded the attribute -------------


def _attr(instruction: Instruction, name: str) -> str | None:
    value = instruction.attributes.get(name)
    return value.strip() if isinstance(value, str) else value


def _unquote(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def custom_call_target(instruction: Instruction) -> str | None:
    target = getattr(instruction, "custom_call_target", None)
    if isinstance(target, str):
        return target
    return _unquote(_attr(instruction, "custom_call_target"))


def fusion_kind(instruction: Instruction) -> str | None:
    kind = getattr(instruction, "fusion_kind", None)
    if isinstance(kind, str):
        return kind
    return _attr(instruction, "kind")


_NAME_LIST = re.compile(r"%?([\w.\-$]+)")


def called_computations(instruction: Instruction) -> list[str]:
    """Names in ``calls=``, ``to_apply=``, ``body=``/``condition=``, ``branch_computations=``…"""
    called = getattr(instruction, "called_computations", None)
    if isinstance(called, list):
        return [name.lstrip("%") for name in called]
    names: list[str] = []
    for key in (
        "calls",
        "to_apply",
        "condition",
        "body",
        "branch_computations",
        "true_computation",
        "false_computation",
        "async_execution_thread_computations",
    ):
        value = _attr(instruction, key)
        if value:
            names.extend(_NAME_LIST.findall(value))
    return names


def backend_kind(instruction: Instruction) -> str | None:
    """``fusion_backend_config.kind`` (GPU: ``__triton_gemm``, ``__cublas$gemm``…) if present."""
    config = getattr(instruction, "backend_config_json", None)
    if isinstance(config, dict):
        for key in ("fusion_backend_config", "fusion_config"):
            section = config.get(key)
            if isinstance(section, dict) and isinstance(section.get("kind"), str):
                return section["kind"]
        return None
    text = _attr(instruction, "backend_config") or ""
    match = re.search(r'"kind"\s*:\s*"([^"]+)"', text)
    return match.group(1) if match else None


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
    shapes: list[Shape] = []
    owner = _computation(module, instruction.computation) if instruction.computation else None
    for operand in instruction.operands:
        if operand.shape is not None:
            shapes.append(operand.shape)
        elif owner is not None:
            source = owner.get(operand.name)
            if source is not None:
                shapes.append(source.shape)
    return shapes


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
    collectives = [op for op in opcodes if op in _COLLECTIVE_OPCODES]
    if collectives:
        kind = _COLLECTIVE_OPCODES[collectives[0]][0]
        return Classification("collective", kind, f"{what} contains {collectives[0]}")
    reductions = present & REDUCTION_OPCODES
    if reductions:
        return Classification(
            "reduction", sorted(reductions)[0], f"{what} contains {sorted(reductions)[0]}"
        )
    compute = present & ELEMENTWISE_OPCODES - {"iota"}
    if compute:
        shown = ", ".join(sorted(compute)[:4])
        return Classification("elementwise", "fusion", f"{what} computes {shown}")
    moves = present & DATA_MOVEMENT_OPCODES
    if moves:
        shown = ", ".join(sorted(moves)[:4])
        return Classification("data-movement", "fusion", f"{what} only moves data ({shown})")
    if present & ELEMENTWISE_OPCODES:
        return Classification("elementwise", "fusion", f"{what} computes iota")
    return None


# --- classify ------------------------------------------------------------------------------------


def classify(instruction: Instruction, module: Module | None = None) -> Classification:
    """The category of one instruction, with the reason for it."""
    opcode = instruction.opcode
    if opcode in _COLLECTIVE_OPCODES:
        kind, mode = _COLLECTIVE_OPCODES[opcode]
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
    if opcode in CONTROL_OPCODES:
        return Classification("control", opcode, f"{opcode} runs other computations")
    if opcode in REDUCTION_OPCODES:
        return Classification("reduction", opcode, f"{opcode} instruction")
    if opcode in DATA_MOVEMENT_OPCODES:
        return Classification("data-movement", opcode, _movement_reason(instruction, module))
    if opcode in ELEMENTWISE_OPCODES:
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
    if target in HOST_CUSTOM_CALLS:
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
    kind = fusion_kind(instruction) or "kLoop"
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


# --- attribution to code ---------------------------------------------------------------------

_OP_NAME = re.compile(r'op_name="((?:[^"\\]|\\.)*)"')


def op_name_of(instruction: Instruction) -> str | None:
    """``metadata={op_name=…}`` of the instruction (None when it has none)."""
    metadata = getattr(instruction, "metadata", None)
    op_name = getattr(metadata, "op_name", None)
    if isinstance(op_name, str):
        return op_name
    text = _attr(instruction, "metadata")
    if not text:
        return None
    match = _OP_NAME.search(text)
    return match.group(1) if match else None


# JAX wraps transformed code as ``jvp(layer0)`` / ``transpose(jvp(layer0))``; the scope name is
# the innermost argument.
_WRAPPER = re.compile(r"^(?:jvp|transpose|vmap|remat|checkpoint|pjit|jit|shard_map|vjp)\((.*)\)$")
_TRANSFORM_ONLY = {"jvp()", "transpose(jvp())", "transpose()", "vmap()", "remat()"}


def scope_of(instruction: Instruction) -> str | None:
    """The named-scope path of an instruction: ``op_name`` without the primitive at its end.

    ``jit(train_step)/transpose(jvp(layer0))/mlp/dot_general`` → ``jit(train_step)/layer0/mlp``:
    autodiff wrappers (``jvp(…)``, ``transpose(…)``) are unwrapped to the scope they name and
    dropped when they name none, so the forward and backward ops of a layer share a scope.
    """
    op_name = op_name_of(instruction)
    if not op_name:
        return None
    parts = [p for p in _split_path(op_name) if p]
    if len(parts) <= 1:
        return parts[0] if parts and "(" in parts[0] else None
    kept: list[str] = []
    for part in parts[:-1]:
        if part in _TRANSFORM_ONLY:
            continue
        inner = part
        if not inner.startswith("jit("):
            while (match := _WRAPPER.match(inner)) is not None:
                inner = match.group(1)
        # ``jnp.einsum`` names a scope after its equation (``bsd,dnk->bsnk``): not a code scope.
        if inner and "->" not in inner:
            kept.append(inner)
    return "/".join(kept) if kept else None


def _split_path(op_name: str) -> list[str]:
    """Split on ``/`` outside parentheses (``jit(f)/transpose(jvp(a/b))`` keeps its groups)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in op_name:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if char == "/" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def is_backward(instruction: Instruction) -> bool:
    """Whether the op comes from a ``transpose(…)`` (the backward pass of autodiff)."""
    op_name = op_name_of(instruction) or ""
    return "transpose(" in op_name


def source_of(instruction: Instruction, module: Module | None) -> str | None:
    """``file:line`` of the instruction, when the module can say."""
    if module is not None:
        locate = getattr(module, "source_location", None)
        if callable(locate):
            location = locate(instruction)
            if location is not None:
                return str(location)
    metadata = getattr(instruction, "metadata", None)
    file = getattr(metadata, "source_file", None)
    line = getattr(metadata, "source_line", None)
    if file and line:
        return f"{file}:{line}"
    text = _attr(instruction, "metadata") or ""
    file_match = re.search(r'source_file="([^"]*)"', text)
    line_match = re.search(r"source_line=(\d+)", text)
    if file_match and line_match:
        return f"{file_match.group(1)}:{line_match.group(1)}"
    return None


def scope_prefix(scope: str | None, depth: int) -> str | None:
    """The first ``depth`` components of a scope path (``jit(f)`` counts as one)."""
    if scope is None:
        return None
    return "/".join(scope.split("/")[:depth])


def group_by_scope(
    instructions: Iterable[Instruction], depth: int = 2
) -> dict[str | None, list[Instruction]]:
    """Instructions grouped by the first ``depth`` components of their scope."""
    groups: dict[str | None, list[Instruction]] = {}
    for instruction in instructions:
        groups.setdefault(scope_prefix(scope_of(instruction), depth), []).append(instruction)
    return groups


_NUMBERED = re.compile(r"^(.*?)[_.\-]?(\d+)$")


@dataclass(frozen=True, slots=True)
class RepeatedScope:
    """Scopes that differ only by a number (``layer0``, ``layer1``…): a repeated block."""

    pattern: str  # e.g. "jit(train_step)/layer{}"
    members: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"pattern": self.pattern, "members": list(self.members)}


def repeated_scopes(instructions: Iterable[Instruction]) -> list[RepeatedScope]:
    """Find repeated layers: scope components that differ only by a trailing number."""
    prefixes: set[str] = set()
    for instruction in instructions:
        scope = scope_of(instruction)
        if not scope:
            continue
        parts = scope.split("/")
        for end in range(1, len(parts) + 1):
            prefixes.add("/".join(parts[:end]))
    buckets: dict[str, set[str]] = {}
    for prefix in prefixes:
        head, _, last = prefix.rpartition("/")
        match = _NUMBERED.match(last)
        if match is None:
            continue
        pattern = (head + "/" if head else "") + match.group(1) + "{}"
        buckets.setdefault(pattern, set()).add(prefix)
    found = [
        RepeatedScope(pattern, tuple(sorted(members, key=_natural_key)))
        for pattern, members in buckets.items()
        if len(members) >= 2
    ]
    return sorted(found, key=lambda r: (-len(r.members), r.pattern))


def _natural_key(text: str) -> tuple[object, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def block_kind(scope: str | None) -> str | None:
    """``attention`` / ``mlp`` / ``embedding`` / ``norm`` when a scope component says so."""
    if not scope:
        return None
    lowered = scope.lower()
    for kind, words in (
        ("attention", ("attention", "attn", "self_attn", "mha")),
        ("mlp", ("mlp", "ffn", "feed_forward", "feedforward", "moe", "expert")),
        ("embedding", ("embed", "unembed", "lm_head", "head")),
        ("norm", ("norm", "layernorm", "rmsnorm")),
    ):
        if any(word in part for part in lowered.split("/") for word in words):
            return kind
    return None


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
    if guess in _COLLECTIVE_OPCODES:
        kind, _mode = _COLLECTIVE_OPCODES[guess]
        return Classification("collective", kind, f"{op_name}: named like {guess} (no HLO)")
    for category, opcodes in (
        ("matmul", MATMUL_OPCODES),
        ("elementwise", ELEMENTWISE_OPCODES),
        ("reduction", REDUCTION_OPCODES),
        ("data-movement", DATA_MOVEMENT_OPCODES),
        ("control", CONTROL_OPCODES),
        ("host", HOST_OPCODES),
    ):
        if guess in opcodes:
            return Classification(category, guess, f"{op_name}: named like {guess} (no HLO)")
    return Classification("other", "unknown", f"{op_name}: not in the module's HLO")

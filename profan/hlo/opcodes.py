"""Opcode tables: which HLO opcodes are elementwise, free, collective, control flow, … .

The one home for these facts; classification (``profan.attribute``), costing (``profan.cost``),
scoring (``profan.roofline``), sharding and the report all read them from here.
"""

from __future__ import annotations

# XLA's memory space for pinned host buffers (``S(5)`` in a layout).
HOST_MEMORY_SPACE = 5
# XLA's memory-space colours (Layout::memory_space): 0 is the device's main memory (HBM on
# TPU/GPU, RAM on CPU), 1 TPU VMEM, 5 pinned host memory; other numbers are backend-specific
# (on TPU: S(2) sync flags, S(4) and S(6) scalars in SMEM).
MEMORY_SPACE_NAMES = {0: "device", 1: "vmem", HOST_MEMORY_SPACE: "host"}


def memory_space_name(colour: int) -> str:
    """``device``, ``vmem``, ``host``, or ``S(n)`` for a backend-specific space."""
    return MEMORY_SPACE_NAMES.get(colour, f"S({colour})")


# Elementwise math XLA's cost analysis counts as transcendental (one per output element).
TRANSCENDENTAL_OPCODES = frozenset(
    {
        "acosh", "atan2", "cbrt", "cosine", "erf", "exp", "exponential", "exponential-minus-one",
        "log", "log-plus-one", "logistic", "power", "rsqrt", "sine", "sqrt", "tan", "tanh",
    }
)  # fmt: skip

# Elementwise ops XLA's cost analysis charges one FLOP (or transcendental) per output element.
ELEMENTWISE_OPCODES = TRANSCENDENTAL_OPCODES | frozenset(
    {
        "abs", "add", "and", "bitcast-convert", "ceil", "clamp", "clz", "compare", "complex",
        "convert", "divide", "floor", "imag", "is-finite", "maximum", "minimum", "multiply",
        "negate", "not", "or", "popcnt", "real", "reduce-precision", "remainder",
        "round-nearest-afz", "round-nearest-even", "select", "shift-left",
        "shift-right-arithmetic", "shift-right-logical", "sign", "stochastic-convert",
        "subtract", "xor",
    }
)  # fmt: skip

# Ops that produce values element by element without being costed as math by XLA (random
# numbers, iota, map): classified as elementwise work, costed by their bytes.
ELEMENTWISE_LIKE_OPCODES = frozenset(
    {"iota", "map", "rng", "rng-bit-generator", "rng-get-and-update-state"}
)

MATMUL_OPCODES = frozenset({"dot", "convolution", "ragged-dot", "scaled-dot"})

REDUCTION_OPCODES = frozenset(
    {"reduce", "reduce-window", "select-and-scatter", "all-reduce-scatter"}
)

DATA_MOVEMENT_OPCODES = frozenset(
    {
        "broadcast", "concatenate", "copy", "copy-done", "copy-start", "dynamic-reshape",
        "dynamic-slice", "dynamic-update-slice", "gather", "pad", "reshape", "reverse",
        "scatter", "slice", "transpose", "bitcast",
    }
)  # fmt: skip

# Ops whose called computations run as ordinary (not fused) code.
CONTROL_FLOW_OPCODES = frozenset({"while", "conditional", "call"})

# Ops that move no data and do no math: XLA's cost analysis gives them zero bytes.
FREE_OPCODES = frozenset(
    {"parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency",
     "domain"}
)  # fmt: skip

# Ops that only hold the program together (tuples, ids, tokens, barriers): no work of their own
# worth a row in a time table.
BOOKKEEPING_OPCODES = FREE_OPCODES | frozenset(
    {
        "tuple", "partition-id", "replica-id", "opt-barrier", "get-dimension-size",
        "set-dimension-size", "token",
    }
)  # fmt: skip

HOST_OPCODES = frozenset({"infeed", "outfeed"})
HOST_CUSTOM_CALL_TARGETS = frozenset({"MoveToHost", "MoveToDevice", "HostExecute", "Pin", "Unpin"})

# Collective kinds, each with its synchronous opcode and (where XLA has them) async halves.
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
ASYNC_SUFFIXES = ("-start", "-update", "-done")

# Opcode -> (collective kind, "sync" | "async-start" | "async-done").
COLLECTIVE_OPCODES: dict[str, tuple[str, str]] = {}
for _kind in COLLECTIVE_KINDS:
    COLLECTIVE_OPCODES[_kind] = (_kind, "sync")
    COLLECTIVE_OPCODES[_kind + "-start"] = (_kind, "async-start")
    COLLECTIVE_OPCODES[_kind + "-done"] = (_kind, "async-done")
del _kind

# Collectives whose devices come from ``replica_groups`` (the others pair devices with
# ``source_target_pairs`` or talk to a channel peer).
GROUPED_COLLECTIVE_KINDS = frozenset(
    {"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all",
     "collective-broadcast"}
)  # fmt: skip
PAIRED_COLLECTIVE_KINDS = frozenset({"collective-permute"})

# Ops that have their own async halves in XLA's printing; any other ``X-start`` is XLA's sugar
# for ``async-start`` wrapping ``X``.
NATIVE_ASYNC_OPCODES = frozenset(
    {
        "async-start", "async-update", "async-done",
        "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
        "collective-permute-start", "collective-permute-done",
        "copy-start", "copy-done", "send-done", "recv-done",
    }
)  # fmt: skip


def base_opcode(opcode: str) -> str:
    """``all-gather-start`` -> ``all-gather``; an opcode without an async suffix unchanged."""
    for suffix in ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            return opcode[: -len(suffix)]
    return opcode


def collective_kind(opcode: str) -> str | None:
    """The collective kind of an opcode (either half of an async pair), else ``None``."""
    found = COLLECTIVE_OPCODES.get(opcode)
    return found[0] if found else None


def async_role(opcode: str) -> str | None:
    """``"start"``, ``"update"`` or ``"done"`` for an async half, else ``None``."""
    for suffix in ASYNC_SUFFIXES:
        if opcode.endswith(suffix):
            return suffix[1:]
    return None

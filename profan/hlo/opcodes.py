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


# Every opcode XLA's parser knows (``HLO_OPCODE_LIST`` in xla/hlo/ir/hlo_opcode.h) and its
# operand count: a number where XLA fixes it, None where the op takes any number.  A name not
# here is not HLO (XLA's parser stops at it); the verifier (``profan.hlo.verify.structure``)
# refuses it and a fixed count that is not met.
XLA_OPCODE_ARITY: dict[str, int | None] = {
    "abs": 1, "acos": 1, "acosh": 1, "add": 2, "add-dependency": 2, "after-all": None,
    "all-gather": None, "all-gather-done": 1, "all-gather-start": None, "all-reduce": None,
    "all-reduce-done": 1, "all-reduce-start": None, "all-to-all": None, "and": 2, "asin": 1,
    "asinh": 1, "async-done": 1, "async-start": None, "async-update": None, "atan": 1, "atan2": 2,
    "atanh": 1, "batch-norm-grad": 5, "batch-norm-inference": 5, "batch-norm-training": 3,
    "bitcast": 1, "bitcast-convert": 1, "broadcast": 1, "call": None, "cbrt": 1, "ceil": 1,
    "cholesky": 1, "clamp": 3, "count-leading-zeros": 1, "collective-broadcast": None,
    "collective-permute": None, "collective-permute-done": 1, "collective-permute-start": None,
    "collective-reduce": None, "compare": 2, "complex": 2, "concatenate": None,
    "conditional": None, "constant": 0, "convert": 1, "convolution": None, "copy": 1,
    "copy-done": 1, "copy-start": 1, "cosine": 1, "cosh": 1, "custom-call": None, "divide": 2,
    "domain": 1, "dot": 2, "dynamic-reshape": None, "dynamic-slice": None,
    "dynamic-update-slice": None, "erf": 1, "exponential": 1, "exponential-minus-one": 1,
    "fft": 1, "floor": 1, "fusion": None, "gather": 2, "get-dimension-size": 1,
    "get-tuple-element": 1, "imag": 1, "infeed": 1, "iota": 0, "is-finite": 1, "log": 1,
    "log-plus-one": 1, "logistic": 1, "map": None, "maximum": 2, "minimum": 2, "mulhi": 2,
    "multiply": 2, "negate": 1, "not": 1, "opt-barrier": 1, "or": 2, "outfeed": 2, "pad": 2,
    "parameter": 0, "partition-id": 0, "popcnt": 1, "power": 2, "ragged-all-to-all": 6,
    "ragged-dot": 3, "real": 1, "recv": 1, "recv-done": 1, "reduce": None, "reduce-precision": 1,
    "reduce-scatter": None, "reduce-window": None, "remainder": 2, "replica-id": 0, "reshape": 1,
    "reverse": 1, "rng": None, "rng-bit-generator": 1, "rng-get-and-update-state": 0,
    "round-nearest-afz": 1, "round-nearest-even": 1, "rsqrt": 1, "scaled-dot": 4, "scan": None,
    "scatter": None, "select": 3, "select-and-scatter": 3, "send": 2, "send-done": 1,
    "set-dimension-size": 2, "shift-left": 2, "shift-right-arithmetic": 2,
    "shift-right-logical": 2, "shuffle": 1, "sign": 1, "sine": 1, "sinh": 1, "slice": 1,
    "sort": None, "sqrt": 1, "stochastic-convert": 2, "subtract": 2, "tan": 1, "tanh": 1,
    "topk": 1, "transpose": 1, "triangular-solve": 2, "tuple": None, "while": 1, "xor": 2,
}  # fmt: skip

"""The kernel registry: custom-call target patterns -> a cost model, read from
``profan/data/kernels.toml`` and the user's own file (``--kernels FILE``, default
``$PROFAN_KERNELS``, put in force for a command by ``using_kernel_file``), whose entries are checked
before the built-in ones (first match wins)."""

from __future__ import annotations

import fnmatch
import os
import typing
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from profan.cost.kernels import attention, blocked, gemm, opaque
from profan.cost.kernels.model import KernelCall, KernelCost, Params, ParamValue
from profan.errors import ConfigError
from profan.paths import data_path
from profan.tomlschema import Pattern, convert, read_named_tables

REGISTRY_FILE = "kernels.toml"

ModelName = Literal[
    "gemm", "te-gemm", "grouped-gemm", "convolution", "cudnn-fmha", "te-attention",
    "attention-shapes", "blocked-attention", "pallas", "opaque", "per-element", "no-work",
]  # fmt: skip
MODELS: tuple[str, ...] = typing.get_args(ModelName)

# What a user puts in their own file to cost a kernel profan does not know (shown by the report's
# "cost unknown" finding; it must stay a valid entry: tests load it).
EXAMPLE_ENTRY = """\
[kernels.my-attention]
targets = ["my_flash_attention_fwd"]   # custom_call_target, fnmatch patterns (* ? [..])
model = "attention-shapes"             # one of: {models}
description = "my fused attention kernel"
params = {{ causal = true }}
""".format(models=", ".join(MODELS))


class KernelEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One ``[kernels.NAME]`` table of a kernel file."""

    targets: list[Pattern]
    model: ModelName
    description: str = ""
    source: str = ""
    params: dict[str, ParamValue] = {}
    # kernel-name patterns, for targets many kernels share (every Pallas TPU kernel is a
    # ``tpu_custom_call``): the entry matches only a call whose kernel name fits one
    names: list[Pattern] = []


@dataclass(frozen=True, slots=True)
class Rule:
    """A registry entry, ready to match targets."""

    name: str
    targets: tuple[str, ...]
    model: str
    params: dict[str, ParamValue]
    description: str = ""
    origin: str = REGISTRY_FILE
    names: tuple[str, ...] = ()

    def matches(self, target: str, kernel_name: str = "") -> bool:
        if not any(fnmatch.fnmatchcase(target, pattern) for pattern in self.targets):
            return False
        return not self.names or any(
            fnmatch.fnmatchcase(kernel_name, pattern) for pattern in self.names
        )


def _rules_from_file(path: Path, origin: str) -> list[Rule]:
    tables = read_named_tables(path, "kernels", what="kernel file")
    rules = []
    for name, table in tables.items():
        entry = convert(table, KernelEntry, origin=origin, key=f"kernels.{name}")
        if not entry.targets:
            raise ConfigError(f"{origin}: kernels.{name}.targets: give at least one pattern")
        rules.append(
            Rule(
                name,
                tuple(entry.targets),
                entry.model,
                dict(entry.params),
                entry.description,
                origin,
                tuple(entry.names),
            )
        )
    return rules


def read_kernel_file(path: str | os.PathLike[str]) -> list[Rule]:
    """The entries of one kernel file; a bad file raises ``ConfigError`` (file, key, allowed)."""
    path = Path(path)
    origin = REGISTRY_FILE if path == data_path(REGISTRY_FILE) else str(path)
    return _rules_from_file(path, origin)


_BUILTIN: list[Rule] | None = None
# The user's rules in force (``using_kernel_file``): checked first by every lookup within it.
_USER_RULES: ContextVar[tuple[Rule, ...]] = ContextVar("profan user kernels", default=())


@contextmanager
def using_kernel_file(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within: the entries of ``path`` (read and checked now; None: none) come before the
    built-in ones (a command's ``--kernels``, ``RunOptions.in_force``)."""
    token = _USER_RULES.set(tuple(read_kernel_file(path)) if path else ())
    try:
        yield
    finally:
        _USER_RULES.reset(token)


def registry(extra: str | Path | None = None) -> list[Rule]:
    """Every rule, first match wins: ``extra``, then the user's rules in force
    (``using_kernel_file``), then the built-ins."""
    global _BUILTIN
    if _BUILTIN is None:
        _BUILTIN = read_kernel_file(data_path(REGISTRY_FILE))
    rules: list[Rule] = []
    if extra is not None:
        rules += read_kernel_file(extra)
    return [*rules, *_USER_RULES.get(), *_BUILTIN]


def find_rule(
    target: str, rules: Sequence[Rule] | None = None, kernel_name: str = ""
) -> Rule | None:
    for rule in registry() if rules is None else rules:
        if rule.matches(target, kernel_name):
            return rule
    return None


def cost_kernel(call: KernelCall, rules: Sequence[Rule] | None = None) -> KernelCost:
    """The cost of one custom call by the model its target maps to (``opaque`` if none)."""
    rule = find_rule(call.target, rules, call.name)
    model = MODEL_FUNCTIONS[rule.model] if rule else opaque.opaque
    cost = model(call, rule.params if rule else {})
    cost.rule = rule.name if rule else ""
    # Matrix-unit work is measured against the matrix peak; a Pallas/Triton kernel with known
    # FLOPs may use the matrix units too (the higher peak keeps its ideal time a lower bound).
    cost.matrix_math = bool(cost.flops) and (cost.model in MATRIX_MODELS or cost.model == "pallas")
    if rule is None:
        cost.derivation.insert(0, f"custom-call {call.target or '?'}: no kernel model matches")
    else:
        cost.derivation.insert(0, f"custom-call {call.target}: kernel model {rule.model!r} "
                                  f"({rule.name}, {rule.origin})")  # fmt: skip
    return cost


# Models whose FLOPs are matmuls: gemms, convolutions, attention.
MATRIX_MODELS = frozenset(
    {"gemm", "te-gemm", "grouped-gemm", "convolution", "cudnn-fmha", "te-attention",
     "attention-shapes", "blocked-attention"}
)  # fmt: skip
MODEL_FUNCTIONS: dict[str, Callable[[KernelCall, Params], KernelCost]] = {
    "gemm": gemm.gemm,
    "te-gemm": gemm.te_gemm,
    "grouped-gemm": gemm.grouped_gemm,
    "convolution": gemm.convolution,
    "cudnn-fmha": attention.cudnn_fmha,
    "te-attention": attention.te_attention,
    "attention-shapes": attention.attention_shapes,
    "blocked-attention": blocked.blocked_attention,
    "pallas": opaque.pallas,
    "opaque": opaque.opaque,
    "per-element": opaque.per_element,
    "no-work": opaque.no_work,
}

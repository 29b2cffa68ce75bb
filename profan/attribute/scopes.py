"""Where in the user's code an instruction came from: its op path, named scope, source line.

``scope_of`` reads the JAX named-scope path out of ``metadata={op_name=…}``; ``group_by_scope``
and ``repeated_scopes`` turn those paths into per-layer / per-block groups; ``block_kind`` says
which kind of block (attention, MLP, embedding, norm) a scope names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from profan.hlo.model import Instruction, Module
from profan.hlo.views import metadata, source_location


def op_name_of(instruction: Instruction) -> str | None:
    """``metadata={op_name=…}`` of the instruction (None when it has none)."""
    return metadata(instruction).op_name


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
    """``file:line`` of the instruction, when its metadata (or, with the module, its stack
    frame) says."""
    if module is not None:
        location = source_location(module, instruction)
        return str(location) if location is not None else None
    decoded = metadata(instruction)
    if decoded.source_file and decoded.source_line is not None:
        return f"{decoded.source_file}:{decoded.source_line}"
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

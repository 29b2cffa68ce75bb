"""Stable identities for ops across recompiles: scope and op kind, not XLA's numeric suffixes.

XLA numbers instructions (``fusion.123``, ``all-gather.7``) and modules (``jit_f.4``) in an order
that changes whenever anything upstream changes.  A baseline must still find "the same op" in a
new profile, so an op is keyed by its module's base name, the JAX scope that made it (metadata
``op_name``, e.g. ``jit(train)/jit(main)/dot_general``) and its opcode; ops that share a key get
an ordinal in program order.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

_NUMERIC_SUFFIX = re.compile(r"(?:[._-]\d+)+$")
_PAREN_ID = re.compile(r"\(\d+\)$")
_INLINE_NUMBERS = re.compile(r"\.\d+")


def base_name(name: str) -> str:
    """Drop XLA's numbering: ``fusion.123`` -> ``fusion``, ``jit_f(1234)`` -> ``jit_f``."""
    name = _PAREN_ID.sub("", name.strip().lstrip("%"))
    name = _NUMERIC_SUFFIX.sub("", name)
    return _INLINE_NUMBERS.sub("", name)


def op_kind(opcode: str, name: str) -> str:
    """The opcode, or for fusions/custom calls the name's stem (``loop_add_fusion`` etc.)."""
    if opcode in ("fusion", "custom-call"):
        return f"{opcode}:{base_name(name)}"
    return opcode


def scope_key(module: str, scope: str | None, opcode: str, name: str) -> str:
    """The key before disambiguation: ``module|scope|kind``."""
    where = scope if scope else base_name(name)
    return f"{base_name(module)}|{where}|{op_kind(opcode, name)}"


def assign_keys(rows: Iterable[tuple[str, str | None, str, str]]) -> list[str]:
    """Keys for ``(module, scope, opcode, name)`` rows in program order; duplicates get ``#n``."""
    seen: Counter[str] = Counter()
    keys: list[str] = []
    for module, scope, opcode, name in rows:
        key = scope_key(module, scope, opcode, name)
        n = seen[key]
        seen[key] += 1
        keys.append(key if n == 0 else f"{key}#{n}")
    return keys

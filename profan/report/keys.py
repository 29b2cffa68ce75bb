"""Stable identities for ops across recompiles: scope and op kind, not XLA's numeric suffixes.

XLA numbers instructions (``fusion.123``, ``all-gather.7``) and modules (``jit_f.4``) in an order
that changes whenever anything upstream changes.  A baseline must still find "the same op" in a
new profile, so an op is keyed by its module's base name, the JAX scope that made it (metadata
``op_name``, e.g. ``jit(train)/jit(main)/dot_general``) and its opcode; ops that share a key get
an ordinal in program order.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Protocol, TypeVar

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


def check_id(key: str, name: str) -> str:
    """A short, stable name for a check on one op (``profan check``'s result names, JUnit test
    cases): the op's name without XLA's numbering and a short hash of its key (module, scope,
    kind, ordinal), so it stays the same across recompiles exactly when the key does; the key
    itself runs to hundreds of characters of scope."""
    digest = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{base_name(name) or name}@{digest}"


_ORDINAL = re.compile(r"#(\d+)$")


def _stem_and_ordinal(key: str) -> tuple[str, int]:
    found = _ORDINAL.search(key)
    return (key[: found.start()], int(found.group(1))) if found else (key, 0)


def pair_keys(
    a: Mapping[str, tuple[str | None, str | None]],
    b: Mapping[str, tuple[str | None, str | None]],
) -> list[tuple[str | None, str | None]]:
    """The ops of two reports paired: each key of ``a`` and of ``b`` once, as ``(key_a,
    key_b)`` (None: the op has no partner), given each op's ``(shape, source)``.

    Ops that share a scope and kind are told apart by an ordinal in program order, which
    shifts when a recompile adds, drops or reorders such ops (a scanned layer's
    dynamic-update-slice fusions): within such a group, an op is paired with the first op of
    the other report that has its shape and source line, else its shape, else in program
    order.  Where shapes and sources line up in order, that is the ordinals' own pairing."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for side, keys in enumerate((a, b)):
        for key in keys:
            groups.setdefault(_stem_and_ordinal(key)[0], ([], []))[side].append(key)
    pairs: list[tuple[str | None, str | None]] = []
    for keys_a, keys_b in groups.values():
        keys_a.sort(key=lambda k: _stem_and_ordinal(k)[1])
        keys_b.sort(key=lambda k: _stem_and_ordinal(k)[1])
        partner: dict[str, str] = {}
        free = list(keys_b)
        for same in (lambda x, y: a[x] == b[y], lambda x, y: a[x][0] == b[y][0]):
            for key in keys_a:
                if key in partner:
                    continue
                found = next((other for other in free if same(key, other)), None)
                if found is not None:
                    partner[key] = found
                    free.remove(found)
        left = iter(free)
        for key in keys_a:
            if key not in partner:
                partner[key] = next(left, None)  # type: ignore[assignment]
        pairs += [(key, partner[key]) for key in keys_a]
        pairs += [(None, key) for key in left]
    return pairs


class _Paired(Protocol):
    """What pairing reads of an op: the report's ``OpEntry`` and a baseline's ``OpFacts``."""

    @property
    def key(self) -> str: ...
    @property
    def shape(self) -> str | None: ...
    @property
    def source(self) -> str | None: ...


Op = TypeVar("Op", bound=_Paired)


def pair_ops(new: Iterable[Op], old: Iterable[Op]) -> list[tuple[Op | None, Op | None]]:
    """The ops of a profile and of the one it is compared with, paired (``pair_keys``: by
    stable key, then shape and source line where ordinals shifted), ``(new, old)``; None: the
    op has no partner.  Every comparison of two profiles pairs its ops here: ``profan diff``,
    ``profan check --baseline`` with a JSON report or with a per-machine baseline file."""
    by_key_new = {op.key: op for op in new}
    by_key_old = {op.key: op for op in old}
    return [
        (
            None if key_new is None else by_key_new[key_new],
            None if key_old is None else by_key_old[key_old],
        )
        for key_new, key_old in pair_keys(
            {key: (op.shape, op.source) for key, op in by_key_new.items()},
            {key: (op.shape, op.source) for key, op in by_key_old.items()},
        )
    ]

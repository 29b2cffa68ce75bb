"""Array helpers the readers and the scorer share."""

from __future__ import annotations

import numpy as np

# Beyond this many possible values a table costs more than numpy's sort or hash.
TABLE_LIMIT = 1 << 20


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``.  Integers of a small range (stat ids, step
    and device numbers) are counted into a table, one pass and no sort, and the inverse is
    int32 (half the memory of numpy's: it is as long as the values)."""
    if not len(values) or values.dtype.kind not in "iu":
        return np.unique(values, return_inverse=True)
    low, high = int(values.min()), int(values.max())
    if high - low > TABLE_LIMIT:
        return np.unique(values, return_inverse=True)
    shifted = (values - low if low else values).astype(np.intp, copy=False)
    present = np.flatnonzero(np.bincount(shifted, minlength=high - low + 1))
    rank = np.zeros(high - low + 1, dtype=np.int32)
    rank[present] = np.arange(len(present), dtype=np.int32)
    return (present + low).astype(values.dtype, copy=False), rank[shifted]


def among(values: np.ndarray, ids: np.ndarray | list[int] | tuple[int, ...]) -> np.ndarray:
    """``np.isin(values, ids)`` for a few small non-negative ids (stat metadata ids, value
    kinds), by a lookup table: one gather instead of a sort."""
    ids = np.asarray(ids, dtype=np.int64)
    if not ids.size:
        return np.zeros(len(values), dtype=bool)
    top = int(ids.max())
    if ids.min() < 0 or top > TABLE_LIMIT:
        return np.isin(values, ids)
    table = np.zeros(top + 2, dtype=bool)
    table[ids] = True
    return table[np.clip(values, -1, top + 1)]

"""Array helpers the readers and the scorer share."""

from __future__ import annotations

import numpy as np

# Beyond this many possible values a table costs more than numpy's sort.
_TABLE_LIMIT = 1 << 20


def distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``.  Integers of a small range (stat ids, step
    and device numbers) are counted into a table, one pass and no sort, and the inverse is
    int32 (half the memory of numpy's: it is as long as the values)."""
    if not len(values) or values.dtype.kind not in "iu":
        return np.unique(values, return_inverse=True)
    low, high = int(values.min()), int(values.max())
    if high - low > _TABLE_LIMIT:
        return np.unique(values, return_inverse=True)
    shifted = (values - low if low else values).astype(np.intp, copy=False)
    present = np.flatnonzero(np.bincount(shifted, minlength=high - low + 1))
    rank = np.zeros(high - low + 1, dtype=np.int32)
    rank[present] = np.arange(len(present), dtype=np.int32)
    return (present + low).astype(values.dtype, copy=False), rank[shifted]

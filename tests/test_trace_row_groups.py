"""``row_groups`` (the executions' groups by op, device, run...) numbers groups exactly as
pandas' ``groupby(..., sort=False, dropna=False).ngroup()`` does, whichever way it takes:
categorical codes, counted small integers, hashed values, few or many groups."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from profan.trace.profile import row_groups

KINDS = ("small_int", "big_int", "nullable", "category", "strings")


def _column(kind: str, draw_values: list[int]) -> pd.Series | pd.Categorical:
    values = np.array(draw_values, dtype=np.int64)
    if kind == "small_int":
        return pd.Series(734_139_829 + values % 7)
    if kind == "big_int":
        return pd.Series(values * (2**40) - 2**61)
    if kind == "nullable":
        return pd.Series(pd.array([None if v % 5 == 0 else v % 3 for v in draw_values], "Int64"))
    if kind == "category":
        return pd.Series(
            pd.Categorical([None if v % 4 == 0 else f"op{v % 3}" for v in draw_values])
        )
    return pd.Series(np.array([f"m{v % 2}" for v in draw_values], dtype=object))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=60),
    st.lists(st.sampled_from(KINDS), min_size=1, max_size=3, unique=True),
)
def test_row_groups_number_groups_as_pandas(values: list[int], kinds: list[str]) -> None:
    shift = {kind: index for index, kind in enumerate(kinds)}
    frame = pd.DataFrame(
        {
            kind: _column(kind, [v * (shift[kind] + 1) + shift[kind] for v in values])
            for kind in kinds
        }
    )
    group_of, first_rows = row_groups(frame, kinds)
    expected = frame.groupby(kinds, sort=False, dropna=False).ngroup().to_numpy()
    assert group_of.tolist() == expected.tolist()
    firsts = [int(np.flatnonzero(expected == group)[0]) for group in range(expected.max() + 1)]
    assert first_rows.tolist() == firsts


def test_row_groups_of_many_groups_hash_them() -> None:
    """Combined codes past the counting table's size take the hash, with the same numbers."""
    rows = np.arange(3000)
    frame = pd.DataFrame({"a": rows * 7919 % 3000, "b": (rows * 104729) % 2999 + 10**12})
    group_of, first_rows = row_groups(frame, ("a", "b"))
    expected = frame.groupby(["a", "b"], sort=False).ngroup().to_numpy()
    assert group_of.tolist() == expected.tolist()
    assert first_rows.tolist() == list(range(3000))

"""Tables (``pandas.DataFrame``) as cache data: a msgpack description plus raw column buffers.

Each column is stored as what it is made of, never as Python objects: a numpy column (bool,
integers, floats) as its bytes; a categorical as its codes' bytes and its categories (strings,
in the msgpack description); a nullable integer, float or boolean column (``Int64``,
``UInt64``, …) as its values' bytes and its mask's bytes.  The index must be the default
``RangeIndex``.  A table holding anything else raises ``Unsupported`` and is not cached.
Reading builds each column on the entry's buffer without copying it.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pandas as pd

# numpy kinds stored as raw bytes: bool, signed and unsigned integers, floats
_RAW_KINDS = "biuf"
_MASKED = {
    **{f"Int{bits}": pd.arrays.IntegerArray for bits in (8, 16, 32, 64)},
    **{f"UInt{bits}": pd.arrays.IntegerArray for bits in (8, 16, 32, 64)},
    "Float32": pd.arrays.FloatingArray,
    "Float64": pd.arrays.FloatingArray,
    "boolean": pd.arrays.BooleanArray,
}


class Unsupported(ValueError):
    """A table this codec does not store (the caller does not cache it)."""


class Column(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """How one column is stored: ``kind`` is ``numpy``, ``masked`` or ``category``; ``dtype``
    the numpy dtype of ``data`` (the codes of a categorical); ``pandas_dtype`` the column's
    dtype as pandas names it."""

    name: str
    kind: str
    dtype: str
    data: int  # blob index
    mask: int = -1  # blob index (masked)
    pandas_dtype: str = ""
    categories: list[str] = []
    categories_dtype: str = ""
    ordered: bool = False


class Table(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    rows: int
    columns: list[Column]


def encode_frame(frame: pd.DataFrame, blobs: list[Any]) -> Table:
    """The description of ``frame``; its buffers are appended to ``blobs``."""
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        raise Unsupported("the table's index is not the default RangeIndex")
    columns = []
    for name in frame.columns:
        if not isinstance(name, str):
            raise Unsupported(f"column name {name!r} is not a string")
        columns.append(_encode_column(name, frame[name], blobs))
    return Table(len(frame), columns)


def _raw(values: np.ndarray, blobs: list[Any]) -> int:
    if values.dtype.kind not in _RAW_KINDS or values.dtype.hasobject:
        raise Unsupported(f"a column of {values.dtype} is not stored")
    blobs.append(np.ascontiguousarray(values))
    return len(blobs) - 1


def _encode_column(name: str, series: pd.Series, blobs: list[Any]) -> Column:
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        categories = dtype.categories
        values = categories.tolist()
        if not all(isinstance(value, str) for value in values):
            raise Unsupported(f"column {name}: categories that are not all strings")
        codes = series.cat.codes.to_numpy()
        return Column(
            name,
            "category",
            codes.dtype.str,
            _raw(codes, blobs),
            categories=values,
            categories_dtype=str(categories.dtype),
            ordered=bool(dtype.ordered),
        )
    if str(dtype) in _MASKED:
        array = series.array
        numpy_dtype = dtype.numpy_dtype
        mask = np.asarray(array.isna(), dtype=bool)
        data = array.to_numpy(dtype=numpy_dtype, na_value=numpy_dtype.type(0))
        return Column(
            name,
            "masked",
            data.dtype.str,
            _raw(data, blobs),
            mask=_raw(mask, blobs),
            pandas_dtype=str(dtype),
        )
    if isinstance(dtype, np.dtype):
        values = series.to_numpy()
        return Column(name, "numpy", values.dtype.str, _raw(values, blobs))
    raise Unsupported(f"column {name} of {dtype} is not stored")


def decode_frame(table: Table, blobs: list[memoryview]) -> pd.DataFrame:
    """The table ``encode_frame`` described, its columns built on ``blobs`` (``ValueError``
    when the description does not fit the blobs)."""
    data = {column.name: _decode_column(column, table.rows, blobs) for column in table.columns}
    return pd.DataFrame(data, index=pd.RangeIndex(table.rows), copy=False)


def _array(blobs: list[memoryview], index: int, dtype: str, rows: int) -> np.ndarray:
    kind = np.dtype(dtype)
    if kind.kind not in _RAW_KINDS or kind.hasobject or not 0 <= index < len(blobs):
        raise ValueError(f"not a stored column: {dtype} at blob {index}")
    values = np.frombuffer(blobs[index], dtype=kind)
    if len(values) != rows:
        raise ValueError(f"a column of {len(values)} rows in a table of {rows}")
    return values


def _decode_column(column: Column, rows: int, blobs: list[memoryview]) -> Any:
    values = _array(blobs, column.data, column.dtype, rows)
    if column.kind == "numpy":
        return values
    if column.kind == "masked":
        make = _MASKED.get(column.pandas_dtype)
        if make is None:
            raise ValueError(f"not a stored masked dtype: {column.pandas_dtype}")
        array = make(values, _array(blobs, column.mask, "|b1", rows))
        if str(array.dtype) != column.pandas_dtype:
            raise ValueError(f"{column.pandas_dtype} read back as {array.dtype}")
        return array
    if column.kind == "category":
        categories = pd.Index(column.categories, dtype=column.categories_dtype or None)
        dtype = pd.CategoricalDtype(categories, ordered=column.ordered)
        in_range = not len(values) or (values.min() >= -1 and values.max() < len(categories))
        if values.dtype.kind != "i" or not in_range:
            raise ValueError("categorical codes outside their categories")
        return pd.Categorical.from_codes(values, dtype=dtype, validate=False)
    raise ValueError(f"unknown column kind {column.kind!r}")

"""The JSON form of the report model, read off its types.

A dataclass is a JSON object of its fields, in their order, each under its own name; a list is an
array; a dict an object.  ``encode`` writes one (JSON-safe: numpy scalars become Python's, NaN and
infinities ``null``); ``decode`` reads one back into the dataclass its annotations name (nested
dataclasses, lists and dicts of them, optional ones), a field absent from the JSON taking its
default and a key the type does not know being ignored: reports written by an older or newer
profan read back.  A field's ``metadata`` changes how it is written, where the JSON is not one
key per field:

* ``OMIT_NONE``: left out while None (``findings[].host``: only cross-host findings name one);
* ``OMIT_EMPTY``: left out while empty (``hosts``: absent for one host);
* ``INLINE``: a dataclass (or None) whose fields are written among its parent's (``steps[]``:
  the scorer's columns beside the trace's), read back when any of its keys is there;
* ``prefixed(p)``: a dict whose items are written among its parent's keys as ``p + name``
  (``summary.score_*``), read back from the keys that start with ``p``;
* ``NOT_READ``: written, never read back: the reader's own value stands (``tool``).

The meaning of each field, for SCHEMA.md, is its ``#:`` comment (``profan.report.model.schema``).
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_MODE = "json"
OMIT_NONE: Mapping[str, Any] = types.MappingProxyType({_MODE: "omit-none"})
OMIT_EMPTY: Mapping[str, Any] = types.MappingProxyType({_MODE: "omit-empty"})
INLINE: Mapping[str, Any] = types.MappingProxyType({_MODE: "inline"})
NOT_READ: Mapping[str, Any] = types.MappingProxyType({_MODE: "not-read"})


def prefixed(prefix: str) -> Mapping[str, Any]:
    """The metadata of a dict written among its parent's keys, each as ``prefix + name``."""
    return types.MappingProxyType({_MODE: "prefix", "prefix": prefix})


Decoder = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class FieldPlan:
    """How one field is written and read."""

    name: str
    mode: str | None  # None: one key, the field's name
    prefix: str  # mode "prefix"
    decoder: Decoder | None  # None: the JSON value as it is
    inline: type | None  # mode "inline": the dataclass whose fields are the parent's


@dataclass(frozen=True, slots=True)
class ClassPlan:
    fields: tuple[FieldPlan, ...]
    names: frozenset[str]
    # one key per field and each value as it is: encoded and decoded by the fast paths
    plain: bool
    # what ``decode`` does, by kind of field: read one key (with its decoder, if any); read an
    # inline dataclass when any of its keys is there; gather a prefixed dict
    read: tuple[tuple[str, Decoder | None], ...]
    inline: tuple[tuple[str, type, frozenset[str]], ...]
    prefixes: tuple[tuple[str, str], ...]


def fields_of(cls: type) -> tuple[FieldPlan, ...]:
    """The plan of each field of the dataclass ``cls``, in order."""
    return plan_of(cls).fields


_PLANS: dict[type, ClassPlan] = {}


def plan_of(cls: type) -> ClassPlan:
    """How the dataclass ``cls`` is written and read (made once per class)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _plan(cls)
    return plan


def _plan(cls: type) -> ClassPlan:
    plans = []
    for item in dataclasses.fields(cls):
        mode = item.metadata.get(_MODE)
        hint = annotation(item.type, cls.__module__)
        inline = None
        if mode == "inline":
            inline = _dataclass_in(hint)
            if inline is None:
                raise TypeError(f"{cls.__name__}.{item.name}: INLINE needs a dataclass type")
        plans.append(
            FieldPlan(item.name, mode, item.metadata.get("prefix", ""), _decoder(hint), inline)
        )
    plain = all(p.mode is None and p.decoder is None for p in plans)
    return ClassPlan(
        fields=tuple(plans),
        names=frozenset(p.name for p in plans),
        plain=plain,
        read=tuple(
            (p.name, p.decoder) for p in plans if p.mode not in ("inline", "prefix", "not-read")
        ),
        inline=tuple(
            (p.name, p.inline, plan_of(p.inline).names) for p in plans if p.inline is not None
        ),
        prefixes=tuple((p.name, p.prefix) for p in plans if p.mode == "prefix"),
    )


def hints_of(cls: type) -> dict[str, Any]:
    """Each field's annotation of the dataclass ``cls``, evaluated (``typing.get_type_hints``
    for dataclasses of one module, without evaluating the same text twice)."""
    return {item.name: annotation(item.type, cls.__module__) for item in dataclasses.fields(cls)}


_ANNOTATIONS: dict[tuple[str, str], Any] = {}


def annotation(text: Any, module: str) -> Any:
    """An annotation as written in ``module`` (text, under ``from __future__ import
    annotations``) evaluated there: the report's few distinct ones (``float | None`` ...)
    once each, not once per field (reading a report back makes every class's plan)."""
    if not isinstance(text, str):
        return text
    key = (text, module)
    if key not in _ANNOTATIONS:
        # (what typing.get_type_hints does with each field's text)
        _ANNOTATIONS[key] = eval(text, vars(sys.modules[module]))
    return _ANNOTATIONS[key]


def _dataclass_in(hint: Any) -> type | None:
    """``X`` of ``X`` or ``X | None`` where X is a dataclass."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if _is_union(hint) and len(args) == 1:
        return _dataclass_in(args[0])
    return None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _decoder(hint: Any) -> Decoder | None:
    """What reads a JSON value into ``hint``: None where the value is kept as it is (numbers,
    text, lists and dicts of them)."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        cls = hint
        return lambda value: decode(cls, value)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if _is_union(hint):
        inner = [_decoder(arg) for arg in args if arg is not type(None)]
        found = [d for d in inner if d is not None]
        if not found:
            return None
        if len(inner) > 1:
            raise TypeError(f"{hint}: a union of a dataclass with another type is not readable")
        return _or_none(found[0])
    if origin is list and args:
        item = _decoder(args[0])
        return None if item is None else _list_of(item)
    if origin is dict and len(args) == 2:
        item = _decoder(args[1])
        return None if item is None else _dict_of(item)
    return None


def _or_none(read: Decoder) -> Decoder:
    return lambda value: None if value is None else read(value)


def _list_of(read: Decoder) -> Decoder:
    return lambda value: [read(v) for v in value]


def _dict_of(read: Decoder) -> Decoder:
    return lambda value: {k: read(v) for k, v in value.items()}


# ------------------------------------------------------------------------------------ writing


def encode(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as objects (see the module), numpy and pandas
    scalars as Python's, NaN and infinities as None, tuples as lists, dict keys as text."""
    kind = type(value)
    if kind is dict:
        return {str(k): encode(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [encode(v) for v in value]
    if kind is float:
        return value if math.isfinite(value) else None
    if value is None or kind is str or kind is int or kind is bool:
        return value
    return _encode_other(value)


def _encode_other(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode_object(value)
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return _scalar(value)


def encode_object(obj: Any, write: Callable[[Any], Any] = encode) -> dict[str, Any]:
    """One dataclass as a JSON object (its fields' metadata say where it is not one key per
    field), each value passed through ``write``."""
    plan = plan_of(type(obj))
    if plan.plain:
        return {f.name: write(getattr(obj, f.name)) for f in plan.fields}
    out: dict[str, Any] = {}
    for f in plan.fields:
        value = getattr(obj, f.name)
        if f.mode == "inline":
            if value is not None:
                out.update(encode_object(value, write))
        elif f.mode == "prefix":
            out.update({f.prefix + str(k): write(v) for k, v in value.items()})
        elif (f.mode == "omit-none" and value is None) or (f.mode == "omit-empty" and not value):
            continue
        else:
            out[f.name] = write(value)
    return out


def record(obj: Any) -> dict[str, Any]:
    """A dataclass's JSON keys with its values as they are (a table's row: NaN stays NaN)."""
    return encode_object(obj, _as_is)


def _as_is(value: Any) -> Any:
    return value


def _scalar(value: Any) -> Any:
    """A numpy or pandas scalar as Python's (numpy and pandas are loaded when one exists:
    imported here, so that reading a report back never imports them)."""
    import numpy as np
    import pandas as pd

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# ------------------------------------------------------------------------------------ reading


def decode(cls: type[T], data: Any) -> T:
    """The dataclass ``cls`` read from its JSON object (see the module).  TypeError when
    ``data`` is not an object or lacks a field that has no default."""
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: an object expected, not {type(data).__name__}")
    plan = plan_of(cls)
    if plan.plain:
        if plan.names.issuperset(data):  # (as written by this profan: every key a field)
            return cls(**data)
        return cls(**{k: v for k, v in data.items() if k in plan.names})
    values: dict[str, Any] = {}
    for name, read in plan.read:
        if name in data:
            value = data[name]
            values[name] = value if read is None else read(value)
    for name, inner, names in plan.inline:
        if not names.isdisjoint(data):
            values[name] = decode(inner, data)
    for name, prefix in plan.prefixes:
        size = len(prefix)
        values[name] = {k[size:]: v for k, v in data.items() if k.startswith(prefix)}
    return cls(**values)

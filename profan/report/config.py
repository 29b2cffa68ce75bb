"""``profan.toml``: thresholds of the rules (``[rules]``), read as typed msgspec structs.

Every table forbids unknown keys.  A file that does not fit its types is a ``ConfigError`` that
names the file, the table and key, and what is allowed there (exit code 2).  The budget and
baseline tables are in ``profan.report.budget``; both use ``read_toml`` and ``convert`` here.
"""

from __future__ import annotations

import re
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from profan.errors import ConfigError

NonNegative = Annotated[float, msgspec.Meta(ge=0)]


class RuleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every threshold a rule uses.  ``[rules]`` in ``profan.toml`` overrides any of them."""

    # ignore ops that take less than this share of total op time (noise)
    min_time_share: NonNegative = 0.01
    # far-from-roofline: efficiency below this
    efficiency_below: NonNegative = 0.10
    # collectives: flag when more than this fraction of their time is not hidden behind compute
    exposed_fraction_above: NonNegative = 0.5
    # latency-bound collectives: buffers under this many bytes, at least this many of them
    latency_bytes_below: NonNegative = 45e3
    latency_min_count: Annotated[int, msgspec.Meta(ge=0)] = 2
    # relayout copies / transposes moving more than this share of the step's HBM bytes
    relayout_bytes_share_above: NonNegative = 0.05
    # tiled layouts storing more than this many times the logical bytes
    padding_ratio_above: NonNegative = 1.25
    # matmul dims under this size waste the MXU (the chip's own MXU size wins when known)
    mxu_size: Annotated[int, msgspec.Meta(ge=0)] = 128
    # f32 matmuls flagged on these device kinds (bf16 is usually meant there)
    f32_matmul_device_kinds: tuple[str, ...] = ("TPU", "GPU")
    # small-MXU-dim rule applies on these device kinds
    mxu_device_kinds: tuple[str, ...] = ("TPU",)
    # host transfers: flag when more than this fraction of their time is exposed
    host_exposed_fraction_above: NonNegative = 0.5
    # all-gathers producing more than this fraction of the chip's HBM
    allgather_hbm_fraction_above: NonNegative = 0.05
    # idle: gaps between steps longer than this fraction of the median step time
    idle_gap_fraction_above: NonNegative = 0.10
    # memory (profan.report.memory): a program's peak above this share of the chip's memory per
    # device; one temporary buffer above this share of its program's peak
    memory_near_capacity_above: NonNegative = 0.90
    memory_large_temporary_share_above: NonNegative = 0.25
    disabled: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, where: str = "[rules]") -> RuleConfig:
        """The thresholds of a ``[rules]`` table (``a-b`` and ``a_b`` spell the same key)."""
        return convert({k.replace("-", "_"): v for k, v in table.items()}, cls, where=where)


def read_toml(path: str | Path, what: str = "configuration") -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} file not found") from None
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: not a valid TOML file: {error}") from None


def load_rule_config(path: str | Path | None) -> RuleConfig:
    """``[rules]`` of a ``profan.toml`` (defaults without a file)."""
    if path is None:
        return RuleConfig()
    return RuleConfig.from_mapping(read_toml(path).get("rules", {}), where=f"{path} [rules]")


# --------------------------------------------------------------------------- error messages

T = typing.TypeVar("T")
_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_PATH_PART = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def convert(data: Any, kind: type[T], *, where: str) -> T:
    """``data`` as ``kind`` (a msgspec struct), or a ConfigError naming ``where`` (the file, or
    the file and table), the key, and what the key allows."""
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as error:
        raise ConfigError(_explain(str(error), data, kind, where)) from None


def _explain(message: str, data: Any, kind: type, where: str) -> str:
    match = _MESSAGE.match(message)
    what = match.group("what") if match else message
    path: list[str | int] = [
        name if name else int(index)
        for name, index in _PATH_PART.findall((match and match.group("path")) or "")
    ]
    if unknown := re.match(r"Object contains unknown field `(.*)`", what):
        table = _type_at(kind, path)
        known = ", ".join(f.name for f in msgspec.structs.fields(table))
        noun = "rule setting" if table is RuleConfig else "key" if path else "table"
        return f"{_place(where, path)}: unknown {noun} {unknown.group(1)!r}; known: {known}"
    if missing := re.match(r"Object missing required field `(.*)`", what):
        name = missing.group(1)
        expected = _describe(_field_type(_type_at(kind, path), name))
        return f"{_place(where, path)}: needs {name} ({expected})"
    key, value = str(path[-1]) if path else "", _value_at(data, path)
    if bound := re.match(r"Expected `.*` (>=|<=|>|<) (.*)", what):
        limit = f"{bound.group(1)} {bound.group(2)}"
        return f"{_place(where, path[:-1])}: {key} must be {limit}, got {value!r}"
    expected = _describe(_field_type(_type_at(kind, path[:-1]), key))
    return f"{_place(where, path[:-1])}: {key} must be {expected}, got {value!r}"


def _place(where: str, table_path: list[str | int]) -> str:
    """``file [budget]``, ``file [[budget.ops]] #2``: where a table of the file is."""
    names = [p for p in table_path if isinstance(p, str)]
    if not names:
        return where
    if isinstance(table_path[-1], int):
        return f"{where} [[{'.'.join(names)}]] #{table_path[-1] + 1}"
    return f"{where} [{'.'.join(names)}]"


def _value_at(data: Any, path: list[str | int]) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _strip(annotation: Any) -> Any:
    """The type under ``Annotated`` / ``X | None`` / ``tuple[X, ...]`` that holds fields."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            annotation = args[0] if len(args) == 1 else annotation
            if len(args) != 1:
                return annotation
        elif origin in (tuple, list):
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation


def _field_type(struct: Any, name: str) -> Any:
    if not isinstance(struct, type) or not issubclass(struct, msgspec.Struct):
        return None
    hints = typing.get_type_hints(struct, include_extras=True)
    return hints.get(name)


def _type_at(kind: Any, path: list[str | int]) -> Any:
    current = kind
    for part in path:
        if isinstance(part, int):
            continue
        current = _strip(_field_type(current, part))
    return current


def _describe(annotation: Any) -> str:
    """What a TOML value of this type looks like, in words."""
    if annotation is None:
        return "another value"
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        base, *metadata = typing.get_args(annotation)
        text = _describe(base)
        for meta in metadata:
            if isinstance(meta, msgspec.Meta) and meta.ge is not None:
                text += f" >= {meta.ge}"
        return text
    if origin in (typing.Union, types.UnionType):
        parts = [_describe(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(parts)
    if origin is typing.Literal:
        return " or ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in annotation.__args__)
    if origin in (tuple, list):
        return f"a list of {_describe(typing.get_args(annotation)[0]).removeprefix('a ')}s"
    return {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
    }.get(annotation, "a table")

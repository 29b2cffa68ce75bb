"""Typed TOML files: read one, check it against ``msgspec.Struct`` types, say what is wrong.

``msgspec`` does the checking (types, ranges, enumerations, unknown fields forbidden); this module
turns its terse messages into ones a user can act on: the file, the key (``chips.h100.hbm_bytes``)
and what is allowed there.  Used for the chip catalogue and the kernel registry; any other TOML
file profan reads can use it too.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from profan.errors import ConfigError

T = TypeVar("T")

_NOUNS = {"float": "a number", "int": "a whole number", "str": "a string",
          "bool": "true or false", "object": "a table", "array": "a list"}  # fmt: skip
_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.(\w[\w\-]*)|\[(\d+|\.\.\.)\]")


def read_toml(path: str | Path, *, what: str) -> dict[str, Any]:
    """The TOML document in ``path``; unreadable or malformed files raise ``ConfigError``."""
    import tomllib  # only when a TOML file is read (a report from the cache reads none)

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None


def read_named_tables(path: str | Path, top: str, *, what: str) -> dict[str, Any]:
    """The ``[top.NAME]`` tables of a file that holds only those (chip and kernel files);
    a file without any, or with another top-level table, raises ``ConfigError``."""
    document = read_toml(path, what=what)
    tables = document.get(top)
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{path}: no [{top}.NAME] tables found")
    unknown = sorted(set(document) - {top})
    if unknown:
        raise ConfigError(f"{path}: unknown top-level table {unknown[0]!r} (allowed: {top})")
    return tables


def convert(value: Any, type_: type[T], *, origin: str, key: str) -> T:
    """``value`` (a decoded TOML table) as ``type_``; errors name ``origin`` and the full key."""
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as error:
        raise ConfigError(f"{origin}: {explain(str(error), type_, key)}") from None


def explain(message: str, root: Any, key: str) -> str:
    """A msgspec validation message rewritten as ``KEY: what is wrong (what is allowed)``."""
    match = _MESSAGE.match(message)
    what = match.group("what") if match else message
    raw_path = (match.group("path") if match else None) or "$"
    in_key = what.startswith("Invalid enum value") and " in " in message
    steps = [name or index for name, index in _STEP.findall(raw_path.removeprefix("$"))]
    where = key
    for step in steps:
        if step.isdigit():
            where += f"[{step}]"
        elif step != "...":
            where += f".{step}"
    target = _type_at(root, steps)
    unknown = re.match(r"Object contains unknown field `(.+)`", what)
    if unknown:
        allowed = _field_names(target)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{where}: unknown field {unknown.group(1)!r}{hint}"
    missing = re.match(r"Object missing required field `(.+)`", what)
    if missing:
        return f"{where}: lacks the field {missing.group(1)!r}"
    enum = re.match(r"Invalid enum value (.+)", what)
    if enum:
        choices = _literal_choices(_key_type(target) if in_key else target)
        hint = f" (allowed: {', '.join(choices)})" if choices else ""
        return f"{where}: {enum.group(1)} is not allowed{hint}"
    expected = re.match(r"Expected `([\w |]+)`(?:, got `(\w+)`)?(.*)", what)
    if expected:
        wanted, got, bound = expected.groups()
        names = [name.strip() for name in wanted.split("|") if name.strip() != "null"]
        text = f"{where}: must be {' or '.join(_NOUNS.get(n, n) for n in names)}"
        text += bound.replace(".0", "")
        return text + (f", got {_NOUNS.get(got, got)}" if got else "")
    return f"{where}: {what}"


def _strip(annotation: Any) -> Any:
    """The type under ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def _type_at(root: Any, steps: list[str]) -> Any:
    """The declared type at a msgspec path (struct fields, list items, dict values)."""
    current = _strip(root)
    for step in steps:
        if isinstance(current, type) and issubclass(current, msgspec.Struct):
            fields = {field.encode_name: field.type for field in msgspec.structs.fields(current)}
            current = _strip(fields.get(step, Any))
            continue
        args = [arg for arg in typing.get_args(current) if arg is not Ellipsis]
        current = _strip(args[-1]) if args else Any
    return current


def _field_names(annotation: Any) -> list[str]:
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return [field.encode_name for field in msgspec.structs.fields(annotation)]
    return []


def _key_type(annotation: Any) -> Any:
    args = typing.get_args(annotation)
    return _strip(args[0]) if args else Any


def _literal_choices(annotation: Any) -> list[str]:
    """The values a field allows: its Literal values (through unions and lists), bool's."""
    annotation = _strip(annotation)
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return _literal_choices(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        choices: list[str] = []
        for member in typing.get_args(annotation):
            choices += [c for c in _literal_choices(member) if c not in choices]
        return choices
    if origin is typing.Literal:
        return [_toml_text(choice) for choice in typing.get_args(annotation)]
    if annotation is bool:
        return ["true", "false"]
    return []


def _toml_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)

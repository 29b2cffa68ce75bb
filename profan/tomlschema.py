"""Configuration files read one strict way, then checked against ``msgspec.Struct`` types.

``read_config`` is the one reader of every file a user configures profan with (``profan.toml``,
``--chips``, ``--kernels``, their environment variables, baselines and JSON reports): strict
UTF-8 (a byte-order mark or UTF-16 text is named as such), decode errors as ``file:line:column``,
nesting bounded, numbers finite.  A file that cannot be decoded is a ``ConfigError`` (exit 2),
never ignored.

``msgspec`` does the checking (types, ranges, enumerations, unknown fields forbidden); this module
turns its terse messages into ones a user can act on: the file, the key (``chips.h100.hbm_bytes``)
and what is allowed there.
"""

from __future__ import annotations

import math
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from profan.errors import ConfigError
from profan.escape import terminal
from profan.inputs import check_input

T = TypeVar("T")

_NOUNS = {"float": "a number", "int": "a whole number", "str": "a string",
          "bool": "true or false", "object": "a table", "array": "a list"}  # fmt: skip
_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)
_STEP = re.compile(r"\.(\w[\w\-]*)|\[(\d+|\.\.\.)\]")


Syntax = Literal["toml", "json"]

# Deeper than any file profan writes or reads (a JSON report nests about 6 levels); bounded so
# that a hostile file is an error, not a RecursionError.
MAX_NESTING = 64
# A hand-written TOML configuration is a few kilobytes; past this it is refused before it is
# decoded (a megabyte-long glob would take fnmatch seconds per op).  JSON files are reports
# profan wrote (baselines, ``--format json``): a large model's run far past this, not capped.
MAX_TOML_BYTES = 1 << 20
# A glob's (``[[budget.ops]] match``, a kernel's ``targets``/``names``) length bound: fnmatch's
# time and memory grow with it; the longest name a pattern has reason to spell is far shorter.
MAX_PATTERN = 1000
Pattern = Annotated[str, msgspec.Meta(max_length=MAX_PATTERN)]
# More digits than Python converts to an int (sys.int_info.default_max_str_digits).
_LONG_DIGITS = re.compile(r"\d{4301,}")
_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')
_TOML_KEY = re.compile(r"^[ \t]*([^=\n#\[][^=\n]*?)[ \t]*=", re.MULTILINE)
_TOML_WHERE = re.compile(r"^(?P<what>.*?) \(at (?:line (?P<line>\d+), column (?P<col>\d+)|"
                         r"(?P<end>end of document))\)$")  # fmt: skip


def read_config(path: str | Path, *, what: str, syntax: Syntax) -> Any:
    """The decoded document of the configuration file ``path`` (``syntax``: TOML or JSON).

    Unreadable files, TOML files larger than ``MAX_TOML_BYTES``, text that is not strict UTF-8,
    syntax errors, nesting deeper than ``MAX_NESTING`` and numbers that are not finite all raise
    ``ConfigError`` naming the file and where in it (line:column, or the key)."""
    path = Path(path)
    check_input(path, what)
    try:
        with path.open("rb") as file:
            data = file.read(MAX_TOML_BYTES + 1) if syntax == "toml" else file.read()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read {what}: {error.strerror or error}") from None
    if syntax == "toml" and len(data) > MAX_TOML_BYTES:
        raise ConfigError(
            f"{path}: {what} is larger than {MAX_TOML_BYTES // (1 << 20)} MiB (the cap on a TOML "
            "configuration file; profan's are a few kilobytes)"
        )
    return decode_config(data, origin=str(path), what=what, syntax=syntax)


def decode_config(data: bytes, *, origin: str, what: str, syntax: Syntax) -> Any:
    """``read_config`` on bytes already read; errors name ``origin``."""
    text = _utf8_text(data, origin, what)
    try:
        document = _toml(text, origin) if syntax == "toml" else _json(text, origin)
    except RecursionError:
        raise ConfigError(
            f"{origin}: {what} nests deeper than {MAX_NESTING} levels (profan's files nest a few)"
        ) from None
    except ValueError:
        # the decoders' syntax errors are ConfigError already: what is left is an integer past
        # Python's conversion limit (4,300 digits)
        raise _number_too_long(text, origin, syntax) from None
    _check_values(document, origin, what)
    return document


def read_toml(path: str | Path, *, what: str) -> dict[str, Any]:
    """The TOML document in ``path`` (``read_config``)."""
    document: dict[str, Any] = read_config(path, what=what, syntax="toml")
    return document


def _utf8_text(data: bytes, origin: str, what: str) -> str:
    """``data`` as UTF-8 text; a byte-order mark, UTF-16 and other encodings are named."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise ConfigError(
            f"{origin}:1:1: {what} starts with a UTF-8 byte-order mark (BOM); expected UTF-8 "
            "without one (save the file without the BOM)"
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{origin}:1:1: {what} is UTF-16 text; expected UTF-8 (convert it)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = _position(data[: error.start].decode("utf-8"), len(data[: error.start]))
        raise ConfigError(
            f"{origin}:{line}:{column}: {what} is not UTF-8 (byte 0x{data[error.start]:02x}; "
            "Latin-1 or another encoding?); expected UTF-8"
        ) from None
    if "\0" in text:
        line, column = _position(text, text.index("\0"))
        raise ConfigError(
            f"{origin}:{line}:{column}: {what} holds a NUL character (UTF-16 text without a "
            "byte-order mark?); expected UTF-8 text"
        )
    return text


def _number_too_long(text: str, origin: str, syntax: Syntax) -> Exception:
    """The error for the first integer of ``text`` longer than Python converts, naming its
    line, column and key; a ``ValueError`` with no such integer is a bug, returned as it is."""
    found = _LONG_DIGITS.search(text)
    if found is None:
        return ValueError(f"{origin}: {syntax} decoder failed")
    line, column = _position(text, found.start())
    keys = (_JSON_KEY if syntax == "json" else _TOML_KEY).findall(text, 0, found.start())
    key = f"{terminal(keys[-1].strip()[:100])}: " if keys else ""
    digits = found.end() - found.start()
    return ConfigError(
        f"{origin}:{line}:{column}: {key}number too long ({digits} digits; profan's numbers "
        "have a few)"
    )


def _position(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of ``text[index]``."""
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _toml(text: str, origin: str) -> dict[str, Any]:
    import tomllib  # only when a TOML file is read (a report from the cache reads none)

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        match = _TOML_WHERE.match(str(error))
        if match is None:
            raise ConfigError(f"{origin}: not valid TOML: {error}") from None
        if match.group("end"):
            line, column = _position(text, len(text))
        else:
            line, column = int(match.group("line")), int(match.group("col"))
        raise ConfigError(
            f"{origin}:{line}:{column}: not valid TOML: {match.group('what')}"
        ) from None


class _NotFinite(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotFinite(name)


def _json(text: str, origin: str) -> Any:
    import json

    try:
        return json.loads(text, parse_constant=_reject_constant)
    except _NotFinite as error:
        raise ConfigError(
            f"{origin}: not valid JSON: {error} is not a number (expected a finite number)"
        ) from None
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{origin}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
        ) from None


def _check_values(document: Any, origin: str, what: str) -> None:
    """Nesting at most ``MAX_NESTING`` deep and every float finite (``1e400`` decodes to inf);
    iterative, so that the check itself cannot recurse too deep."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, key, depth = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(
                f"{origin}: {key or 'the document'}: {value} is not a finite number (expected a "
                "finite number)"
            )
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_NESTING:
            raise ConfigError(
                f"{origin}: {key}: {what} nests deeper than {MAX_NESTING} levels (profan's "
                "files nest a few)"
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for name, item in items:
            if isinstance(item, dict | list | float):
                step = f"[{name}]" if isinstance(name, int) else (f".{name}" if key else name)
                stack.append((item, key + step, depth + 1))


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

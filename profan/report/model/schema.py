"""SCHEMA.md, generated from the report's types: ``python -m profan.report.model.schema``.

The prose is hand-written in ``schema_template.md``; each line ``@fields NAME`` there becomes
the table of the dataclass ``NAME`` (``profan.report.model``, or ``Timeline``/``StepSlices``):
one row per JSON key, in the order the report writes them, with its type (from the field's
annotation) and its meaning (the field's ``#:`` comment: every field of the JSON has one).  A
field the codec writes among its parent's keys (``INLINE``) adds its fields' rows; a ``prefixed``
dict is one row, ``<prefix><name>``.

``--check`` exits 1, saying so, when SCHEMA.md is not what the types make (tests run it too).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

from profan.report import model, slices
from profan.report.model.codec import fields_of, hints_of

TEMPLATE = Path(__file__).with_name("schema_template.md")
SCHEMA = Path(__file__).resolve().parent.parent / "SCHEMA.md"
DIRECTIVE = "@fields "
_TYPE_NAMES = {int: "int", float: "float", str: "str", bool: "bool", type(None): "null"}


def documented_types() -> dict[str, type]:
    """The dataclasses a ``@fields`` line may name."""
    found: dict[str, Any] = {name: getattr(model, name) for name in model.__all__}
    found.update(Timeline=slices.Timeline, StepSlices=slices.StepSlices)
    return {
        name: cls
        for name, cls in found.items()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls)
    }


def field_docs(cls: type) -> dict[str, str]:
    """Each field's ``#:`` comment (the lines right above it, joined), by field name."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    docs = {}
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        comment: list[str] = []
        row = item.lineno - 2  # the line above, 0-based
        while row >= 0 and lines[row].strip().startswith("#:"):
            comment.insert(0, lines[row].strip().removeprefix("#:").strip())
            row -= 1
        if comment:
            docs[item.target.id] = " ".join(comment)
    return docs


def type_text(hint: Any) -> str:
    """A field's annotation in the JSON's words: ``float|null``, ``list of str``,
    ``{str: float}``, a dataclass by its name."""
    if hint in _TYPE_NAMES:
        return _TYPE_NAMES[hint]
    if hint is Any:
        return "any"
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint.__name__
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_text(arg) for arg in args)
    if origin is list and args:
        return f"list of {type_text(args[0])}"
    if origin is dict and len(args) == 2:
        return f"{{{type_text(args[0])}: {type_text(args[1])}}}"
    return str(hint)


def rows(cls: type) -> list[tuple[str, str, str]]:
    """(key, type, meaning) of every JSON key a ``cls`` object has, in the order written."""
    hints = hints_of(cls)
    docs = field_docs(cls)
    out = []
    for plan in fields_of(cls):
        if plan.mode == "inline":
            assert plan.inline is not None
            out += rows(plan.inline)
            continue
        meaning = docs.get(plan.name)
        if meaning is None:
            raise SchemaError(f"{cls.__name__}.{plan.name} has no #: comment (its SCHEMA.md line)")
        kind = type_text(hints[plan.name])
        key = plan.name
        if plan.mode == "prefix":
            key = f"{plan.prefix}<name>"
            kind = type_text(typing.get_args(hints[plan.name])[1])
        elif plan.mode == "omit-none":
            kind += " (absent when null)"
        elif plan.mode == "omit-empty":
            kind += " (absent when empty)"
        elif plan.mode == "not-read":
            kind += " (written, not read back)"
        out.append((key, kind, meaning))
    return out


def table(cls: type) -> str:
    lines = ["| field | type | meaning |", "|---|---|---|"]
    lines += [f"| `{key}` | {_cell(kind)} | {_cell(meaning)} |" for key, kind, meaning in rows(cls)]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


class SchemaError(Exception):
    pass


def render(template: str | None = None) -> str:
    """SCHEMA.md: the template with each ``@fields NAME`` line replaced by NAME's table."""
    text = TEMPLATE.read_text(encoding="utf-8") if template is None else template
    known = documented_types()
    out = []
    for line in text.splitlines():
        if line.startswith(DIRECTIVE):
            name = line.removeprefix(DIRECTIVE).strip()
            if name not in known:
                raise SchemaError(f"{DIRECTIVE}{name}: no such report type")
            out.append(table(known[name]))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m profan.report.model.schema",
        description="Write profan/report/SCHEMA.md from the report's types and its template.",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if SCHEMA.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if SCHEMA.read_text(encoding="utf-8") != text:
            print(f"{SCHEMA} is out of date: run python -m profan.report.model.schema")
            return 1
        return 0
    SCHEMA.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

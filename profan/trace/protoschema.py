"""Compile profan's own ``.proto`` schema files into protobuf message classes at run time.

Why not generated ``_pb2`` modules: they are tied to the protobuf release that generated them
(gencode/runtime version checks), and neither xprof nor jaxlib ships the XSpace ones.  Why not a
committed binary descriptor: it needs protoc to rebuild and can silently drift from the ``.proto``
beside it.  Instead this module reads the small proto3 subset our schema files use (messages,
nested messages, enums, ``repeated``, ``map<,>``, ``oneof``, ``reserved``, options ignored) into a
``FileDescriptorProto``, adds it to a private ``DescriptorPool`` and asks the runtime (upb) for
the message classes.  Decoding then runs entirely in the runtime's C code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

_FDP = descriptor_pb2.FieldDescriptorProto

SCALAR_TYPES: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE,
    "float": _FDP.TYPE_FLOAT,
    "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64,
    "int32": _FDP.TYPE_INT32,
    "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32,
    "bool": _FDP.TYPE_BOOL,
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "uint32": _FDP.TYPE_UINT32,
    "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64,
    "sint32": _FDP.TYPE_SINT32,
    "sint64": _FDP.TYPE_SINT64,
}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<number>-?(?:0[xX][0-9a-fA-F]+|\d+))
  | (?P<punct>[{}\[\]<>(),;=])
    """,
    re.VERBOSE | re.DOTALL,
)


class ProtoSchemaError(ValueError):
    """A schema file outside the supported subset (a bug in profan's own data files)."""


def _tokens(text: str, file: str) -> list[tuple[str, int]]:
    tokens: list[tuple[str, int]] = []
    position = 0
    line = 1
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ProtoSchemaError(f"{file}:{line}: unexpected character {text[position]!r}")
        if match.lastgroup != "space":
            tokens.append((match.group(), line))
        line += match.group().count("\n")
        position = match.end()
    return tokens


@dataclass
class _Parser:
    tokens: list[tuple[str, int]]
    file: str
    position: int = 0
    # (scope, field proto) pairs whose type names are resolved once every name is known.
    pending: list[tuple[str, descriptor_pb2.FieldDescriptorProto]] = field(default_factory=list)
    messages: set[str] = field(default_factory=set)
    enums: set[str] = field(default_factory=set)

    def peek(self) -> str:
        return self.tokens[self.position][0] if self.position < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        if self.position >= len(self.tokens):
            raise ProtoSchemaError(f"{self.file}: unexpected end of file")
        token, line = self.tokens[self.position]
        if expected is not None and token != expected:
            raise ProtoSchemaError(f"{self.file}:{line}: expected {expected!r}, found {token!r}")
        self.position += 1
        return token

    def number(self) -> int:
        token = self.take()
        try:
            return int(token, 0)
        except ValueError:
            line = self.tokens[self.position - 1][1]
            raise ProtoSchemaError(
                f"{self.file}:{line}: expected a number, found {token!r}"
            ) from None

    def skip_statement(self) -> None:
        while self.take() != ";":
            pass

    def skip_options(self) -> None:
        if self.peek() == "[":
            while self.take() != "]":
                pass

    def parse_file(self, proto: descriptor_pb2.FileDescriptorProto) -> None:
        while self.position < len(self.tokens):
            keyword = self.take()
            if keyword == "syntax":
                self.take("=")
                proto.syntax = self.take().strip("\"'")
                self.take(";")
            elif keyword == "package":
                proto.package = self.take()
                self.take(";")
            elif keyword in ("option", "import"):
                self.skip_statement()
            elif keyword == "message":
                self.parse_message(proto.message_type.add(), proto.package)
            elif keyword == "enum":
                self.parse_enum(proto.enum_type.add(), proto.package)
            else:
                raise ProtoSchemaError(f"{self.file}: unsupported top-level {keyword!r}")

    def parse_enum(self, proto: descriptor_pb2.EnumDescriptorProto, scope: str) -> None:
        proto.name = self.take()
        self.enums.add(f"{scope}.{proto.name}")
        self.take("{")
        while self.peek() != "}":
            name = self.take()
            if name in ("option", "reserved"):
                self.skip_statement()
                continue
            self.take("=")
            value = proto.value.add()
            value.name = name
            value.number = self.number()
            self.skip_options()
            self.take(";")
        self.take("}")

    def parse_message(self, proto: descriptor_pb2.DescriptorProto, scope: str) -> None:
        proto.name = self.take()
        full_name = f"{scope}.{proto.name}"
        self.messages.add(full_name)
        self.take("{")
        while self.peek() != "}":
            keyword = self.peek()
            if keyword == "message":
                self.take()
                self.parse_message(proto.nested_type.add(), full_name)
            elif keyword == "enum":
                self.take()
                self.parse_enum(proto.enum_type.add(), full_name)
            elif keyword in ("option", "reserved", "extensions"):
                self.skip_statement()
            elif keyword == "oneof":
                self.take()
                oneof_index = len(proto.oneof_decl)
                proto.oneof_decl.add().name = self.take()
                self.take("{")
                while self.peek() != "}":
                    if self.peek() == "option":
                        self.skip_statement()
                        continue
                    self.parse_field(proto, full_name, oneof_index=oneof_index)
                self.take("}")
            elif keyword == "map":
                self.parse_map(proto, full_name)
            else:
                self.parse_field(proto, full_name)
        self.take("}")

    def parse_field(
        self, proto: descriptor_pb2.DescriptorProto, scope: str, oneof_index: int | None = None
    ) -> None:
        label = _FDP.LABEL_OPTIONAL
        if self.peek() == "repeated":
            self.take()
            label = _FDP.LABEL_REPEATED
        elif self.peek() == "optional":
            raise ProtoSchemaError(f"{self.file}: proto3 'optional' is not supported")
        type_name = self.take()
        field_proto = proto.field.add()
        field_proto.name = self.take()
        self.take("=")
        field_proto.number = self.number()
        field_proto.label = label
        field_proto.json_name = _json_name(field_proto.name)
        if oneof_index is not None:
            field_proto.oneof_index = oneof_index
        if type_name in SCALAR_TYPES:
            field_proto.type = SCALAR_TYPES[type_name]
        else:
            field_proto.type_name = type_name
            self.pending.append((scope, field_proto))
        self.skip_options()
        self.take(";")

    def parse_map(self, proto: descriptor_pb2.DescriptorProto, scope: str) -> None:
        self.take("map")
        self.take("<")
        key_type = self.take()
        self.take(",")
        value_type = self.take()
        self.take(">")
        name = self.take()
        self.take("=")
        number = self.number()
        self.skip_options()
        self.take(";")
        entry_name = "".join(part.capitalize() for part in name.split("_")) + "Entry"
        entry = proto.nested_type.add()
        entry.name = entry_name
        entry.options.map_entry = True
        entry_scope = f"{scope}.{entry_name}"
        self.messages.add(entry_scope)
        for field_name, field_number, type_name in (("key", 1, key_type), ("value", 2, value_type)):
            entry_field = entry.field.add()
            entry_field.name = field_name
            entry_field.number = field_number
            entry_field.label = _FDP.LABEL_OPTIONAL
            entry_field.json_name = field_name
            if type_name in SCALAR_TYPES:
                entry_field.type = SCALAR_TYPES[type_name]
            else:
                entry_field.type_name = type_name
                self.pending.append((scope, entry_field))
        map_field = proto.field.add()
        map_field.name = name
        map_field.number = number
        map_field.label = _FDP.LABEL_REPEATED
        map_field.type = _FDP.TYPE_MESSAGE
        map_field.type_name = f".{entry_scope.lstrip('.')}"
        map_field.json_name = _json_name(name)

    def resolve_types(self) -> None:
        """Resolve each named type the way protoc does: innermost enclosing scope first."""
        for scope, field_proto in self.pending:
            wanted = field_proto.type_name
            candidates = [wanted.lstrip(".")] if wanted.startswith(".") else []
            parts = scope.lstrip(".").split(".")
            while not candidates or not wanted.startswith("."):
                candidates.append(".".join([*parts, wanted]).lstrip("."))
                if not parts:
                    break
                parts.pop()
            for candidate in candidates:
                full = f".{candidate}"
                if full in self.messages or candidate in self.messages:
                    field_proto.type = _FDP.TYPE_MESSAGE
                    field_proto.type_name = f".{candidate}"
                    break
                if full in self.enums or candidate in self.enums:
                    field_proto.type = _FDP.TYPE_ENUM
                    field_proto.type_name = f".{candidate}"
                    break
            else:
                raise ProtoSchemaError(f"{self.file}: unknown type {wanted!r} in {scope}")


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def parse_proto(text: str, *, file: str) -> descriptor_pb2.FileDescriptorProto:
    """A ``FileDescriptorProto`` for a schema in profan's supported proto3 subset."""
    proto = descriptor_pb2.FileDescriptorProto()
    proto.name = f"profan/{file}"
    parser = _Parser(_tokens(text, file), file)
    parser.parse_file(proto)
    # Scopes were recorded without a leading dot; normalise so resolution is uniform.
    parser.messages = {name.lstrip(".") for name in parser.messages}
    parser.enums = {name.lstrip(".") for name in parser.enums}
    parser.resolve_types()
    return proto


@cache
def _pool() -> descriptor_pool.DescriptorPool:
    # A private pool: never collides with a _pb2 of the same package another library loaded.
    return descriptor_pool.DescriptorPool()


@cache
def load_schema(file_name: str) -> dict[str, type[Message]]:
    """Message classes (by full name) of a schema file shipped beside this module."""
    path = Path(__file__).with_name(file_name)
    proto = parse_proto(path.read_text(encoding="utf-8"), file=file_name)
    _pool().Add(proto)
    file_descriptor = _pool().FindFileByName(proto.name)
    classes: dict[str, type[Message]] = {}

    def collect(descriptors) -> None:  # type: ignore[no-untyped-def]
        for descriptor in descriptors:
            classes[descriptor.full_name] = message_factory.GetMessageClass(descriptor)
            collect(descriptor.nested_types)

    collect(file_descriptor.message_types_by_name.values())
    return classes

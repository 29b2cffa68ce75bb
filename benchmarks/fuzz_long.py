"""The long fuzz run of issue 26: profan's CLI on thousands of mutants of real inputs.

    nice -n 19 python benchmarks/fuzz_long.py [--corpus xplane hlo config] [--count N ...]
        [--seed S] [--jobs 2] [--timeout 60] [--work DIR] [--failures DIR] [--only INDEX]
        [--keep] [--tree DIR] [--summarize] [--reclassify]

Three corpora, every mutant made from a seed (``SEED:CORPUS:INDEX``), so a run is reproducible
and ``--corpus C --only I --keep`` re-makes and re-runs one mutant:

- ``xplane``: the small fixtures' ``.xplane.pb`` (matmul, mlp, collectives, gpu_kernels) and the
  corpus's ``mi300x_jax08_gemm.xplane.pb``, mutated with the protobuf's structure in hand
  (truncations, byte and bit flips, a length prefix made huge or short, a field number zeroed or
  changed, a wire type changed, a field duplicated or deleted with its parents' lengths fixed, a
  value set to an extreme, a span duplicated, a 10-byte varint inserted); each mutant alone in
  its own directory: ``profan report --format json --no-cache FILE``.
- ``hlo``: the fixtures' after-optimizations HLO texts and ``xla_programs``: token deletions and
  duplications, number changes (dims, ids, huge, negative), bracket damage, opcode swaps, names
  made to collide, lines deleted, duplicated or repeated, bytes that are not UTF-8, truncation;
  ``profan hlo FILE`` or ``profan hlo --json FILE``, and every 20th ``profan report
  fixtures/matmul/trace --hlo DIR --format json --no-cache`` with matmul's HLO mutated.
- ``config``: the README's profan.toml, the packaged chips.toml and kernels.toml, a per-machine
  baseline recorded by ``profan check --update-baseline`` and a JSON report used as a baseline:
  byte flips, truncation, other encodings (UTF-16, UTF-32, Latin-1, a BOM), deep nesting, type
  swaps, extreme numbers (NaN, inf, negative, 1e309; in JSON 5000 digits), lines deleted or
  duplicated, unknown keys, a 20 MB string; ``profan check fixtures/matmul --budget F``,
  ``profan report fixtures/matmul --chips F`` / ``--kernels F``, ``profan check fixtures/matmul
  --baseline F``.

Each command runs in its own session (its process group killed at ``--timeout``) under a small
measurer that forks it and reports its peak RSS from ``os.wait4`` (profan's and its reaped
children's largest; a timed-out one's VmHWM before the kill).  Expected of every mutant: exit
0, 2 (bad input: one stderr line, or an HLO syntax error's line, excerpt and caret) or, for
``check``, 1; never 3, a traceback, a timeout or a signal.  An exit 0 is compared with the
unmutated input's output under the same command: JSON leaf by leaf (identical, up to float
rounding, strings only, numbers, structure), text line by line.  Results go to
``WORK/results.jsonl`` (one line per mutant) and the tables to ``WORK/summary.md``; failures'
mutants are copied to ``--failures`` (default /tmp/fuzz-failures), the first of each kind shrunk
there (``.min``).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from profan.trace import wire

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
CORPUS = REPO.parent / "shared" / "corpus"  # the shared corpus beside the checkout
PROFAN = [sys.executable, "-m", "profan"]
# The checkout whose profan runs (``-m`` imports it from the working directory): this one, or
# with --tree another, e.g. ``git archive HEAD`` unpacked, when this one has edits in progress.
TREE = [REPO]
DEFAULT_COUNTS = {"xplane": 1000, "hlo": 1000, "config": 300}
# A mutant may ask for any amount of memory; this caps the whole run's address space so one
# cannot take the shared machine down (hitting it shows as MemoryError: exit 3 or a traceback).
ADDRESS_SPACE_CAP = 16 << 30


# -- protobuf structure of an XSpace ---------------------------------------------------------

# Field numbers of tsl/profiler/protobuf/xplane.proto: name and, for messages, their type.
XPLANE_SCHEMA: dict[str, dict[int, tuple[str, str | None]]] = {
    "XSpace": {1: ("planes", "XPlane"), 2: ("errors", None), 3: ("warnings", None),
               4: ("hostnames", None)},
    "XPlane": {1: ("id", None), 2: ("name", None), 3: ("lines", "XLine"),
               4: ("event_metadata", "EventMetadataEntry"),
               5: ("stat_metadata", "StatMetadataEntry"), 6: ("stats", "XStat")},
    "EventMetadataEntry": {1: ("key", None), 2: ("value", "XEventMetadata")},
    "StatMetadataEntry": {1: ("key", None), 2: ("value", "XStatMetadata")},
    "XLine": {1: ("id", None), 2: ("name", None), 3: ("timestamp_ns", None),
              4: ("events", "XEvent"), 9: ("duration_ps", None), 10: ("display_id", None),
              11: ("display_name", None)},
    "XEvent": {1: ("metadata_id", None), 2: ("offset_ps", None), 3: ("duration_ps", None),
               4: ("stats", "XStat"), 5: ("num_occurrences", None)},
    "XStat": {1: ("metadata_id", None), 2: ("double_value", None), 3: ("uint64_value", None),
              4: ("int64_value", None), 5: ("str_value", None), 6: ("bytes_value", None),
              7: ("ref_value", None)},
    "XEventMetadata": {1: ("id", None), 2: ("name", None), 3: ("metadata", None),
                       4: ("display_name", None), 5: ("stats", "XStat"), 6: ("child_id", None)},
    "XStatMetadata": {1: ("id", None), 2: ("name", None), 3: ("description", None)},
}  # fmt: skip


@dataclass(slots=True)
class WireField:
    """One field of a parsed message: where its tag, length and value lie in the file."""

    tag_start: int
    value_start: int  # after the tag (and the length, for wire type 2)
    end: int
    number: int
    wire_type: int
    name: str  # the schema's path without indices: planes.lines.events.duration_ps
    depth: int
    parent: WireField | None
    children: list[WireField] = field(default_factory=list)

    @property
    def length_start(self) -> int:
        """Where the length varint starts (wire type 2) or the value does."""
        return self.tag_start + len(encode_varint(self.number << 3 | self.wire_type))


def encode_varint(value: int) -> bytes:
    # negatives as protobuf writes them (ten bytes); profan's own encoder does the rest
    return wire.encode_varint(value & ((1 << 64) - 1))


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def parse_fields(
    data: bytes, start: int, end: int, message: str, parent: WireField | None, depth: int
) -> list[WireField]:
    """The fields of one (valid) message, recursing into the schema's submessages."""
    fields: list[WireField] = []
    pos = start
    schema = XPLANE_SCHEMA.get(message, {})
    prefix = f"{parent.name}." if parent else ""
    while pos < end:
        tag_start = pos
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, value_end = _read_varint(data, pos)
            value_start = pos
        elif wire_type == 1:
            value_start, value_end = pos, pos + 8
        elif wire_type == 5:
            value_start, value_end = pos, pos + 4
        elif wire_type == 2:
            length, value_start = _read_varint(data, pos)
            value_end = value_start + length
        else:
            raise ValueError(f"wire type {wire_type} at {tag_start}")
        name, submessage = schema.get(number, (f"field{number}", None))
        node = WireField(
            tag_start, value_start, value_end, number, wire_type, prefix + name, depth, parent
        )
        if wire_type == 2 and submessage:
            node.children = parse_fields(data, value_start, value_end, submessage, node, depth + 1)
        fields.append(node)
        pos = value_end
    return fields


@dataclass
class XplaneSource:
    """A real xplane, parsed once: every field, by depth, for choosing what to mutate."""

    path: Path
    data: bytes
    top: list[WireField]
    by_depth: dict[int, list[WireField]]

    @classmethod
    def read(cls, path: Path) -> XplaneSource:
        data = path.read_bytes()
        top = parse_fields(data, 0, len(data), "XSpace", None, 0)
        by_depth: dict[int, list[WireField]] = defaultdict(list)
        stack = list(top)
        while stack:
            node = stack.pop()
            by_depth[node.depth].append(node)
            stack.extend(node.children)
        for nodes in by_depth.values():
            nodes.sort(key=lambda node: node.tag_start)
        return cls(path, data, top, dict(by_depth))

    def pick(self, rng: random.Random, wanted: Callable[[WireField], bool]) -> WireField:
        """A field passing ``wanted``: a depth first (so planes and lines are hit as often as
        the far more numerous stats), then a field at that depth."""
        depths = [d for d, nodes in self.by_depth.items() if any(wanted(n) for n in nodes[:2000])]
        nodes = [n for n in self.by_depth[rng.choice(sorted(depths))] if wanted(n)]
        return rng.choice(nodes)

    def locate(self, offset: int) -> str:
        """What the byte at ``offset`` belongs to: the deepest field and tag, length or value."""
        nodes, found = self.top, None
        while nodes:
            starts = [n.tag_start for n in nodes]
            i = bisect.bisect_right(starts, offset) - 1
            if i < 0 or offset >= nodes[i].end:
                break
            found, nodes = nodes[i], nodes[i].children
        if found is None:
            return "outside any field"
        part = "tag" if offset < found.length_start else "value"
        if found.wire_type == 2 and found.length_start <= offset < found.value_start:
            part = "length"
        return f"{found.name}:{part}"


def replace_field(data: bytes, node: WireField, new: bytes) -> bytes:
    """``data`` with ``node``'s bytes (tag to end) replaced by ``new`` and every enclosing
    length fixed, so the result still frames: a consistent edit."""
    start, end = node.tag_start, node.end
    while node.parent is not None:
        parent = node.parent
        payload = data[parent.value_start : start] + new + data[end : parent.end]
        tag = encode_varint(parent.number << 3 | 2)
        new, start, end, node = (
            tag + encode_varint(len(payload)) + payload,
            parent.tag_start,
            parent.end,
            parent,
        )
    return data[:start] + new + data[end:]


HUGE_LENGTHS = [2**31 - 1, 2**32, 2**40, 2**63 - 1, 2**64 - 1]
EXTREME_VARINTS = [0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1, 2**64 - 1, -(2**63)]
EXTREME_DOUBLES = [math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0, 1e308, 5e-324]
EXTREME_STRINGS = [
    b"",
    b"\xff\xfe\x80 not utf-8",
    b"\x1b[31mred\n\r\x00",
    b"A" * 65536,
    "名前 µs".encode(),
]


def mutate_xplane(source: XplaneSource, rng: random.Random) -> tuple[bytes, str, str, str]:
    """One mutation of ``source``: (bytes, kind, description, what it hit)."""
    data = source.data
    kind = rng.choice(
        [
            "truncate",
            "truncate_at_field",
            "byte_flip",
            "bit_flip",
            "length_inflate",
            "length_deflate",
            "field_zero",
            "field_renumber",
            "wire_type_swap",
            "dup_field",
            "delete_field",
            "value_set",
            "dup_chunk",
            "varint_insert",
        ]
    )
    if kind == "truncate":
        at = rng.randrange(len(data))
        return data[:at], kind, f"cut at byte {at} of {len(data)}", source.locate(at)
    if kind == "truncate_at_field":
        node = source.pick(rng, lambda n: True)
        return data[: node.tag_start], kind, f"cut before field at {node.tag_start}", node.name
    if kind in ("byte_flip", "bit_flip"):
        out = bytearray(data)
        offsets = [
            rng.randrange(len(data)) for _ in range(rng.randint(1, 4) if kind == "byte_flip" else 1)
        ]
        for at in offsets:
            out[at] ^= rng.randint(1, 255) if kind == "byte_flip" else 1 << rng.randrange(8)
        where = ", ".join(f"{at} ({source.locate(at)})" for at in offsets)
        return bytes(out), kind, f"xor at {where}", source.locate(offsets[0])
    if kind in ("length_inflate", "length_deflate"):
        node = source.pick(rng, lambda n: n.wire_type == 2)
        old = node.end - node.value_start
        if kind == "length_inflate":
            new = rng.choice([*HUGE_LENGTHS, len(data), old + 1, old * 16 + 1])
        else:
            new = rng.choice([0, max(old - 1, 0), old // 2])
        # The raw varint only, the parents' lengths left as they were: framing breaks.
        out = data[: node.length_start] + encode_varint(new) + data[node.value_start :]
        return out, kind, f"length of field at {node.tag_start} {old} -> {new}", node.name
    if kind in ("field_zero", "field_renumber", "wire_type_swap"):
        node = source.pick(rng, lambda n: True)
        number, wire_type = node.number, node.wire_type
        if kind == "field_zero":
            number = 0
        elif kind == "field_renumber":
            number = rng.choice([n for n in range(1, 13) if n != node.number] + [536870911])
        else:
            wire_type = rng.choice([w for w in range(8) if w != node.wire_type])
        tag = encode_varint(number << 3 | wire_type)
        new = tag + data[node.length_start : node.end]
        out = replace_field(data, node, new)
        what = f"tag of field at {node.tag_start}: {node.number}/{node.wire_type} -> "
        return out, kind, what + f"{number}/{wire_type}", node.name
    if kind in ("dup_field", "delete_field"):
        node = source.pick(rng, lambda n: True)
        chunk = data[node.tag_start : node.end]
        out = replace_field(data, node, chunk * 2 if kind == "dup_field" else b"")
        return out, kind, f"field at {node.tag_start} ({len(chunk)} bytes)", node.name
    if kind == "value_set":
        node = source.pick(
            rng, lambda n: n.wire_type in (0, 1) or (n.wire_type == 2 and not n.children)
        )
        tag = data[node.tag_start : node.length_start]
        if node.wire_type == 0:
            value = rng.choice(EXTREME_VARINTS)
            new, shown = tag + encode_varint(value), str(value)
        elif node.wire_type == 1:
            value = rng.choice(EXTREME_DOUBLES)
            new, shown = tag + struct.pack("<d", value), repr(value)
        else:
            text = rng.choice(EXTREME_STRINGS)
            new, shown = tag + encode_varint(len(text)) + text, repr(text[:24])
        out = replace_field(data, node, new)
        return out, kind, f"value of field at {node.tag_start} -> {shown}", node.name
    if kind == "dup_chunk":
        at = rng.randrange(len(data))
        length = rng.choice([1, 2, 8, 64, 512, 4096])
        out = data[: at + length] + data[at : at + length] + data[at + length :]
        return out, kind, f"{length} bytes at {at} repeated", source.locate(at)
    at = rng.randrange(len(data))  # varint_insert
    out = data[:at] + b"\xff" * 9 + b"\x01" + data[at:]
    return out, kind, f"10-byte varint inserted at {at}", source.locate(at)


# -- HLO text ---------------------------------------------------------------------------------

OPCODES = [
    "dot",
    "convolution",
    "fusion",
    "custom-call",
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "while",
    "conditional",
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "reduce",
    "bitcast",
    "broadcast",
    "add",
    "sort",
    "scatter",
    "gather",
    "copy-start",
    "send",
    "rng",
    "not-an-opcode",
]
NUMBERS = [
    "0",
    "1",
    "-1",
    "-7",
    "999999999",
    "2147483648",
    "9223372036854775808",
    "1" + "0" * 40,
    "1" + "0" * 5000,
]
TOKEN = re.compile(r"[A-Za-z_%][\w.\-]*|\d+|\S")


def mutate_hlo(text: str, rng: random.Random) -> tuple[bytes, str, str, str]:
    """One mutation of an HLO text: (bytes, kind, description, the token or line hit)."""
    kind = rng.choice(
        [
            "token_delete",
            "token_duplicate",
            "number_change",
            "dim_change",
            "bracket_damage",
            "opcode_swap",
            "name_collision",
            "line_delete",
            "line_duplicate",
            "line_repeat_many",
            "not_utf8",
            "truncate",
        ]
    )
    line_of = lambda at: text.count("\n", 0, at) + 1  # noqa: E731
    if kind in ("token_delete", "token_duplicate"):
        token = rng.choice(list(TOKEN.finditer(text)))
        new = "" if kind == "token_delete" else token.group() + " " + token.group()
        out = text[: token.start()] + new + text[token.end() :]
        return (
            out.encode(),
            kind,
            f"{token.group()!r} at line {line_of(token.start())}",
            token.group()[:40],
        )
    if kind in ("number_change", "dim_change"):
        pattern = r"-?\d+" if kind == "number_change" else r"(?<=[\[,])\d+(?=[\],])"
        matches = list(re.finditer(pattern, text))
        if matches:
            number = rng.choice(matches)
            value = rng.choice(
                [*NUMBERS, str(int(number.group()) + 1), str(int(number.group()) * 1000)]
            )
            out = text[: number.start()] + value + text[number.end() :]
            return (
                out.encode(),
                kind,
                f"{number.group()} -> {value[:24]} at line {line_of(number.start())}",
                number.group(),
            )
        kind = "bracket_damage"
    if kind == "bracket_damage":
        brackets = [m.start() for m in re.finditer(r"[()\[\]{}]", text)]
        at = rng.choice(brackets)
        action = rng.choice(["delete", "duplicate", "swap"])
        new = {
            "delete": "",
            "duplicate": text[at] * 2,
            "swap": rng.choice([b for b in "()[]{}" if b != text[at]]),
        }[action]
        out = text[:at] + new + text[at + 1 :]
        return out.encode(), kind, f"{action} {text[at]!r} at line {line_of(at)}", text[at]
    if kind == "opcode_swap":
        calls = list(re.finditer(r"(?<= )([a-z][a-z0-9\-]*)(?=\()", text))
        call = rng.choice(calls)
        new = rng.choice([op for op in OPCODES if op != call.group()])
        out = text[: call.start()] + new + text[call.end() :]
        return (
            out.encode(),
            kind,
            f"{call.group()} -> {new} at line {line_of(call.start())}",
            call.group(),
        )
    if kind == "name_collision":
        names = re.findall(r"^\s*(?:ROOT )?(%?[\w.\-]+) = ", text, flags=re.M)
        if len(set(names)) > 1:
            old, new = rng.sample(sorted(set(names)), 2)
            out = re.sub(rf"(?m)^(\s*(?:ROOT )?){re.escape(old)} = ", rf"\g<1>{new} = ", text)
            return out.encode(), kind, f"instruction {old} renamed {new}", old
        kind = "line_delete"
    lines = text.splitlines(keepends=True)
    if kind in ("line_delete", "line_duplicate", "line_repeat_many"):
        at = rng.randrange(len(lines))
        times = {"line_delete": 0, "line_duplicate": 2, "line_repeat_many": 20000}[kind]
        out = "".join(lines[:at] + [lines[at]] * times + lines[at + 1 :])
        return out.encode(), kind, f"line {at + 1} x{times}", lines[at].strip()[:40]
    raw = text.encode()
    if kind == "not_utf8":
        at = rng.randrange(len(raw))
        junk = rng.choice([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80", b"\xef\xbb\xbf"])
        return raw[:at] + junk + raw[at:], kind, f"{junk!r} inserted at byte {at}", repr(junk)
    at = rng.randrange(len(raw))  # truncate
    return raw[:at], kind, f"cut at byte {at} of {len(raw)}", f"line {line_of(at)}"


# -- configuration files ----------------------------------------------------------------------

TOML_NUMBERS = [
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "-0.0",
    "1e309",
    "5e-324",
    "99999999999999999999",
    "0x7fffffffffffffff",
    "-9223372036854775808",
]
TOML_TYPES = ['"text"', "[1, 2]", "{ a = 1 }", "true", "1979-05-27T07:32:00Z", "[]", '""']
JSON_NUMBERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "-1",
    "0",
    "-0.0",
    "1e999",
    "1e-400",
    "99999999999999999999",
    "1" + "0" * 5000,
]
JSON_TYPES = ['"many"', "[]", "{}", "null", "true", "[1, 2]", '{"a": 1}']
ASSIGNMENT = re.compile(r"(?m)^(\s*[\w\-\".]+\s*=\s*)(.*)$")


def _json_leaves(value: object, path: tuple = ()) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _json_leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_leaves(item, (*path, index))
    if path:
        yield path


def _nested(depth: int, is_json: bool, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "[" * depth + "1" + "]" * depth
    opener = '{"a": ' if is_json else "{ a = "
    return opener * depth + "1" + "}" * depth


def mutate_config(raw: bytes, is_json: bool, rng: random.Random) -> tuple[bytes, str, str, str]:
    """One mutation of a TOML or JSON file: (bytes, kind, description, the key or part hit)."""
    text = raw.decode()
    kind = rng.choice(
        [
            "byte_flip",
            "truncate",
            "encoding",
            "deep_nesting",
            "type_swap",
            "number_swap",
            "line_delete",
            "line_duplicate",
            "unknown_key",
            "huge_string",
        ]
    )
    if kind == "byte_flip":
        out = bytearray(raw)
        offsets = [rng.randrange(len(raw)) for _ in range(rng.randint(1, 3))]
        for at in offsets:
            out[at] ^= rng.randint(1, 255)
        return bytes(out), kind, f"xor at {offsets}", "bytes"
    if kind == "truncate":
        at = rng.randrange(len(raw))
        return raw[:at], kind, f"cut at byte {at} of {len(raw)}", "tail"
    if kind == "encoding":
        codec = rng.choice(["utf-16", "utf-16-le", "utf-32", "utf-8-sig", "latin-1"])
        if codec == "latin-1":  # a character Latin-1 and UTF-8 write differently
            text = text.replace('"', '"µ', 1)
        return text.encode(codec, errors="replace"), kind, f"encoded {codec}", codec
    if kind in ("deep_nesting", "type_swap", "number_swap", "huge_string"):
        if kind == "deep_nesting":
            depth = rng.choice([64, 1000, 100000])
            value, shown = _nested(depth, is_json, rng), f"nested {depth} deep"
        elif kind == "type_swap":
            value = rng.choice(JSON_TYPES if is_json else TOML_TYPES)
            shown = value
        elif kind == "number_swap":
            value = rng.choice(JSON_NUMBERS if is_json else TOML_NUMBERS)
            shown = value[:24]
        else:
            value, shown = '"' + "x" * (20 << 20) + '"', "a 20 MB string"
        if is_json:
            document = json.loads(text)
            path = rng.choice(list(_json_leaves(document)))
            holder = document
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = "\x00FUZZ\x00"
            out = json.dumps(document, indent=1).replace('"\\u0000FUZZ\\u0000"', value)
            where = ".".join(str(key) if isinstance(key, str) else "[]" for key in path)
        else:
            assignment = rng.choice(list(ASSIGNMENT.finditer(text)))
            out = text[: assignment.start(2)] + value + text[assignment.end(2) :]
            where = assignment.group(1).strip(" =")
        return out.encode(), kind, f"{where} = {shown}", where
    lines = text.splitlines(keepends=True)
    at = rng.randrange(len(lines))
    if kind == "unknown_key":
        new = '"fuzz_unknown": 1,\n' if is_json else "fuzz_unknown = 1\n"
        if is_json:  # inside the top object, where an extra key is still valid JSON
            at = 1
        out = "".join([*lines[:at], new, *lines[at:]])
        return out.encode(), kind, f"line inserted before {at + 1}", "unknown key"
    times = 0 if kind == "line_delete" else 2
    out = "".join(lines[:at] + [lines[at]] * times + lines[at + 1 :])
    return out.encode(), kind, f"line {at + 1} x{times}", lines[at].strip()[:40]


# -- the cases --------------------------------------------------------------------------------


@dataclass
class Case:
    """One mutant and the command that reads it."""

    corpus: str
    index: int
    seed: str
    group: str  # the command's family, e.g. "hlo --json" or "check --budget"
    source: str  # relative to the repository (or the corpus)
    name: str  # the mutant's file name in its directory
    command: list[str]  # {FILE} and {DIR} stand for the mutant's path and directory
    compare: str  # "json" or "text": how an exit 0 is compared with the unmutated output
    kind: str = ""
    mutation: str = ""
    target: str = ""


@dataclass
class Outcome:
    """What a case's command did."""

    rc: int
    seconds: float
    peak_rss_kib: int
    timed_out: bool
    stdout: str
    stderr: str


class Corpora:
    """The real inputs, read once, and the mutants made from them by seed."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.xplanes = [
            XplaneSource.read(path)
            for pattern in ("matmul", "mlp", "collectives", "gpu_kernels")
            for path in sorted((FIXTURES / pattern / "trace").rglob("*.xplane.pb"))
        ]
        gemm = CORPUS / "traces" / "mi300x_jax08_gemm.xplane.pb"
        if gemm.exists():
            self.xplanes.append(XplaneSource.read(gemm))
        texts: dict[str, Path] = {}
        for pattern in ("*/hlo/*after_optimizations.txt", "xla_programs/*/hlo/*.txt"):
            for path in sorted(FIXTURES.glob(pattern)):
                texts.setdefault(path.read_text(), path)  # the same text once
        by_size = sorted(texts.items(), key=lambda item: len(item[0]))
        self.small_hlo = [(text, path) for text, path in by_size if len(text) <= 20_000]
        self.large_hlo = [(text, path) for text, path in by_size if len(text) > 20_000]
        (matmul_hlo,) = (FIXTURES / "matmul" / "hlo").glob("*after_optimizations.txt")
        self.matmul_hlo = matmul_hlo
        self.configs = self._configs()

    def _configs(self) -> dict[str, list[tuple[str, bytes]]]:
        """Budgets, chips, kernels and baselines to mutate, each under a name."""
        folder = self.work / "configs"
        folder.mkdir(parents=True, exist_ok=True)
        readme = (REPO / "README.md").read_text()
        (example,) = [
            block
            for block in re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
            if block.startswith("[budget]")
        ]
        small = "[budget]\nstep_time_s = 1.0\n[baseline]\ntime_gate = true\n"
        budget = folder / "profan.toml"
        budget.write_text(small)
        baseline = folder / "baseline.json"
        matmul = str(FIXTURES / "matmul")
        run_profan(
            [
                "check",
                matmul,
                "--budget",
                str(budget),
                "--baseline",
                str(baseline),
                "--update-baseline",
            ],
            self.work,
        )
        report = run_profan(["report", matmul, "--format", "json"], self.work).stdout
        package = REPO / "profan" / "data"
        return {
            "budget": [("README profan.toml", example.encode()), ("small budget", small.encode())],
            "chips": [("profan/data/chips.toml", (package / "chips.toml").read_bytes())],
            "kernels": [("profan/data/kernels.toml", (package / "kernels.toml").read_bytes())],
            "baseline": [
                ("baseline file (check --update-baseline)", baseline.read_bytes()),
                ("JSON report of fixtures/matmul", report.encode()),
            ],
        }

    def make(self, corpus: str, index: int, seed: int) -> tuple[Case, bytes]:
        key = f"{seed}:{corpus}:{index}"
        rng = random.Random(key)
        if corpus == "xplane":
            source = self.xplanes[index % len(self.xplanes)]
            data, kind, mutation, target = mutate_xplane(source, rng)
            case = Case(
                corpus,
                index,
                key,
                "report --format json --no-cache",
                _shown(source.path),
                source.path.name,
                ["report", "--format", "json", "--no-cache", "{FILE}"],
                "json",
            )
        elif corpus == "hlo":
            if index % 20 == 19:
                text, path = self.matmul_hlo.read_text(), self.matmul_hlo
                command = [
                    "report",
                    "fixtures/matmul/trace",
                    "--hlo",
                    "{DIR}",
                    "--format",
                    "json",
                    "--no-cache",
                ]
                group, compare = "report --hlo DIR (matmul)", "json"
            else:
                pool = self.small_hlo if rng.random() < 0.85 else self.large_hlo
                text, path = rng.choice(pool)
                as_json = index % 2 == 1
                command = ["hlo", "--json", "{FILE}"] if as_json else ["hlo", "{FILE}"]
                group, compare = ("hlo --json", "json") if as_json else ("hlo", "text")
            data, kind, mutation, target = mutate_hlo(text, rng)
            case = Case(corpus, index, key, group, _shown(path), path.name, command, compare)
        else:
            role = ["budget", "chips", "kernels", "baseline"][index % 4]
            name, raw = rng.choice(self.configs[role])
            data, kind, mutation, target = mutate_config(raw, role == "baseline", rng)
            matmul = "fixtures/matmul"
            command, group, compare, file_name = {
                "budget": (
                    ["check", matmul, "--budget", "{FILE}"],
                    "check --budget",
                    "text",
                    "profan.toml",
                ),
                "chips": (
                    ["report", matmul, "--format", "json", "--chips", "{FILE}"],
                    "report --chips",
                    "json",
                    "chips.toml",
                ),
                "kernels": (
                    ["report", matmul, "--format", "json", "--kernels", "{FILE}"],
                    "report --kernels",
                    "json",
                    "kernels.toml",
                ),
                "baseline": (
                    ["check", matmul, "--baseline", "{FILE}"],
                    "check --baseline",
                    "text",
                    "baseline.json",
                ),
            }[role]
            case = Case(corpus, index, key, group, name, file_name, command, compare)
        case.kind, case.mutation, case.target = kind, mutation, target
        return case, data

    def original(self, case: Case) -> bytes:
        """The unmutated input of ``case``."""
        if case.corpus == "xplane":
            return next(s.data for s in self.xplanes if _shown(s.path) == case.source)
        if case.corpus == "hlo":
            return (REPO / case.source).read_bytes()
        for items in self.configs.values():
            for name, raw in items:
                if name == case.source:
                    return raw
        raise KeyError(case.source)


def _shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository or to the shared corpus."""
    for root, label in ((REPO, ""), (CORPUS.parent, "../shared/")):
        if path.is_relative_to(root):
            return label + str(path.relative_to(root))
    return path.name


# -- running ----------------------------------------------------------------------------------


# The command runs under a small interpreter that forks it and reports its peak RSS: a process
# this one forked directly would count this one's RSS at the fork (Linux keeps the high-water
# mark of the image that exec replaced), so profan's own peak is a grandchild's.
_MEASURER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as sink:
    sink.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def _high_water_kib(measurer: int) -> int:
    """The largest VmHWM of the measurer's children, read before a timed-out run is killed."""
    peak = 0
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{measurer}/task/{measurer}/children").read_text().split()
        for child in children:
            status = Path(f"/proc/{child}/status").read_text()
            found = re.search(r"VmHWM:\s+(\d+) kB", status)
            peak = max(peak, int(found.group(1)) if found else 0)
    return peak


def run_profan(arguments: list[str], cache_root: Path, timeout: float = 60.0) -> Outcome:
    """profan with ``arguments`` in its own session, killed at ``timeout``, and its peak RSS."""
    env = {**os.environ, "PROFAN_CACHE_DIR": str(cache_root / "cache"), "COLUMNS": "120"}
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile(mode="r") as rss,
    ):
        started = time.monotonic()
        child = subprocess.Popen(
            [sys.executable, "-c", _MEASURER, rss.name, *PROFAN, *arguments],
            cwd=TREE[0],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out, pause, peak = False, 0.01, 0
        while True:
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > timeout:
                timed_out, peak = True, _high_water_kib(child.pid)
                os.killpg(child.pid, signal.SIGKILL)
                _, status, _ = os.wait4(child.pid, 0)
                break
            time.sleep(pause)
            pause = min(pause * 1.5, 0.2)
        seconds = time.monotonic() - started
        with_group_gone(child.pid)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        if child.returncode > 128:  # the measurer passes a signal on as 128 + its number
            child.returncode = 128 - child.returncode
        out.seek(0)
        err.seek(0)
        return Outcome(
            child.returncode,
            seconds,
            int(rss.read() or 0) or peak,
            timed_out,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )


def with_group_gone(group: int) -> None:
    """Kill what the command left running in its session (a reader it forked)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def run_case(case: Case, data: bytes, work: Path, timeout: float, keep: bool) -> Outcome:
    folder = Path(tempfile.mkdtemp(prefix=f"{case.corpus}-{case.index}-", dir=work / "mutants"))
    target = folder / case.name
    target.write_bytes(data)
    arguments = [
        a.replace("{FILE}", str(target)).replace("{DIR}", str(folder)) for a in case.command
    ]
    outcome = run_profan(arguments, work, timeout)
    outcome.stdout = outcome.stdout.replace(str(folder), "<DIR>")
    outcome.stderr = outcome.stderr.replace(str(folder), "<DIR>")
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


# -- judging ----------------------------------------------------------------------------------


def failure_of(case: Case, outcome: Outcome) -> str | None:
    """Why an outcome breaks the contract, or None."""
    if outcome.timed_out:
        return "hang"
    if "Traceback" in outcome.stderr:
        return "traceback"
    if outcome.rc == 3:
        return "exit 3"
    allowed = {0, 1, 2} if case.group.startswith("check") else {0, 2}
    if outcome.rc not in allowed:
        return f"exit {outcome.rc}"
    if outcome.rc == 2 and not _one_error(outcome.stderr):
        return "exit 2 not one line"
    if outcome.rc == 0 and case.compare == "json" and _non_finite(outcome.stdout):
        return "non-finite number in JSON"
    return None


def _non_finite(output: str) -> bool:
    """Whether a JSON output holds NaN or an infinity as a number (not valid JSON)."""
    found: list[str] = []
    try:
        json.loads(output, parse_constant=found.append)
    except ValueError:
        return False  # not JSON at all: the comparison says so
    return bool(found)


def _one_error(stderr: str) -> bool:
    """One ``profan: error:`` line, or that line with the HLO parser's excerpt of the bad line
    and a caret under the column (its syntax errors' designed form)."""
    lines = stderr.strip("\n").splitlines()
    if not lines or not lines[0].startswith("profan"):
        return False
    return len(lines) == 1 or (len(lines) == 3 and lines[2].strip() == "^")


def signature(reason: str, stderr: str) -> str:
    """A failure told apart from others: its reason and the error line, numbers and paths out
    (a traceback: its last line)."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    line = next((x for x in lines if "error" in x.lower()), lines[-1] if lines else "")
    if reason == "traceback":
        line = lines[-1]
    return reason + ": " + re.sub(r"\d+", "N", re.sub(r"\S*<DIR>\S*", "FILE", line))[:160]


def json_differences(old: object, new: object, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(path, kind, detail) of each leaf that differs; list indices shown as []."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() - new.keys():
            yield f"{path}.{key}", "structure", "key gone"
        for key in new.keys() - old.keys():
            yield f"{path}.{key}", "structure", "key added"
        for key in old.keys() & new.keys():
            yield from json_differences(old[key], new[key], f"{path}.{key}")
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            yield f"{path}[]", "structure", f"{len(old)} -> {len(new)} items"
        for a, b in zip(old, new, strict=False):
            yield from json_differences(a, b, f"{path}[]")
    elif old != new and not (old != old and new != new):  # NaN == NaN here
        numbers = {type(old), type(new)} <= {int, float}
        if type(old) is not type(new) and not numbers:
            kind = "structure"
        elif isinstance(old, str):
            kind = "string"
        elif numbers and math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-15):
            kind = "rounding"  # the same sum added in another order
        else:
            kind = "number"
        yield path, kind, f"{_short(old)} -> {_short(new)}"


def _short(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def classify(case: Case, output: str, reference: Outcome) -> tuple[str, list[str]]:
    """An exit 0 (or check's 1) against the unmutated input's: a class and a few differences."""
    if reference.rc not in (0, 1):
        return f"unmutated exit {reference.rc}", []
    if output == reference.stdout:
        return "identical", []
    if case.compare == "text":
        old, new = reference.stdout.splitlines(), output.splitlines()
        changed = [
            f"{a.strip()[:70]!r} -> {b.strip()[:70]!r}"
            for a, b in zip(old, new, strict=False)
            if a != b
        ]
        if len(old) != len(new):
            changed.append(f"{len(old)} -> {len(new)} lines")
        return "text changed", changed[:3]
    try:
        old_json, new_json = json.loads(reference.stdout), json.loads(output)
    except ValueError:
        return "output not JSON", []
    differences = list(json_differences(old_json, new_json))
    kinds = {kind for _, kind, _ in differences}
    if kinds == {"rounding"}:
        return "identical up to float rounding", [f"{p}: {d}" for p, _, d in differences[:2]]
    differences = [item for item in differences if item[1] != "rounding"]
    label = (
        "structure changed"
        if "structure" in kinds
        else "numbers changed"
        if "number" in kinds
        else "strings only changed"
        if kinds
        else "identical (reordered keys)"
    )
    return label, [f"{path}: {detail}" for path, _, detail in differences[:4]]


# -- shrinking --------------------------------------------------------------------------------


def emit(data: bytes, nodes: list[WireField], removed: set[int]) -> bytes:
    """The message ``nodes`` came from without the ``removed`` fields (by id), every length
    written again: what stays still frames as it did."""
    out = bytearray()
    for node in nodes:
        if id(node) in removed:
            continue
        if node.children:
            payload = emit(data, node.children, removed)
            out += data[node.tag_start : node.length_start] + encode_varint(len(payload))
            out += payload
        else:
            out += data[node.tag_start : node.end]
    return bytes(out)


def shrink(case: Case, data: bytes, wanted: str, work: Path, timeout: float, tries: int) -> bytes:
    """A smaller input with the same failure (``wanted``, a signature), at most ``tries`` runs.

    An xplane that still parses loses whole fields, planes first, then lines and metadata,
    events, stats (its lengths rewritten, so it frames as the mutant did); one that does not
    parse, 4 KiB spans; a text, lines."""

    def fails(candidate: bytes) -> bool:
        if not candidate:
            return False
        outcome = run_case(case, candidate, work, timeout, False)
        reason = failure_of(case, outcome)
        return bool(reason) and signature(reason, outcome.stderr) == wanted

    def reduce(units: list, build: Callable[[list], bytes], budget: int) -> tuple[list, int]:
        """Drop chunks of ``units`` (halves, then quarters...) while the failure stays."""
        chunk = max(len(units) // 2, 1)
        while chunk >= 1 and budget > 0:
            start, removed_any = 0, False
            while start < len(units) and budget > 0:
                trial = units[:start] + units[start + chunk :]
                budget -= 1
                if fails(build(trial)):
                    units, removed_any = trial, True
                else:
                    start += chunk
            if not removed_any:
                chunk //= 2
        return units, budget

    if case.corpus == "xplane":
        try:
            top = parse_fields(data, 0, len(data), "XSpace", None, 0)
        except (IndexError, ValueError):
            top = []
        if top and emit(data, top, set()) == data:
            removed: set[int] = set()
            level = top
            while level and tries > 0:
                ids = [id(node) for node in level]
                kept, tries = reduce(
                    ids, lambda keep: emit(data, top, removed | (set(ids) - set(keep))), tries
                )
                removed |= set(ids) - set(kept)
                level = [c for node in level if id(node) not in removed for c in node.children]
            return emit(data, top, removed)
        spans = [data[i : i + 4096] for i in range(0, len(data), 4096)]
        return b"".join(reduce(spans, b"".join, tries)[0])
    return b"".join(reduce(data.splitlines(keepends=True), b"".join, tries)[0])


# -- the run ----------------------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)] if ordered else 0.0


def _raised_at(traceback: str) -> str:
    """The innermost frame of profan's code in a traceback, and the exception."""
    frames = re.findall(r'File "[^"]*?(profan/[^"]+)", line (\d+), in (\S+)', traceback)
    lines = traceback.strip().splitlines()
    if not frames or not lines:
        return ""
    path, line, function = frames[-1]
    raised = next((x for x in lines[1:] if not x.startswith(" ")), lines[-1])
    return f"{path}:{line} {function}: {raised[:120]}"


def summarize(rows: list[dict]) -> str:
    """The tables: exit codes, time and RSS per corpus and command; failures; exit 0s."""
    lines = [
        "| corpus | command | mutants | exit 0 | exit 1 | exit 2 | exit 3 | other | "
        "traceback | hang | time p50 / p95 / max (s) | peak RSS p50 / max (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        groups[(row["corpus"], row["group"])].append(row)
        groups[(row["corpus"], "all")].append(row)
    for (corpus, group), items in sorted(
        groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])
    ):
        codes = Counter(row["rc"] for row in items)
        other = sum(n for rc, n in codes.items() if rc not in (0, 1, 2, 3))
        times = [row["seconds"] for row in items]
        # RSS only where measured in profan's own process (rows of older runs counted the fork)
        rss = [row["peak_rss_kib"] / 1024 for row in items if row.get("rss_of")] or [math.nan]
        name = f"**{corpus}**" if group == "all" else corpus
        lines.append(
            f"| {name} | {'**all**' if group == 'all' else group} | {len(items)} | {codes[0]} | "
            f"{codes[1]} | {codes[2]} | {codes[3]} | {other} | "
            f"{sum(row['failure'] == 'traceback' for row in items)} | "
            f"{sum(row['timed_out'] for row in items)} | "
            f"{percentile(times, 0.5):.2f} / {percentile(times, 0.95):.2f} / {max(times):.2f} | "
            f"{statistics.median(rss):.0f} / {max(rss):.0f} |"
        )
    failures = [row for row in rows if row["failure"]]
    lines += ["", f"Failures: {len(failures)}, by kind (count, kind, examples):", ""]
    by_signature: dict[str, list[dict]] = defaultdict(list)
    for row in failures:
        by_signature[row["signature"]].append(row)
    for key, items in sorted(by_signature.items(), key=lambda kv: -len(kv[1])):
        first = items[0]
        where = _raised_at(first.get("debug_stderr", ""))
        lines.append(
            f"- {len(items)} x `{key}`{f' (raised at {where})' if where else ''}; e.g. "
            + "; ".join(
                f"{row['corpus']} #{row['index']} ({row['source']}, {row['kind']}: "
                f"{row['mutation'][:120]})"
                for row in items[:3]
            )
        )
    zeros = [row for row in rows if row["class"]]
    lines += [
        "",
        "Exit 0 (check: 0 or 1) against the unmutated output (corpus, command, class: count):",
        "",
    ]
    for (corpus, group, label), n in sorted(
        Counter((row["corpus"], row["group"], row["class"]) for row in zeros).items()
    ):
        lines.append(f"- {corpus} / {group} / {label}: {n}")
    lines += ["", "What the changed exit 0s hit (corpus, mutation kind, target, class: count):", ""]
    for (corpus, kind, target, label), n in sorted(
        Counter(
            (row["corpus"], row["kind"], row["target"], row["class"])
            for row in zeros
            if not row["class"].startswith("identical")
        ).items(),
        key=lambda kv: -kv[1],
    ):
        lines.append(f"- {corpus} / {kind} / {target} / {label}: {n}")
    lines += ["", "A sample of changed exit 0s:", ""]
    changed = [row for row in zeros if not row["class"].startswith("identical")]
    for row in random.Random(0).sample(changed, min(len(changed), 25)):
        lines.append(
            f"- {row['corpus']} #{row['index']} {row['kind']} ({row['mutation']}; "
            f"{row['target']}): {row['class']}: {'; '.join(row['differences'])[:300]}"
        )
    return "\n".join(lines) + "\n"


def latest_rows(results: Path) -> list[dict]:
    """The rows of a results file, the last one of each mutant (a re-run replaces a row)."""
    rows = {}
    for line in results.read_text().splitlines():
        row = json.loads(line)
        rows[(row["corpus"], row["index"])] = row
    return list(rows.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", nargs="+", choices=list(DEFAULT_COUNTS), default=list(DEFAULT_COUNTS)
    )
    parser.add_argument("--count", nargs="+", type=int, help="mutants per corpus, in order")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "fuzz-long")
    parser.add_argument(
        "--failures", type=Path, default=Path(tempfile.gettempdir()) / "fuzz-failures"
    )
    parser.add_argument("--only", type=int, nargs="+", help="re-run these indices of --corpus")
    parser.add_argument("--keep", action="store_true", help="keep the mutants' directories")
    parser.add_argument("--shrink-tries", type=int, default=40)
    parser.add_argument("--tree", type=Path, help="run the profan of this checkout instead")
    parser.add_argument("--summarize", action="store_true", help="tables of WORK/results.jsonl")
    parser.add_argument(
        "--reclassify",
        action="store_true",
        help="run again the mutants of WORK/results.jsonl whose exit 0 differed (the last row of"
        " each mutant counts)",
    )
    arguments = parser.parse_args()
    work: Path = arguments.work
    if arguments.tree:
        TREE[0] = arguments.tree.resolve()
    results = work / "results.jsonl"
    if arguments.summarize:
        print(summarize(latest_rows(results)))
        return 0
    os.nice(max(0, 19 - os.nice(0)))  # never compete with other work on the machine
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))
    (work / "mutants").mkdir(parents=True, exist_ok=True)
    corpora = Corpora(work)
    counts = dict(zip(arguments.corpus, arguments.count or [], strict=False))
    cases = [
        (corpus, index)
        for corpus in arguments.corpus
        for index in (arguments.only or range(counts.get(corpus, DEFAULT_COUNTS[corpus])))
    ]
    if arguments.reclassify:
        cases = [
            (row["corpus"], row["index"])
            for row in latest_rows(results)
            if row["class"] and not row["class"].startswith("identical")
        ]
    references: dict[tuple, Outcome] = {}
    reference_lock = threading.Lock()
    write_lock = threading.Lock()
    shrunk: set[str] = set()

    def reference(case: Case) -> Outcome:
        """The unmutated input under the same command (run once per source and command)."""
        key = (case.source, tuple(case.command), case.name)
        with reference_lock:
            if key not in references:
                references[key] = run_case(case, corpora.original(case), work, 600, False)
            return references[key]

    def one(corpus: str, index: int) -> dict:
        case, data = corpora.make(corpus, index, arguments.seed)
        outcome = run_case(case, data, work, arguments.timeout, arguments.keep)
        reason = failure_of(case, outcome)
        label, differences = "", []
        if outcome.rc in (0, 1) and not reason:
            label, differences = classify(case, outcome.stdout, reference(case))
        stderr_lines = outcome.stderr.strip().splitlines()
        row = {
            **asdict(case),
            "rc": outcome.rc,
            "seconds": round(outcome.seconds, 3),
            "peak_rss_kib": outcome.peak_rss_kib,
            "rss_of": "profan",  # not the fork of this process (see _MEASURER)
            "timed_out": outcome.timed_out,
            "failure": reason,
            "stderr_line": stderr_lines[-1][:300] if stderr_lines else "",
            "class": label,
            "differences": differences,
            "size": len(data),
        }
        if reason:
            row["stderr"] = outcome.stderr[-4000:]
            row["signature"] = signature(reason, outcome.stderr)
            if outcome.rc == 3:  # where: the same command again with --debug
                debug = Case(**{**asdict(case), "command": ["--debug", *case.command]})
                row["debug_stderr"] = run_case(debug, data, work, arguments.timeout, False).stderr[
                    -3000:
                ]
            saved = arguments.failures / f"{corpus}-{index}-{case.name}"
            saved.parent.mkdir(parents=True, exist_ok=True)
            saved.write_bytes(data)
            with write_lock:  # the first of each kind of failure is shrunk, not every one
                first = row["signature"] not in shrunk
                shrunk.add(row["signature"])
            if first and reason != "hang" and arguments.shrink_tries:
                smaller = shrink(
                    case, data, row["signature"], work, arguments.timeout, arguments.shrink_tries
                )
                if len(smaller) < len(data):
                    saved.with_name(f"{saved.name}.min").write_bytes(smaller)
                    row["shrunk_to"] = len(smaller)
        with write_lock:
            with results.open("a") as sink:
                sink.write(json.dumps(row) + "\n")
            done = sum(1 for _ in results.open())
            mark = f"{reason}: {row['stderr_line'][:100]}" if reason else f"exit {outcome.rc}"
            print(
                f"[{done}] {corpus} #{index} {case.kind}: {mark} ({outcome.seconds:.1f} s)",
                flush=True,
            )
        return row

    with ThreadPoolExecutor(max_workers=min(arguments.jobs, 2)) as pool:
        list(pool.map(lambda item: one(*item), cases))
    summary = summarize(latest_rows(results))
    (work / "summary.md").write_text(summary)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())

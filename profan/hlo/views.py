"""Typed views of raw attribute text: metadata, called computations, backend config, sources.

``Instruction.attributes`` keeps each value as printed; these functions decode the few that
analyses need, on demand (the model memoises the costlier ones).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from profan.errors import HloSyntaxError
from profan.hlo.devices import (
    Sharding,
    decode_replica_groups,
    decode_sharding,
    decode_source_target_pairs,
)
from profan.hlo.model import Metadata, SourceLocation
from profan.hlo.opcodes import GROUPED_COLLECTIVE_KINDS, collective_kind
from profan.hlo.text import unquote

if TYPE_CHECKING:
    from profan.hlo.model import Instruction, Module

_FIELD = re.compile(r'([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^\s{}]+)')
_NAME = re.compile(r"%?([A-Za-z_][\w.\-]*)")
_INT = re.compile(r"-?\d+")

# Attributes that name the computations an instruction calls, in XLA's printing order.
CALLED_COMPUTATION_ATTRIBUTES = (
    "calls",
    "to_apply",
    "condition",
    "body",
    "select",
    "scatter",
    "true_computation",
    "false_computation",
    "branch_computations",
    "called_computations",
    "comparator",
)

_METADATA_INT_FIELDS = {
    "source_line",
    "source_end_line",
    "source_column",
    "source_end_column",
    "stack_frame_id",
}
_METADATA_STR_FIELDS = {"op_type", "op_name", "source_file"}


def decode_metadata(text: str | None) -> Metadata:
    """``{op_type="dot" op_name="..." source_file="x.py" source_line=3 stack_frame_id=2}``."""
    if not text:
        return Metadata()
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    known: dict[str, Any] = {}
    other: list[tuple[str, str]] = []
    for key, value in _FIELD.findall(body):
        if key in _METADATA_STR_FIELDS:
            known[key] = unquote(value)
        elif key in _METADATA_INT_FIELDS:
            try:
                known[key] = int(value)
            except ValueError:
                other.append((key, value))
        else:
            other.append((key, unquote(value) if value.startswith('"') else value))
    return Metadata(**known, other=tuple(other))


def metadata(instruction: Instruction) -> Metadata:
    """The instruction's ``metadata={...}`` decoded (every field ``None`` when absent);
    memoised on the instruction."""
    found = instruction._metadata
    if found is None:
        found = decode_metadata(instruction.attributes.get("metadata"))
        instruction._metadata = found
    return found


def computation_names(value: str) -> list[str]:
    """``%a`` or ``{%a, %b}`` -> ``["a", "b"]``."""
    text = value.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    return [match.group(1) for match in _NAME.finditer(text)]


def called_computations(instruction: Instruction) -> list[str]:
    """Names of every computation the instruction calls (fusion body, reducer, loop, branches…)."""
    names: list[str] = []
    for key in CALLED_COMPUTATION_ATTRIBUTES:
        value = instruction.attributes.get(key)
        if value:
            for name in computation_names(value):
                if name not in names:
                    names.append(name)
    return names


def control_predecessors(instruction: Instruction) -> list[str]:
    """Names in ``control-predecessors={%a, %b}``."""
    value = instruction.attributes.get("control-predecessors")
    return computation_names(value) if value else []


def _config_text(raw: str | None) -> str | None:
    """The backend config's text with the quotes of the quoted form removed."""
    if not raw:
        return None
    text = raw.strip()
    return unquote(text) if text.startswith('"') else text


# A comma before a closing brace or bracket: XLA's lexer accepts it in a bare JSON backend
# config (it only balances the braces), JSON does not.
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _decode_json(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        try:
            decoded = json.loads(_TRAILING_COMMA.sub(r"\1", text))
        except ValueError:
            return None
    return decoded if isinstance(decoded, dict) else None


def backend_config(instruction: Instruction) -> dict[str, Any] | None:
    """The instruction's backend config as a dict, whichever form XLA printed: JSON (quoted or
    bare, most ops) or an MLIR attribute dictionary (typed-FFI custom calls such as
    TransformerEngine's ``te_*_ffi`` and Pallas/Triton calls: ``{attn_heads = 16 : i64, ...}``).
    ``None`` when absent or in neither form.  Memoised on the instruction."""
    found = instruction._backend_config
    if found is not False:
        return found  # type: ignore[return-value]
    text = _config_text(instruction.attributes.get("backend_config"))
    decoded = None
    if text is not None:
        decoded = _decode_json(text)
        if decoded is None:  # MLIR attributes: their (Lark) parser is loaded only for them
            from profan.hlo.mlir_attributes import decode_attribute_dict

            decoded = decode_attribute_dict(text)
    instruction._backend_config = decoded
    return decoded


def trip_count(instruction: Instruction) -> int | None:
    """A ``while`` loop's trip count as XLA recorded it (``known_trip_count`` in its backend
    config, quoted or bare), ``None`` when the config does not say."""
    config = backend_config(instruction)
    if not config:
        return None
    known = config.get("known_trip_count")
    value = known.get("n") if isinstance(known, dict) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def replica_groups(instruction: Instruction, num_devices: int | None) -> list[list[int]] | None:
    """The device groups of a collective, as explicit lists of device ids, whichever form XLA
    printed (``{{0,1},{2,3}}``, iota ``[2,2]<=[4]``, mesh ``mesh['x'=2,'y'=2] {'x'}``).

    ``{}`` (or no ``replica_groups`` on a grouped collective, which XLA reads the same way) is one
    group of all ``num_devices`` devices, or ``[]`` when ``num_devices`` is ``None``.  ``None``
    for an instruction that has no replica groups.  Text that does not decode raises
    ``profan.errors.HloSyntaxError`` naming the column.
    """
    text = instruction.attributes.get("replica_groups")
    if text is None:
        if collective_kind(instruction.opcode) not in GROUPED_COLLECTIVE_KINDS:
            return None
        text = "{}"
    return decode_replica_groups(text, num_devices=num_devices)


def source_target_pairs(instruction: Instruction) -> list[tuple[int, int]] | None:
    """``source_target_pairs={{0,1},{1,2}}`` as ``[(0, 1), (1, 2)]``; ``None`` when absent.
    Bad text raises ``profan.errors.HloSyntaxError``."""
    text = instruction.attributes.get("source_target_pairs")
    return None if text is None else decode_source_target_pairs(text)


def sharding(instruction: Instruction) -> Sharding | None:
    """The instruction's ``sharding=`` decoded (every form: replicated, maximal, tiled, iota,
    mesh, tuple); ``None`` when it has none or its text does not decode."""
    text = instruction.attributes.get("sharding")
    if not text:
        return None
    try:
        return decode_sharding(text)
    except HloSyntaxError:
        return None


def string_attribute(instruction: Instruction, key: str) -> str | None:
    """An attribute's value with the quotes of a quoted string removed; ``None`` when absent."""
    value = instruction.attributes.get(key)
    if value is None:
        return None
    return unquote(value) if value.startswith('"') else value


def int_list_attribute(instruction: Instruction, key: str) -> list[int]:
    """``dimensions={1,0}`` -> ``[1, 0]`` (also ``lhs_contracting_dims=``, ``slice_sizes=``, …);
    ``[]`` when absent or empty; text after the closing brace is ignored."""
    text = instruction.attributes.get(key)
    if not text:
        return []
    text = text.strip()
    if text.startswith("{"):
        end = text.find("}")
        text = text[1:end] if end >= 0 else text[1:]
    return [int(item) for item in _INT.findall(text)]


def int_attribute(instruction: Instruction, key: str, default: int | None = None) -> int | None:
    """``index=2`` -> ``2``; ``default`` when absent or not an integer."""
    text = instruction.attributes.get(key)
    found = _INT.match(text.strip()) if text else None
    return int(found.group(0)) if found else default


@dataclass(frozen=True, slots=True)
class WindowDimension:
    """One dimension of ``window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}``."""

    size: int = 1
    stride: int = 1
    pad_low: int = 0
    pad_high: int = 0
    lhs_dilate: int = 1  # base dilation
    rhs_dilate: int = 1  # window dilation
    reversal: bool = False


_WINDOW_FIELD = re.compile(r"(\w+)=([-\d_x]+)")


def window(instruction: Instruction) -> list[WindowDimension]:
    """The ``window=`` of a convolution or windowed reduction, one entry per dimension (an
    absent field takes XLA's default); ``[]`` without a window."""
    return decode_window(instruction.attributes.get("window"))


def decode_window(text: str | None) -> list[WindowDimension]:
    """``{size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}`` (a window attribute's
    text) -> one entry per dimension; ``[]`` for no text."""
    if not text:
        return []
    fields = {key: value.split("x") for key, value in _WINDOW_FIELD.findall(text)}
    rank = max((len(v) for v in fields.values()), default=0)

    def field(key: str, index: int, default: int) -> int:
        values = fields.get(key)
        return int(values[index]) if values and index < len(values) else default

    dims = []
    for index in range(rank):
        low, _, high = (fields["pad"][index] if "pad" in fields else "0_0").partition("_")
        dims.append(
            WindowDimension(
                size=field("size", index, 1),
                stride=field("stride", index, 1),
                pad_low=int(low),
                pad_high=int(high or 0),
                lhs_dilate=field("lhs_dilate", index, 1),
                rhs_dilate=field("rhs_dilate", index, 1),
                reversal=field("rhs_reversal", index, 0) == 1,
            )
        )
    return dims


@dataclass(frozen=True, slots=True)
class ConvolutionDimensions:
    """Which dimension of input, kernel and output plays which role (``dim_labels=``); the
    spatial lists are in spatial-dimension order (the digits of the labels)."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]


_DIM_LABELS = re.compile(r"\s*([\w?]+)_([\w?]+)->([\w?]+)\s*")


def convolution_dimensions(instruction: Instruction) -> ConvolutionDimensions | None:
    """``dim_labels=b01f_01io->b01f`` decoded; ``None`` when absent or malformed."""
    return decode_dim_labels(instruction.attributes.get("dim_labels"))


def decode_dim_labels(text: str | None) -> ConvolutionDimensions | None:
    """``b01f_01io->b01f`` (a dim_labels attribute's text) decoded; ``None`` for no text or a
    malformed one."""
    found = _DIM_LABELS.fullmatch(text) if text else None
    if found is None:
        return None
    lhs, rhs, out = found.groups()

    def spatial(labels: str) -> tuple[int, ...]:
        return tuple(
            pos for _, pos in sorted((ch, pos) for pos, ch in enumerate(labels) if ch.isdigit())
        )

    try:
        return ConvolutionDimensions(
            lhs.index("b"), lhs.index("f"), spatial(lhs),
            rhs.index("i"), rhs.index("o"), spatial(rhs),
            out.index("b"), out.index("f"), spatial(out),
        )  # fmt: skip
    except ValueError:
        return None


_SLICE_RANGE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def slice_ranges(instruction: Instruction) -> list[tuple[int, int, int]]:
    """``slice={[0:4], [2:8:2]}`` -> ``[(0, 4, 1), (2, 8, 2)]``: start, limit, stride per
    dimension (stride 1 when left out); ``[]`` without a slice."""
    text = instruction.attributes.get("slice", "")
    return [
        (int(start), int(limit), int(stride) if stride else 1)
        for start, limit, stride in _SLICE_RANGE.findall(text)
    ]


def frontend_attribute(text: str | None, key: str) -> str | None:
    """The value of ``key`` in a ``frontend_attributes={...}`` value (an instruction's or the
    module header's), unquoted; ``None`` when absent.  XLA prints each value as a quoted string
    (``key="{...}"``); hand-written modules may write it bare, with balanced braces."""
    if not text:
        return None
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    position = 0
    while position < len(body):
        equals = body.find("=", position)
        if equals < 0:
            return None
        name = body[position:equals].strip(" \t\r\n,")
        end = _value_end(body, equals + 1)
        value = body[equals + 1 : end].strip()
        if name == key:
            return unquote(value) if value.startswith('"') else value
        position = end + 1
    return None


def _value_end(text: str, start: int) -> int:
    """Index of the comma that ends the value starting at ``start`` (outside quotes and
    braces), or the end of the text."""
    depth = 0
    quoted = False
    position = start
    while position < len(text):
        char = text[position]
        if quoted:
            if char == "\\":
                position += 1
            elif char == '"':
                quoted = False
        elif char == '"':
            quoted = True
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == "," and depth == 0:
            return position
        position += 1
    return position


def padding_config(instruction: Instruction) -> list[tuple[int, int, int]] | None:
    """``padding=0_1x2_3_1`` of a pad: (low, high, interior) per dimension; ``None`` when absent
    or malformed."""
    text = instruction.attributes.get("padding")
    if not text:
        return None
    dims = []
    for item in text.strip().split("x"):
        parts = item.split("_")
        if len(parts) not in (2, 3):
            return None
        try:
            low, high, interior = (
                int(parts[0]),
                int(parts[1]),
                int(parts[2]) if len(parts) == 3 else 0,
            )
        except ValueError:
            return None
        dims.append((low, high, interior))
    return dims


def custom_call_target(instruction: Instruction) -> str | None:
    """``custom_call_target="..."`` unquoted (``None`` when the instruction has none)."""
    return string_attribute(instruction, "custom_call_target")


def source_location(module: Module, instruction: Instruction) -> SourceLocation | None:
    """Where the instruction came from: ``source_file``/``source_line`` in its metadata, else
    its ``stack_frame_id`` resolved through the module's tables (the frame it names, i.e. the
    innermost one)."""
    found = metadata(instruction)
    if found.source_file and found.source_line is not None:
        return SourceLocation(found.source_file, found.source_line, None, found.source_column)
    frames = stack_trace(module, instruction)
    return frames[0] if frames else None


def stack_trace(module: Module, instruction: Instruction) -> list[SourceLocation]:
    """The instruction's stack frames, innermost first (empty without ``stack_frame_id``)."""
    frame_id = metadata(instruction).stack_frame_id
    tables = module.stack_frames
    trace: list[SourceLocation] = []
    seen: set[int] = set()
    while frame_id and frame_id in tables.stack_frames and frame_id not in seen:
        seen.add(frame_id)
        frame = tables.stack_frames[frame_id]
        location = tables.file_locations.get(frame.file_location_id)
        if location is not None:
            trace.append(
                SourceLocation(
                    tables.file_names.get(location.file_name_id, "<unknown>"),
                    location.line,
                    tables.function_names.get(location.function_name_id),
                    location.column,
                )
            )
        frame_id = frame.parent_frame_id
    return trace

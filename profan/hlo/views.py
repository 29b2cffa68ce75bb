"""Typed views of raw attribute text: metadata, called computations, backend config, sources.

``Instruction.attributes`` keeps each value as printed; these functions decode the few that
analyses need, on demand (the model memoises the costlier ones).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from profan.hlo.model import Metadata, SourceLocation
from profan.hlo.text import unquote

if TYPE_CHECKING:
    from profan.hlo.model import Instruction, Module

_FIELD = re.compile(r'([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^\s{}]+)')
_NAME = re.compile(r"%?([A-Za-z_][\w.\-]*)")

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
    value = instruction.attributes.get("control-predecessors")
    return computation_names(value) if value else []


def backend_config_json(raw: str | None) -> dict | None:
    """The backend config decoded as JSON when it is JSON (quoted or bare), else ``None``."""
    if not raw:
        return None
    text = raw.strip()
    if text.startswith('"'):
        text = unquote(text)
    if not text.startswith("{"):
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def backend_config(instruction: Instruction) -> dict | None:
    """The instruction's backend config as a dict, whichever form XLA printed: JSON (quoted or
    bare, most ops) or an MLIR attribute dictionary (typed-FFI custom calls such as
    TransformerEngine's ``te_*_ffi`` and Pallas/Triton calls: ``{attn_heads = 16 : i64, ...}``).
    ``None`` when absent or in neither form."""
    decoded = instruction.backend_config_json
    if decoded is not None:
        return decoded
    raw = instruction.backend_config
    if not raw:
        return None
    text = raw.strip()
    if text.startswith('"'):
        text = unquote(text)
    from profan.hlo.mlir_attributes import decode_attribute_dict

    return decode_attribute_dict(text)


def trip_count(instruction: Instruction) -> int | None:
    """A ``while`` loop's trip count as XLA recorded it (``known_trip_count`` in its backend
    config), ``None`` when the config does not say."""
    config = instruction.backend_config_json
    if not config:
        return None
    known = config.get("known_trip_count")
    value = known.get("n") if isinstance(known, dict) else None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def string_attribute(instruction: Instruction, key: str) -> str | None:
    value = instruction.attributes.get(key)
    if value is None:
        return None
    return unquote(value) if value.startswith('"') else value


def source_location(module: Module, instruction: Instruction) -> SourceLocation | None:
    """Where the instruction came from: ``source_file``/``source_line`` in its metadata, else
    its ``stack_frame_id`` resolved through the module's tables (the frame it names, i.e. the
    innermost one)."""
    metadata = instruction.metadata
    if metadata.source_file and metadata.source_line is not None:
        return SourceLocation(
            metadata.source_file, metadata.source_line, None, metadata.source_column
        )
    frames = stack_trace(module, instruction)
    return frames[0] if frames else None


def stack_trace(module: Module, instruction: Instruction) -> list[SourceLocation]:
    """The instruction's stack frames, innermost first (empty without ``stack_frame_id``)."""
    frame_id = instruction.metadata.stack_frame_id
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

"""XProf's op profile (the ``op_profile`` tool's JSON, ``.json`` or ``.json.gz``): every op a
program ran, each with its HLO line and the lines of the instructions fused into it.

The tree is ``byProgram`` (programs, then categories, then ops) or, in older files, only
``byCategory`` (categories, then ops).  An op node carries ``xla.expression`` (its HLO line) and,
for a fusion, one child per fused instruction (a nested fusion has its own children); parameters
are not nodes: they appear only as operands (``%param_3.71``) with their shapes printed.  XProf
folds ops with the same fused computation into one node ``X and its duplicate(s)``: either its
children are the members (each an op node with its body) or, where the members were dropped,
the representative's body itself.  A node's ``metrics`` (when the file kept them) give totals
over its occurrences: ``rawTime`` (ps), ``rawFlops``, ``rawBytesAccessedArray`` (XProf's
``op_profile_builder``: the bytes in HBM, then those read and those written in the on-chip
memories, every memory space but HBM its breakdown lists).
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profan.errors import ProfanError
from profan.gunzip import GunzipLimitError, gunzip
from profan.inputs import check_input

DUPLICATES_SUFFIX = " and its duplicate(s)"
# A program node is printed ``jit_train_step(2041036616644817336)``: name and program id.
_PROGRAM = re.compile(r"^(?P<name>.*)\((?P<id>\d+)\)$")
_INSTRUCTION_NAME = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[^\s=]+)\s*=")


class OpProfileError(ProfanError):
    """A file that is not an XProf op profile (or not readable JSON)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True, slots=True)
class FusedLine:
    """One instruction inside a fusion, as the op profile prints it, with its own fused body
    when it is a nested fusion."""

    line: str
    children: tuple[FusedLine, ...] = ()


@dataclass(frozen=True, slots=True)
class OpMetrics:
    """What the profile measured for an op, per occurrence (the file's totals divided)."""

    occurrences: int
    time_s: float
    flops: float
    hbm_bytes: float
    on_chip_read_bytes: float = 0.0
    on_chip_write_bytes: float = 0.0


@dataclass(frozen=True, slots=True)
class ProfiledOp:
    """One op of a program: its line, its category and its fused body."""

    name: str
    line: str
    category: str
    body: tuple[FusedLine, ...] = ()
    metrics: OpMetrics | None = None
    # the op stands for a group of ops with the same fused computation (XProf's duplicates)
    has_duplicates: bool = False


@dataclass(frozen=True, slots=True)
class ProfiledProgram:
    """One program (an XLA module that ran) and its ops."""

    name: str
    program_id: str | None
    ops: tuple[ProfiledOp, ...]


@dataclass(frozen=True, slots=True)
class OpProfile:
    path: str
    device_type: str
    programs: tuple[ProfiledProgram, ...]


def instruction_name(line: str) -> str:
    """The instruction name a line defines (``%fusion.3 = ...`` -> ``fusion.3``); ``""`` when
    the line defines none."""
    found = _INSTRUCTION_NAME.match(line)
    return found.group("name") if found else ""


def _expression(node: dict[str, Any]) -> str:
    xla = node.get("xla")
    if isinstance(xla, dict):
        expression = xla.get("expression")
        if isinstance(expression, str):
            return expression
    return ""


def _children(node: dict[str, Any]) -> list[dict[str, Any]]:
    children = node.get("children")
    return [c for c in children if isinstance(c, dict)] if isinstance(children, list) else []


def _fused_lines(node: dict[str, Any]) -> tuple[FusedLine, ...]:
    return tuple(
        FusedLine(_expression(child), _fused_lines(child))
        for child in _children(node)
        if _expression(child)
    )


def _metrics(node: dict[str, Any]) -> OpMetrics | None:
    metrics = node.get("metrics")
    if not isinstance(metrics, dict) or "rawTime" not in metrics:
        return None
    occurrences = int(metrics.get("occurrences") or 0)
    per = max(occurrences, 1)
    raw_bytes = [float(b or 0.0) / per for b in metrics.get("rawBytesAccessedArray") or []]
    hbm, read, written = [*raw_bytes, 0.0, 0.0, 0.0][:3]
    return OpMetrics(
        occurrences=occurrences,
        time_s=float(metrics.get("rawTime") or 0.0) * 1e-12 / per,
        flops=float(metrics.get("rawFlops") or 0.0) / per,
        hbm_bytes=hbm,
        on_chip_read_bytes=read,
        on_chip_write_bytes=written,
    )


def _ops(node: dict[str, Any], category: str) -> list[ProfiledOp]:
    """The ops a node stands for: itself (with its body), or the members of a duplicates
    group when the file lists them."""
    line = _expression(node)
    name = instruction_name(line)
    title = str(node.get("name", ""))
    grouped = title.endswith(DUPLICATES_SUFFIX)
    children = _children(node)
    if grouped and any(instruction_name(_expression(c)) == name for c in children):
        found = []
        for member in children:
            found += _ops(member, category)
        return [
            ProfiledOp(op.name, op.line, op.category, op.body, op.metrics, True) for op in found
        ]
    xla = node.get("xla")
    if not isinstance(xla, dict):
        xla = {}
    return [
        ProfiledOp(
            name=name,
            line=line,
            category=str(xla.get("category") or category),
            body=_fused_lines(node),
            metrics=_metrics(node),
            has_duplicates=grouped,
        )
    ]


def _program_ops(node: dict[str, Any]) -> list[ProfiledOp]:
    """Every op under a program (or category) node, depth first."""
    found: list[ProfiledOp] = []
    for child in _children(node):
        if _expression(child) and instruction_name(_expression(child)):
            found += _ops(child, str(node.get("name", "")))
        else:
            found += _program_ops(child)
    return found


def _program(node: dict[str, Any]) -> ProfiledProgram:
    title = str(node.get("name", ""))
    parsed = _PROGRAM.match(title)
    name, program_id = (parsed.group("name"), parsed.group("id")) if parsed else (title, None)
    return ProfiledProgram(name, program_id, tuple(_program_ops(node)))


def op_profile_from_json(data: Any, path: str = "<op profile>") -> OpProfile:
    """An ``OpProfile`` from the op profile tool's decoded JSON."""
    if not isinstance(data, dict):
        raise OpProfileError(path, "not an XProf op profile: the JSON is not an object")
    by_program = data.get("byProgram")
    by_category = data.get("byCategory")
    if isinstance(by_program, dict):
        programs = [_program(child) for child in _children(by_program)]
    elif isinstance(by_category, dict):
        programs = [ProfiledProgram("", None, tuple(_program_ops(by_category)))]
    else:
        raise OpProfileError(
            path, "not an XProf op profile: no 'byProgram' or 'byCategory' tree of ops"
        )
    programs = [p for p in programs if p.ops]
    if not programs:
        raise OpProfileError(path, "the op profile lists no op with an HLO expression")
    return OpProfile(path, str(data.get("deviceType", "")), tuple(programs))


def read_op_profile(path: str | Path) -> OpProfile:
    """Read an op profile file (``.json`` or ``.json.gz``); a file that is not one raises
    ``OpProfileError`` (exit code 2) naming the file and why."""
    name = str(path)
    check_input(path, "op profile")
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise OpProfileError(name, f"cannot read: {error.strerror or error}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gunzip(raw)
        except GunzipLimitError as error:
            raise OpProfileError(name, str(error)) from None
        except (EOFError, ValueError, zlib.error) as error:
            raise OpProfileError(name, f"not a readable gzip file ({error})") from None
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as error:
        raise OpProfileError(name, f"not JSON text ({error.reason})") from None
    except json.JSONDecodeError as error:
        raise OpProfileError(
            name, f"not JSON: line {error.lineno}:{error.colno}: {error.msg}"
        ) from None
    return op_profile_from_json(data, name)

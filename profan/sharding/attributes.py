"""Integer attributes of an instruction as the propagation rules read them.

``dimensions={1,0}``, ``lhs_contracting_dims={1}``, ``index=2``, ``slice={[0:4], [2:8:2]}``.
"""

from __future__ import annotations

import re

from profan.hlo.model import Instruction

_INT = re.compile(r"-?\d+")
_SLICE_RANGE = re.compile(r"\[\s*(-?\d+)\s*:\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]")


def int_list(instruction: Instruction, name: str) -> list[int]:
    """``{1,0}`` → ``[1, 0]``; anything after the braces (a ``// comment``) is ignored; ``[]``
    when the attribute is absent."""
    text = (instruction.attributes.get(name) or "").strip()
    if text.startswith("{"):
        text = text[1 : text.find("}")] if "}" in text else text[1:]
    return [int(t) for t in _INT.findall(text)]


def int_attribute(instruction: Instruction, name: str, default: int = 0) -> int:
    """``index=2`` → ``2``; ``default`` when absent or not a number."""
    match = _INT.match((instruction.attributes.get(name) or "").strip())
    return int(match.group(0)) if match else default


def slice_ranges(instruction: Instruction) -> list[tuple[int, int, int]]:
    """``slice={[0:4], [2:8:2]}`` → ``[(0, 4, 1), (2, 8, 2)]`` (start, end, stride per dim)."""
    return [
        (int(start), int(end), int(stride) if stride else 1)
        for start, end, stride in _SLICE_RANGE.findall(instruction.attributes.get("slice", ""))
    ]

"""Facts about one HLO instruction that the report shows: scope, collective group, global shapes.

Uses the decoded views of the parser and sharding modules when they exist and falls back to a
small reading of the raw attribute text (replica groups and tiled shardings only) otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from profan.hlo.model import Instruction, Module, Shape

COLLECTIVE_OPCODES = frozenset(
    {
        "all-gather", "all-gather-start", "all-gather-done",
        "all-reduce", "all-reduce-start", "all-reduce-done",
        "reduce-scatter", "all-to-all", "ragged-all-to-all",
        "collective-permute", "collective-permute-start", "collective-permute-done",
        "collective-broadcast",
    }
)  # fmt: skip
HOST_OPCODES = frozenset({"infeed", "outfeed", "send", "recv", "send-done", "recv-done"})


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    kind: str  # all-gather, all-reduce, ...
    group_size: int | None
    groups: int | None
    bytes: int  # bytes of the op's (local) output

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "group_size": self.group_size,
            "groups": self.groups,
            "bytes": self.bytes,
        }


def shape_bytes(shape: Shape | None) -> int:
    if shape is None:
        return 0
    return sum(leaf.num_elements * leaf.element_bits // 8 for leaf in shape.leaves())


def format_shape(shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(format_shape(s) for s in shape.tuple_shapes) + ")"
    return f"{shape.dtype}[{','.join(str(d) for d in shape.dims)}]"


def op_name_of(instr: Instruction | None) -> str | None:
    """The full JAX op path (metadata ``op_name``), primitive and transforms included."""
    if instr is None:
        return None
    try:
        from profan.attribute import op_name_of as attribute_op_name_of

        return attribute_op_name_of(instr)
    except ImportError:
        pass
    raw = instr.attributes.get("metadata", "")
    match = re.search(r'op_name="([^"]*)"', raw)
    return match.group(1) if match else None


def scope_of(instr: Instruction | None) -> str | None:
    """The named scope that made the op (``profan.attribute.scope_of``), else its op path."""
    if instr is None:
        return None
    try:
        from profan.attribute import scope_of as attribute_scope_of

        found = attribute_scope_of(instr)
        if found:
            return str(found)
    except ImportError:
        pass
    return op_name_of(instr)


def source_of(instr: Instruction | None, module: Module | None) -> str | None:
    if instr is None:
        return None
    if module is not None and hasattr(module, "source_location"):
        try:
            location = module.source_location(instr)
            if location is not None:
                return str(location)
        except Exception:  # a decoding gap in another module must not sink the report
            pass
    raw = instr.attributes.get("metadata", "")
    file = re.search(r'source_file="([^"]*)"', raw)
    line = re.search(r"source_line=(\d+)", raw)
    if file and line:
        return f"{file.group(1)}:{line.group(1)}"
    return None


_IOTA_GROUPS = re.compile(r"^\[(\d+),(\d+)\]<=")


def replica_group_sizes(text: str | None, default_devices: int) -> tuple[int | None, int | None]:
    """(group size, number of groups) from a ``replica_groups`` value."""
    if text is None:
        return None, None
    text = text.strip()
    try:
        from profan.hlo.devices import decode_replica_groups  # type: ignore[import-not-found]

        groups = decode_replica_groups(text, num_devices=default_devices)
        if groups:
            return len(groups[0]), len(groups)
        return default_devices, 1
    except ImportError:
        pass
    except Exception:
        return None, None
    iota = _IOTA_GROUPS.match(text)
    if iota:
        return int(iota.group(2)), int(iota.group(1))
    if text in ("{}", ""):
        return default_devices, 1
    inner = re.findall(r"\{([\d,\s]*)\}", text)
    if inner:
        return len([x for x in inner[0].split(",") if x.strip()]), len(inner)
    return None, None


def collective_info(instr: Instruction | None, module: Module | None) -> CollectiveInfo | None:
    if instr is None or instr.opcode not in COLLECTIVE_OPCODES:
        return None
    devices = 1
    if module is not None:
        devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    if "source_target_pairs" in instr.attributes:
        pairs = re.findall(r"\{(\d+),(\d+)\}", instr.attributes["source_target_pairs"])
        size, groups = len(pairs) or None, None
    else:
        size, groups = replica_group_sizes(instr.attributes.get("replica_groups"), devices)
    kind = instr.opcode.removesuffix("-start").removesuffix("-done")
    return CollectiveInfo(kind, size, groups, shape_bytes(instr.shape))


_TILE = re.compile(r"devices=\[([\d,]+)\]")


def sharding_lookup(sharding_report: object | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(matmul by instruction name, collective by name) from a ``ShardingReport``."""
    matmuls: dict[str, Any] = {}
    collectives: dict[str, Any] = {}
    if sharding_report is None:
        return matmuls, collectives
    for matmul in getattr(sharding_report, "matmuls", []) or []:
        matmuls.setdefault(getattr(matmul, "name", ""), matmul)
        matmuls.setdefault(getattr(matmul, "dot", ""), matmul)
    for collective in getattr(sharding_report, "collectives", []) or []:
        collectives.setdefault(getattr(collective, "name", ""), collective)
    return matmuls, collectives


def _dims_text(dtype: str, dims: list[int]) -> str:
    return f"{dtype}[{','.join(str(d) for d in dims)}]"


def global_shapes(instr: Instruction | None, matmul: Any | None = None) -> list[str]:
    """Global (unsharded) shapes: a matmul's ``lhs × rhs -> out`` from the sharding analysis, else
    the output's from its ``sharding=`` attribute (per-device shape × tiles per dimension)."""
    if instr is None:
        return []
    if matmul is not None:
        dtype = getattr(matmul, "dtype", instr.shape.dtype)
        try:
            return [
                _dims_text(dtype, list(matmul.global_lhs)),
                "× " + _dims_text(dtype, list(matmul.global_rhs)),
                "-> " + _dims_text(dtype, list(matmul.global_out)),
            ]
        except (AttributeError, TypeError):
            pass
    text = instr.attributes.get("sharding")
    if not text or not instr.shape.is_array:
        return []
    match = _TILE.search(text)
    if match is None:
        return []
    tiles = [int(x) for x in match.group(1).split(",")]
    dims = list(instr.shape.dims)
    if len(tiles) < len(dims):
        return []
    scaled = [d * t for d, t in zip(dims, tiles[: len(dims)], strict=False)]
    if scaled == dims:
        return []
    return [_dims_text(instr.shape.dtype, scaled)]


def padded_ratio(shape: Shape) -> float:
    """Stored / logical elements of a tiled array (1.0 without tiling).

    XLA's tile ``T(a,b)`` pads the most-minor physical dimensions up to multiples of (a, b).
    """
    layout = shape.layout
    if layout is None or not layout.tiles or not shape.is_array or shape.num_elements == 0:
        return 1.0
    tile = layout.tiles[0]
    physical = [shape.dims[d] for d in reversed(layout.minor_to_major)]  # major -> minor
    if not physical:
        return 1.0
    padded = list(physical)
    for offset, size in enumerate(reversed(tile)):
        index = len(padded) - 1 - offset
        if index < 0 or size is None or size <= 0:
            continue
        padded[index] = -(-padded[index] // size) * size
    logical = 1
    stored = 1
    for a, b in zip(physical, padded, strict=True):
        logical *= a
        stored *= b
    return stored / logical if logical else 1.0


def _operand_splits(
    local: list[int], global_dims: list[int], split: dict[Any, list[str]] | None
) -> dict[str, Any]:
    """``{"dims": global dims, "axes": [mesh axes splitting each dim]}``.

    The analysis keys ``split`` by the local dim; a global shape may lead with dims a reshape
    hid locally, so local dim ``k`` is global dim ``offset + k``.
    """
    offset = max(len(global_dims) - len(local), 0)
    axes: list[list[str]] = [[] for _ in global_dims]
    for key, names in (split or {}).items():
        index = offset + int(key)
        if 0 <= index < len(axes):
            axes[index] = [str(n) for n in names]
    return {"dims": [int(d) for d in global_dims], "axes": axes}


def matmul_splits(matmul: Any | None) -> dict[str, Any] | None:
    """Which global dims of a matmul's operands and output are split along which mesh axes."""
    if matmul is None:
        return None
    try:
        return {
            "dtype": str(matmul.dtype),
            "lhs": _operand_splits(matmul.local_lhs, matmul.global_lhs, matmul.lhs_split),
            "rhs": _operand_splits(matmul.local_rhs, matmul.global_rhs, matmul.rhs_split),
            "out": _operand_splits(matmul.local_out, matmul.global_out, matmul.out_split),
            "partial_sum_axes": [str(a) for a in matmul.partial_sum_axes or []],
        }
    except (AttributeError, TypeError, ValueError):
        return None


def split_text(operand: dict[str, Any], dtype: str = "") -> str:
    """``f32[64/axis0,128]``: each global dim, with ``/axes`` where the mesh splits it."""
    parts = []
    for size, axes in zip(operand.get("dims", []), operand.get("axes", []), strict=False):
        if not axes:
            parts.append(str(size))
        elif len(axes) == 1:
            parts.append(f"{size}/{axes[0]}")
        else:
            parts.append(f"{size}/({','.join(axes)})")
    return f"{dtype}[{','.join(parts)}]"

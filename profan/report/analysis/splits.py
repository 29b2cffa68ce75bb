"""How the report shows sharding: a matmul's global operands with the mesh axes splitting each
dimension (from ``profan.sharding``'s analysis), as JSON and as text (``f32[64/data,128]``)."""

from __future__ import annotations

from typing import Any

from profan.sharding import MatmulSharding, ShardingReport


def matmuls_by_name(sharding: ShardingReport | None) -> dict[str, MatmulSharding]:
    """A module's matmuls by the name of the op that runs them (the fusion) and of the dot."""
    found: dict[str, MatmulSharding] = {}
    for matmul in sharding.matmuls if sharding is not None else []:
        found.setdefault(matmul.name, matmul)
        found.setdefault(matmul.dot, matmul)
    return found


def _dims_text(dtype: str, dims: list[int]) -> str:
    return f"{dtype}[{','.join(str(d) for d in dims)}]"


def matmul_global_shapes(matmul: MatmulSharding) -> list[str]:
    """``lhs``, ``× rhs``, ``-> out``: the matmul's global (unsharded) shapes."""
    return [
        _dims_text(matmul.dtype, matmul.global_lhs),
        "× " + _dims_text(matmul.dtype, matmul.global_rhs),
        "-> " + _dims_text(matmul.dtype, matmul.global_out),
    ]


def _operand_splits(
    local: list[int], global_dims: list[int], split: dict[int, list[str]]
) -> dict[str, Any]:
    """``{"dims": global dims, "axes": [mesh axes splitting each dim]}``.

    The analysis keys ``split`` by the local dim; a global shape may lead with dims a reshape
    hid locally, so local dim ``k`` is global dim ``offset + k``.
    """
    offset = max(len(global_dims) - len(local), 0)
    axes: list[list[str]] = [[] for _ in global_dims]
    for key, names in split.items():
        index = offset + int(key)
        if 0 <= index < len(axes):
            axes[index] = [str(n) for n in names]
    return {"dims": [int(d) for d in global_dims], "axes": axes}


def matmul_splits(matmul: MatmulSharding) -> dict[str, Any]:
    """Which global dims of a matmul's operands and output are split along which mesh axes."""
    return {
        "dtype": str(matmul.dtype),
        "lhs": _operand_splits(matmul.local_lhs, matmul.global_lhs, matmul.lhs_split),
        "rhs": _operand_splits(matmul.local_rhs, matmul.global_rhs, matmul.rhs_split),
        "out": _operand_splits(matmul.local_out, matmul.global_out, matmul.out_split),
        "partial_sum_axes": [str(a) for a in matmul.partial_sum_axes],
    }


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

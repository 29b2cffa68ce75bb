"""The kernels each GPU op ran, as the report lists them (JSON ``ops[].kernels``).

Per op, one entry per kernel name, heaviest first: how many ran and their total time over every
device and host (``Profile.kernels``, as the trace recorded them), the launch configuration
(the trace's ``kernel_details`` stat, key by key as the trace names them: ``grid``, ``block``,
``regs``, ``dynamic_shared``, …; ROCm's ``group_mem``, ``private_mem``) and the tile its name
states.  A tile is read only where the library's naming convention says what each number is:

* Tensile (hipBLASLt, rocBLAS): ``MT256x224x64`` is the macro tile, M x N x depth (K);
* cuBLAS's xmma kernels: ``tilesize128x128x32`` is M x N x K;
* CUTLASS's generated kernels: ``cutlass_..._gemm_64x64_16x4_...`` is M x N _ K x stages.

Other names that carry sizes (cuBLAS's ``nvjet_sm90_tst_176x128_64x5_...``, cuDNN's) keep their
numbers as named (``tile.as_named``), uninterpreted.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

# (pattern, the fields its numbers are, in order)
_TILES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"(?:^|_)(MT(\d+)x(\d+)x(\d+))(?:_|$)"), ("m", "n", "k")),
    (re.compile(r"(tilesize(\d+)x(\d+)x(\d+))"), ("m", "n", "k")),
    (re.compile(r"cutlass\w*?gemm\w*?_((\d+)x(\d+)_(\d+)x(\d+))_"), ("m", "n", "k", "stages")),
)
# cuBLAS's nvjet kernels: sizes whose meaning NVIDIA does not document
_AS_NAMED = re.compile(r"^nvjet_[a-z0-9]+_[a-z]+_(\d+x\d+_\d+x\d+)_")

OpIdentity = tuple[str, str, str]  # (module, module key or "", op name)


def tile_of(name: str) -> dict[str, Any] | None:
    """The tile a kernel's name states: ``{"text", "m", "n", "k"[, "stages"]}`` where the
    naming convention is documented, ``{"text", "as_named": True}`` for sizes it does not
    explain, None for a name without one."""
    for pattern, fields in _TILES:
        found = pattern.search(name)
        if found is not None:
            numbers = [int(value) for value in found.groups()[1:]]
            return {"text": found.group(1), **dict(zip(fields, numbers, strict=True))}
    found = _AS_NAMED.search(name)
    if found is not None:
        return {"text": found.group(1), "as_named": True}
    return None


def launch_of(details: str) -> dict[str, Any]:
    """The ``kernel_details`` stat key by key: ``grid:2,66,1`` -> ``[2, 66, 1]``, ``regs:168``
    -> ``168``, ``occ_pct:18.75`` -> ``18.75``; a value of another form stays text."""
    out: dict[str, Any] = {}
    for word in details.split():
        key, colon, value = word.partition(":")
        if not colon or not key:
            continue
        out[key] = _value(value)
    return out


def _value(text: str) -> Any:
    parts = text.split(",")
    try:
        numbers = [float(part) if "." in part else int(part) for part in parts]
    except ValueError:
        return text
    return numbers if len(numbers) > 1 else numbers[0]


def op_kernels(kernels: pd.DataFrame | None) -> dict[OpIdentity, list[dict[str, Any]]]:
    """Each op's kernel list (``ops[].kernels``), by (module, module key or "", op name).

    An entry: ``name``, ``count``, ``time_s`` (summed over devices and hosts), ``launch`` (its
    one launch configuration, None when the trace has none or several: ``launch_configs``
    says how many) and ``tile`` (``tile_of``)."""
    if kernels is None or not len(kernels):
        return {}
    # A plain pass over the rows (one per device, op, kernel and launch configuration: a few
    # hundred), cheaper than a pandas groupby for tables this small.
    totals: dict[tuple[OpIdentity, str], list[Any]] = {}
    columns = [
        kernels[name].astype(object).where(kernels[name].notna(), None).tolist()
        for name in ("module", "module_key", "op_name", "kernel", "details")
    ]
    counts, times = kernels["count"].tolist(), kernels["time_s"].tolist()
    for module, module_key, op_name, kernel, details, count, time_s in zip(
        *columns, counts, times, strict=True
    ):
        key = ((module or "", module_key or "", op_name or ""), kernel or "")
        total = totals.setdefault(key, [0, 0.0, set()])
        total[0] += int(count)
        total[1] += float(time_s)
        if details is not None:
            total[2].add(details)
    out: dict[OpIdentity, list[dict[str, Any]]] = {}
    for (op, kernel), (count, time_s, seen) in sorted(totals.items(), key=lambda item: -item[1][1]):
        configs = sorted(seen)
        out.setdefault(op, []).append(
            {
                "name": kernel,
                "count": count,
                "time_s": time_s,
                "launch": launch_of(configs[0]) if len(configs) == 1 else None,
                "launch_configs": len(configs),
                "tile": tile_of(kernel),
            }
        )
    return out


def short_name(name: str, width: int = 80) -> str:
    """A kernel name cut to ``width`` characters with an ellipsis (C++ kernels carry their whole
    signature); 0: whole."""
    return name if width <= 0 or len(name) <= width else name[: width - 1] + "…"


def kernel_summary(kernels: list[dict[str, Any]] | None, limit: int = 3, width: int = 80) -> str:
    """A compact text of an op's kernels, heaviest first: ``name×count``, ``; ``-separated
    (the CSV column, a detail line); ``+N more`` past ``limit`` (0: all); names cut to
    ``width`` (0: whole)."""
    if not kernels:
        return ""
    shown = kernels if limit <= 0 else kernels[:limit]
    text = "; ".join(f"{short_name(k['name'], width)}×{k['count']}" for k in shown)
    if len(kernels) > len(shown):
        text += f"; +{len(kernels) - len(shown)} more"
    return text

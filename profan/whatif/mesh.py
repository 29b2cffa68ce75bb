"""``--mesh AXIS=N,...``: the traced program on another mesh, without a recompile (an estimate).

The same program with its mesh axes resized.  Each op's measured time moves by the ratio of its
per-device roofline on the new mesh to the old (``scaled_execution``: the fixed cost per kernel
launch stays):

* a collective over axes ``A``: its group size becomes the product of the new sizes of ``A``; its
  array ``V`` (per device, full along ``A``) is taken to be split along every other axis of the
  mesh (as data x model parallel programs split activations and gradients), so ``V' = V x
  prod(old / new sizes of the other axes)``; its ideal time on both meshes from
  ``profan.roofline.interconnect.collective_time``, the report's own formulas (MODEL.md 4);
* a matmul whose splits the sharding analysis found: its per-device FLOPs and bytes scale by
  ``prod(old / new size)`` over the axes that split its operands or result;
* any other op: taken to be split along every axis (its per-device work scales by
  ``old devices / new devices``; unchanged where the device count is).

Every projected number says which of these it rests on, and that it is an estimate: XLA may
choose another sharding, other collectives, or fuse differently for the new mesh (``--hlo`` of a
recompiled program is the measurement-based alternative).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from profan.errors import ConfigError
from profan.whatif.arithmetic import scaled_execution
from profan.whatif.carry import CarryOver, carry_over
from profan.whatif.project import Projection, _finish, _op, kernels_per_execution

if TYPE_CHECKING:
    from profan.chips import Chip
    from profan.report.model import OpEntry, Report

ESTIMATE = "estimate (--mesh: the same program, no recompile)"


def parse_mesh(text: str) -> dict[str, int]:
    """``data=2,model=4`` -> ``{"data": 2, "model": 4}``."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, size = part.partition("=")
        if not name or not size.strip().isdigit() or int(size) < 1:
            raise ConfigError(f"--mesh: expected AXIS=N[,AXIS=N...], got {part!r}")
        out[name.strip()] = int(size)
    if not out:
        raise ConfigError("--mesh: no axis given (AXIS=N[,AXIS=N...])")
    return out


def source_mesh(report: Report) -> dict[str, int]:
    """The traced program's mesh: that of its busiest module where the profile has several."""
    meshes = report.summary.mesh or {}
    if not meshes:
        raise ConfigError("--mesh: the profile's program has no mesh (no HLO, or not sharded)")
    busy: dict[str, float] = {}
    for entry in report.ops:
        busy[entry.module] = busy.get(entry.module, 0.0) + entry.measured_s
    named = [m for m in sorted(meshes, key=lambda m: -busy.get(m, 0.0))]
    return dict(meshes[named[0]])


def target_mesh(old: dict[str, int], wanted: dict[str, int]) -> dict[str, int]:
    unknown = sorted(set(wanted) - set(old))
    if unknown:
        raise ConfigError(f"--mesh: no axis {', '.join(unknown)} in the program's mesh {old}")
    return {axis: wanted.get(axis, size) for axis, size in old.items()}


def shard_factor(axes: set[str], old: dict[str, int], new: dict[str, int]) -> float:
    """Per-device work on the new mesh over the old, for an array split along ``axes``."""
    return math.prod(old[a] / new[a] for a in axes if a in old and a in new)


def collective_ideal_s(
    kind: str, full_bytes: float, axes: list[str], mesh: dict[str, int], chip: Chip
) -> float:
    """One execution's ideal time over ``axes`` of ``mesh`` (MODEL.md 4, as the report costs it)."""
    from profan.roofline.interconnect import collective_time

    sizes = tuple(mesh[a] for a in axes)
    group = math.prod(sizes)
    timing = collective_time(
        kind, int(full_bytes), group, chip, n_axes=len(sizes), axis_sizes=sizes
    )
    return timing.t_s


def split_axes(entry: OpEntry) -> set[str] | None:
    """The mesh axes that split a matmul's operands or result (None: not known for this op)."""
    if not entry.splits:
        return None
    axes: set[str] = set()
    for side in ("lhs", "rhs", "out"):
        for dim_axes in (entry.splits.get(side) or {}).get("axes") or []:
            axes.update(dim_axes or [])
    return axes


def _ratio(
    entry: OpEntry, old: dict[str, int], new: dict[str, int], chip: Chip
) -> tuple[float, str, int | None]:
    """(roofline ratio new/old, what it rests on, new group size or None)."""
    info = entry.collective
    if info and info.get("axes"):
        axes = [a for a in info["axes"] if a in old]
        if len(axes) != len(info["axes"]):
            return 1.0, "collective over axes outside the mesh: unchanged", None
        others = set(old) - set(axes)
        full = float(info.get("bytes") or 0.0)
        full_new = full * shard_factor(others, old, new)
        before = collective_ideal_s(info["kind"], full, axes, old, chip)
        after = collective_ideal_s(info["kind"], full_new, axes, new, chip)
        group = math.prod(new[a] for a in axes)
        if before <= 0:
            return 1.0, "collective without an ideal time: unchanged", group
        rests = (
            f"{ESTIMATE}: {info['kind']} over {','.join(axes)}, group "
            f"{info.get('group_size')} -> {group}, V {full:.0f} -> {full_new:.0f} B (array taken "
            f"split along {','.join(sorted(others)) or 'no other axis'}); ideal "
            f"{before * 1e6:.3g} -> {after * 1e6:.3g} us (MODEL.md 4)"
        )
        return after / before, rests, group
    if info:
        return 1.0, "collective whose axes are unknown: unchanged", None
    split = split_axes(entry)
    if split is not None:
        factor = shard_factor(split, old, new)
        named = ",".join(sorted(split)) or "no axis"
        return (
            factor,
            f"{ESTIMATE}: matmul split along {named}: per-device work x {factor:.3g}",
            None,
        )
    factor = math.prod(old.values()) / math.prod(new.values())
    return factor, f"{ESTIMATE}: split along every axis taken: per-device work x {factor:.3g}", None


def project_mesh(
    source: Report, wanted: dict[str, int], model: CarryOver | None = None
) -> Projection:
    """``source`` (the measured report) on another mesh of the same program: see the module."""
    from profan.chips import get_chip

    model = model or carry_over()
    old = source_mesh(source)
    new = target_mesh(old, wanted)
    chip_name = str(source.chip.name)
    chip = get_chip(chip_name)
    ops = []
    for entry in source.ops:
        n = max(entry.occurrences, 1)
        ratio, rests_on, _ = _ratio(entry, old, new, chip)
        per = scaled_execution(
            entry.measured_s / n, ratio, model.fixed_s, kernels_per_execution(entry)
        )
        projected = per * n
        ops.append(_op(entry, projected, model, (entry.bound_by, entry.bound_by), rests_on))
    label = ",".join(f"{a}={s}" for a, s in new.items())
    notes = [
        f"mesh {','.join(f'{a}={s}' for a, s in old.items())} -> {label}: every projected figure "
        f"is an {ESTIMATE}; collectives recosted by MODEL.md 4 on the new group sizes, per-device "
        "work scaled by the shard sizes; XLA may shard, fuse or communicate differently on the "
        "new mesh (--hlo of a recompiled program measures that)",
    ]
    if math.prod(new.values()) != math.prod(old.values()):
        notes.append(
            f"the device count changes ({math.prod(old.values())} -> {math.prod(new.values())}): "
            "the projection is per device of the new mesh"
        )
    return _finish(source, f"mesh {label}", chip_name, ops, model, notes)

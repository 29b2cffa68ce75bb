"""From a trace path to a ``Report``: load, describe sharding, score, build, run the rules.

Each step runs once: the sharding of every module is described once and handed to the report
builder (and, once ``roofline.score`` takes it, to scoring).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd

import profan
from profan import chips, roofline, sharding
from profan.attribute import op_name_of, scope_of
from profan.cost.bytes import logical_bytes
from profan.errors import ConfigError, ProfanError, TraceError
from profan.hlo import views
from profan.hlo.devices import decode_sharding
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.opcodes import base_opcode, collective_kind
from profan.report.build import Analysis, build_report
from profan.report.config import RuleConfig
from profan.report.model import Report
from profan.sharding import ShardingReport
from profan.trace.profile import Profile


class Progress:
    """One line per phase on stderr, only when it is a terminal (or forced)."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.started = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"profan: [{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


def _get_chip(name: str | None) -> chips.Chip | None:
    if name is None:
        return None
    try:
        return chips.get_chip(name)
    except KeyError:
        raise ConfigError(f"unknown chip {name!r} (see `profan chips`)") from None


def describe_shardings(profile: Profile) -> dict[str, ShardingReport]:
    """``profan.sharding.describe`` of every module of the profile, by module key."""
    out: dict[str, ShardingReport] = {}
    for key, module in profile.modules.items():
        try:
            out[key] = sharding.describe(module)
        except ProfanError:
            continue  # sharding we cannot read is shown as missing, not fatal to the report
    return out


def resolve_layout(path: str | Path, hlo: str | None) -> tuple[str, str | None]:
    """A run directory laid out as ``trace/`` (the profiler's output) beside ``hlo/`` (XLA's text
    dumps), as ``profan``'s fixtures and many CI jobs keep them: read the trace from ``trace/``
    and, unless ``--hlo`` says otherwise, join it to the dumps in ``hlo/``."""
    folder = Path(path)
    if folder.is_dir() and not (folder / "plugins").is_dir() and (folder / "trace").is_dir():
        if hlo is None and (folder / "hlo").is_dir():
            hlo = str(folder / "hlo")
        return str(folder / "trace"), hlo
    return str(path), hlo


def analyse(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    progress: Progress | None = None,
) -> Analysis:
    progress = progress or Progress(False)
    if not Path(path).exists():
        raise TraceError(str(path), "no such file or directory")
    progress(f"loading {path}")
    trace_path, hlo = resolve_layout(path, hlo)
    profile = profan.load(trace_path, hlo=hlo, run=run)
    progress(f"loaded {len(profile.ops)} op events, {len(profile.modules)} modules")
    progress("describing sharding")
    shardings = describe_shardings(profile)
    progress("scoring")
    score = roofline.score(profile, _get_chip(chip))
    _add_op_facts(score, profile, shardings)
    return Analysis(profile, score, shardings)


def report_for(
    path: str | Path,
    *,
    chip: str | None = None,
    hlo: str | None = None,
    run: str | None = None,
    config: RuleConfig | None = None,
    progress: Progress | None = None,
) -> Report:
    """The report of a trace, or of a JSON report file (read back as it was written)."""
    progress = progress or Progress(False)
    if str(path).endswith(".json") and Path(path).is_file():
        return read_json_report(path)
    analysis = analyse(path, chip=chip, hlo=hlo, run=run, progress=progress)
    progress("building the report")
    return build_report(analysis, config)


def read_json_report(path: str | Path) -> Report:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: cannot read JSON report: {error}") from None
    return Report.from_dict(data, where=str(path))


# --------------------------------------------------------------------------------------------
# Transitional (contract 3, PLAN.md): the facts ``Score.ops`` is gaining (scope, op_path,
# position, shape, collective) are filled in here from the HLO until the scorer returns them.


def _shape_text(shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(_shape_text(s) for s in shape.tuple_shapes) + ")"
    return f"{shape.dtype}[{','.join(str(d) for d in shape.dims)}]"


def _positions(module: Module) -> dict[str, int]:
    found: dict[str, int] = {}
    position = 0
    for computation in module.computations:
        for instruction in computation.instructions:
            found.setdefault(instruction.name, position)
            position += 1
    return found


def _collective_facts(
    instruction: Instruction, module: Module, sharding_report: ShardingReport | None
) -> dict | None:
    kind = collective_kind(instruction.opcode)
    if kind is None or kind in ("send", "recv"):
        return None
    devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    size: int | None
    groups: int | None
    try:
        pairs = views.source_target_pairs(instruction)
        decoded = views.replica_groups(instruction, devices) if pairs is None else None
    except ProfanError:
        pairs, decoded = None, None
    if pairs is not None:
        size, groups = len(pairs) or None, None
    elif decoded is None:
        size, groups = None, None
    else:
        size, groups = (len(decoded[0]), len(decoded)) if decoded else (devices, 1)
    axes = None
    for collective in sharding_report.collectives if sharding_report is not None else []:
        if collective.name == instruction.name:
            axes = collective.axes
            break
    return {
        "kind": base_opcode(instruction.opcode),
        "group_size": size,
        "num_groups": groups,
        "axes": axes,
        "output_bytes": sum(logical_bytes(leaf) for leaf in instruction.shape.leaves()),
    }


def _global_shape(instruction: Instruction) -> str | None:
    text = instruction.attributes.get("sharding")
    shape = instruction.shape
    if not text or not shape.is_array:
        return None
    try:
        decoded = decode_sharding(text)
    except ProfanError:
        return None
    tiles = decoded.data_tile_dims
    if len(tiles) < len(shape.dims):
        return None
    scaled = [d * t for d, t in zip(shape.dims, tiles, strict=False)]
    if scaled == list(shape.dims):
        return None
    return f"{shape.dtype}[{','.join(str(d) for d in scaled)}]"


def _add_op_facts(
    score: roofline.Score, profile: Profile, shardings: dict[str, ShardingReport]
) -> None:
    ops = score.ops
    if "position" in ops:
        return  # the scorer returns them
    columns: dict[str, list] = {
        k: [] for k in ("scope", "op_path", "position", "shape", "collective", "global_shape")
    }
    positions: dict[str, dict[str, int]] = {}
    for module_key, name in zip(ops["module_key"], ops["name"], strict=True):
        key = module_key if isinstance(module_key, str) else ""
        module = profile.modules.get(key) if key else None
        instruction = profile.instruction(key, str(name)) if module is not None else None
        if instruction is None or module is None:
            for values in columns.values():
                values.append(None)
            continue
        if key not in positions:
            positions[key] = _positions(module)
        columns["scope"].append(scope_of(instruction))
        columns["op_path"].append(op_name_of(instruction))
        columns["position"].append(positions[key].get(instruction.name))
        columns["shape"].append(_shape_text(instruction.shape))
        columns["collective"].append(_collective_facts(instruction, module, shardings.get(key)))
        columns["global_shape"].append(_global_shape(instruction))
    for name, values in columns.items():
        ops[name] = pd.Series(values, index=ops.index, dtype=object)

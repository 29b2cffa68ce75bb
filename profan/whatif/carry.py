"""The carry-over model's parameters, read from ``profan/data/whatif.toml`` (docs/whatif.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from profan.errors import ConfigError

MODEL_FILE = Path(__file__).resolve().parent.parent / "data" / "whatif.toml"


@dataclass(frozen=True, slots=True)
class Sustained:
    """A chip's sustained fraction of its catalogue peaks, relative to the reference chip."""

    compute: float = 1.0
    hbm: float = 1.0
    ici: float = 1.0
    source: str = "not fitted: the catalogue's peaks (spec-sheet ratio)"


@dataclass(frozen=True, slots=True)
class CarryOver:
    """``t' = fixed + (t - fixed) * (1 - s + s * R'/R)`` with R on each chip's sustained figures,
    ``fixed`` per kernel launch and ``s`` the op's efficiency over ``knee`` (at most 1)."""

    fixed_s: float  # per kernel launch
    knee: float  # efficiency (roofline / measured, sustained figures) from which an op scales fully
    op_residual: float  # rms of log(projected / measured) per execution, time-weighted
    step_residual: float  # largest relative error of a projected op time per step
    reference_chip: str
    fitted_on: str
    chips: dict[str, Sustained] = field(default_factory=dict)

    def sustained(self, chip: str) -> Sustained:
        return self.chips.get(chip, Sustained())


def _number(table: dict, key: str, where: str) -> float:
    value = table.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{where}: {key} must be a number >= 0, got {value!r}")
    return float(value)


def parse_carry_over(data: dict, where: str) -> CarryOver:
    model = data.get("model")
    if not isinstance(model, dict):
        raise ConfigError(f"{where}: no [model] table")
    chips = {}
    for name, table in (data.get("chips") or {}).items():
        at = f"{where}: [chips.{name}]"
        chips[name] = Sustained(
            compute=_number(table, "compute", at),
            hbm=_number(table, "hbm", at),
            ici=_number(table, "ici", at),
            source=str(table.get("source", "")),
        )
    return CarryOver(
        fixed_s=_number(model, "fixed_s", where),
        knee=_number(model, "knee", where),
        op_residual=_number(model, "op_residual", where),
        step_residual=_number(model, "step_residual", where),
        reference_chip=str(model.get("reference_chip", "")),
        fitted_on=str(model.get("fitted_on", "")),
        chips=chips,
    )


@cache
def carry_over(path: Path = MODEL_FILE) -> CarryOver:
    from profan.tomlschema import read_config

    return parse_carry_over(read_config(path, what="the whatif model", syntax="toml"), str(path))

"""Thresholds of the suspicious-op rules; defaults here, overridable from ``profan.toml``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from profan.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """Every threshold a rule uses.  ``[rules]`` in ``profan.toml`` overrides any of them."""

    # ignore ops that take less than this share of total op time (noise)
    min_time_share: float = 0.01
    # far-from-roofline: efficiency below this
    efficiency_below: float = 0.10
    # collectives: flag when more than this fraction of their time is not hidden behind compute
    exposed_fraction_above: float = 0.5
    # latency-bound collectives: buffers under this many bytes, at least this many of them
    latency_bytes_below: float = 45e3
    latency_min_count: int = 2
    # relayout copies / transposes moving more than this share of the step's HBM bytes
    relayout_bytes_share_above: float = 0.05
    # tiled layouts storing more than this many times the logical bytes
    padding_ratio_above: float = 1.25
    # matmul dims under this size waste the MXU (the chip's own MXU size wins when known)
    mxu_size: int = 128
    # f32 matmuls flagged on these device kinds (bf16 is usually meant there)
    f32_matmul_device_kinds: tuple[str, ...] = ("TPU", "GPU")
    # small-MXU-dim rule applies on these device kinds
    mxu_device_kinds: tuple[str, ...] = ("TPU",)
    # host transfers: flag when more than this fraction of their time is exposed
    host_exposed_fraction_above: float = 0.5
    # all-gathers producing more than this fraction of the chip's HBM
    allgather_hbm_fraction_above: float = 0.05
    # idle: gaps between steps longer than this fraction of the median step time
    idle_gap_fraction_above: float = 0.10
    disabled: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_mapping(cls, table: dict[str, Any], *, where: str = "[rules]") -> RuleConfig:
        known = {f.name: f for f in fields(cls)}
        updates: dict[str, Any] = {}
        for key, value in table.items():
            name = key.replace("-", "_")
            if name not in known:
                raise ConfigError(
                    f"{where}: unknown rule setting {key!r}; known: {', '.join(sorted(known))}"
                )
            default = getattr(cls(), name)
            if isinstance(default, tuple):
                if not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise ConfigError(f"{where}: {key} must be a list of strings")
                value = tuple(value)
            elif isinstance(default, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
            elif isinstance(default, int) and not isinstance(value, int):
                raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
            updates[name] = value
        return replace(cls(), **updates)

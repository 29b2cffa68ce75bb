"""``profan.toml``: thresholds of the rules (``[rules]``), a typed msgspec struct.

Unknown keys are errors.  A file that does not fit its types is a ``ConfigError`` naming the
file, the key and what is allowed there (``profan.tomlschema``; exit code 2).  The budget and
baseline tables are in ``profan.report.check.budget``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import msgspec

from profan.tomlschema import convert, read_toml

NonNegative = Annotated[float, msgspec.Meta(ge=0)]


class RuleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every threshold a rule uses.  ``[rules]`` in ``profan.toml`` overrides any of them."""

    # ignore ops that take less than this share of total op time (noise)
    min_time_share: NonNegative = 0.01
    # far-from-roofline: efficiency below this
    efficiency_below: NonNegative = 0.10
    # collectives: flag when more than this fraction of their time is not hidden behind compute
    exposed_fraction_above: NonNegative = 0.5
    # latency-bound collectives: buffers under this many bytes, at least this many of them
    latency_bytes_below: NonNegative = 45e3
    latency_min_count: Annotated[int, msgspec.Meta(ge=0)] = 2
    # relayout copies / transposes moving more than this share of the step's HBM bytes
    relayout_bytes_share_above: NonNegative = 0.05
    # tiled layouts storing more than this many times the logical bytes
    padding_ratio_above: NonNegative = 1.25
    # matmul dims under this size waste the MXU (the chip's own MXU size wins when known)
    mxu_size: Annotated[int, msgspec.Meta(ge=0)] = 128
    # f32 matmuls flagged on these device kinds (bf16 is usually meant there)
    f32_matmul_device_kinds: tuple[str, ...] = ("TPU", "GPU")
    # small-MXU-dim rule applies on these device kinds
    mxu_device_kinds: tuple[str, ...] = ("TPU",)
    # host transfers: flag when more than this fraction of their time is exposed
    host_exposed_fraction_above: NonNegative = 0.5
    # all-gathers producing more than this fraction of the chip's HBM
    allgather_hbm_fraction_above: NonNegative = 0.05
    # idle: gaps between steps longer than this fraction of the median step time
    idle_gap_fraction_above: NonNegative = 0.10
    # memory (profan.report.rules.memory): a program's peak above this share of the chip's
    # memory per device; one temporary buffer above this share of its program's peak
    memory_near_capacity_above: NonNegative = 0.90
    memory_large_temporary_share_above: NonNegative = 0.25
    # Floors (profan.report.rules.savings): a finding whose estimated saving is below its rule's
    # floor stays silent and counts toward no budget.  Time: under this share of the devices' time
    # (busy span x devices).  Memory: under this many bytes per device, or under this share of
    # the chip's memory per device.
    min_saving_share: NonNegative = 0.005
    min_saving_bytes: NonNegative = 1 << 20
    min_saving_memory_share: NonNegative = 0.001
    disabled: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, origin: str = "profan.toml") -> RuleConfig:
        """The thresholds of a ``[rules]`` table (``a-b`` and ``a_b`` spell the same key)."""
        fields = {k.replace("-", "_"): v for k, v in table.items()}
        return convert(fields, cls, origin=origin, key="rules")


def load_rule_config(path: str | Path | None) -> RuleConfig:
    """``[rules]`` of a ``profan.toml`` (defaults without a file)."""
    if path is None:
        return RuleConfig()
    tables = read_toml(path, what="the rule configuration")
    return RuleConfig.from_mapping(tables.get("rules", {}), origin=str(path))

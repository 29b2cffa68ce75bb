"""The chip catalogue: hardware figures per chip, read from ``profan/data/chips.toml``.

Figures are per chip; a ``Chip`` also answers per JAX *device* (TPU v2/v3 expose each TensorCore
as a device, so a device has half the chip).  A user TOML file with the same schema adds or
replaces chips: ``--chips FILE`` on the command line (default ``$PROFAN_CHIPS``), put in force
for the command by ``using_chip_file``.

``chip_for_device(DeviceInfo)`` maps what a trace says about its device to an entry; the trace's
own peak figures win when present and ``Chip.figure_sources`` says where each figure came from.

``Chip.peak_flops_per_s(dtype, precision)`` is the peak a dot or convolution is measured against
(``profan.chips.peaks``).
TPU v4 and v5p are *megacore* chips: two TensorCores act as one device; ``Chip.per_core()``
gives the figures of one TensorCore for traces that account per core.
"""

from __future__ import annotations

import dataclasses
import math
import os
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from profan.chips.peaks import Peak, peak_for
from profan.errors import ConfigError
from profan.paths import data_path
from profan.tomlschema import convert, read_named_tables

if TYPE_CHECKING:
    from profan.trace.profile import DeviceInfo

CATALOGUE_FILE = "chips.toml"

Kind = Literal["TPU", "GPU", "CPU"]
Topology = Literal["torus2d", "torus3d", "switched", "fully-connected", "none"]
Wraparound = Literal["always", "never", "axis-16", "cube-4"]
TOPOLOGIES: tuple[str, ...] = typing.get_args(Topology)
WRAPAROUND_RULES: tuple[str, ...] = typing.get_args(Wraparound)
# The catalogue's peak-rate keys: the matrix unit's rate per operand format (tf32 = f32 operands
# rounded to 10 mantissa bits on NVIDIA tensor cores).
DTYPES = ("bf16", "fp8", "int8", "tf32", "f32", "f64")
# A trace's own peak figure replaces the catalogue's unless it is below this share of it.
TRACE_FIGURE_FLOOR = 0.75

Positive = Annotated[float, msgspec.Meta(gt=0)]
NonNegative = Annotated[float, msgspec.Meta(ge=0)]
Count = Annotated[int, msgspec.Meta(ge=1)]


class PeakFlopsEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """``peak_flops`` of a catalogue entry: dense FLOP/s per chip by operand format."""

    bf16: Positive
    fp8: Positive | None = None
    int8: Positive | None = None
    tf32: Positive | None = None
    f32: Positive | None = None
    f64: Positive | None = None


class ChipEntry(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One ``[chips.NAME]`` table of a chip file (the schema; see chips.toml's header)."""

    peak_flops: PeakFlopsEntry
    transcendentals_per_s: Positive | None = None
    hbm_bytes: NonNegative
    hbm_bytes_per_s: NonNegative
    ici_link_bytes_per_s_uni: NonNegative
    ici_link_bytes_per_s_bi: NonNegative
    ici_links: Annotated[int, msgspec.Meta(ge=0)]
    topology: Topology
    ici_hop_latency_s: NonNegative
    dcn_bytes_per_s: NonNegative
    pcie_bytes_per_s: NonNegative
    display_name: str | None = None
    kind: Kind = "TPU"
    wraparound: Wraparound = "never"
    devices_per_chip: Count = 1
    tensorcores_per_chip: Count = 1
    megacore: bool = False
    mxu_size: Annotated[int, msgspec.Meta(ge=0)] = 0
    device_strings: list[str] = []
    vendor: str | None = None
    compute_capabilities: list[str] = []
    approximate: bool = False
    sources: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Chip:
    """One accelerator's figures (per chip; see ``device_*`` for per-device values)."""

    name: str  # catalogue key, e.g. "tpu-v5e"
    display_name: str
    kind: str  # "TPU" | "GPU" | "CPU"
    peak_flops: dict[str, float]  # dtype -> dense FLOP/s per chip
    hbm_bytes: float
    hbm_bytes_per_s: float
    ici_link_bytes_per_s_uni: float
    ici_link_bytes_per_s_bi: float
    ici_links: int
    topology: str
    ici_hop_latency_s: float
    dcn_bytes_per_s: float
    pcie_bytes_per_s: float
    wraparound: str = "never"
    # elementwise transcendentals (exp, log, tanh, …) per second per chip: the TPU's EUP, a GPU's
    # special function units; None = unknown (the compute roofline then times FLOPs alone)
    transcendentals_per_s: float | None = None
    devices_per_chip: int = 1
    # TensorCores per chip; on a megacore chip (TPU v4, v5p) they act as one device.
    tensorcores_per_chip: int = 1
    megacore: bool = False
    mxu_size: int = 0
    device_strings: tuple[str, ...] = ()
    vendor: str | None = None
    compute_capabilities: tuple[str, ...] = ()
    approximate: bool = False
    sources: dict[str, str] = field(default_factory=dict)  # field -> citation
    # Where each figure used for scoring came from: "catalogue" or "trace".
    figure_sources: dict[str, str] = field(default_factory=dict)

    # ---- per-device views (what one JAX device, i.e. one trace plane, can do) ----

    def device_peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s of one device for a catalogue rate key (falls back to bf16)."""
        key = normalise_dtype(dtype)
        rate = self.peak_flops.get(key)
        if rate is None:
            rate = self.peak_flops.get("bf16") or max(self.peak_flops.values())
        return rate / self.devices_per_chip

    def device_peak_flops_source(self, dtype: str = "bf16") -> str:
        key = normalise_dtype(dtype)
        if key not in self.peak_flops:
            key = "bf16"
        return self.figure_sources.get(f"peak_flops.{key}", "catalogue")

    def peak_flops_per_s(
        self,
        dtype: str | None,
        precision: str | typing.Sequence[str] | None = None,
        *,
        algorithm: str | None = None,
    ) -> Peak:
        """The peak of one device for a dot/convolution with ``dtype`` operands.

        ``precision``: the operand precisions (``DEFAULT``/``HIGH``/``HIGHEST``, one or one per
        operand, or the HLO text ``{highest,highest}``; the highest counts, as XLA does);
        ``algorithm``: a dot algorithm (``ALG_DOT_BF16_BF16_F32_X3`` or
        ``dot_bf16_bf16_f32_x3``, also accepted as the precision text), which wins when set.
        """
        return peak_for(self, dtype, precision, algorithm)

    @property
    def device_transcendentals_per_s(self) -> float | None:
        """Transcendentals per second of one device, ``None`` when the catalogue has no rate."""
        rate = self.transcendentals_per_s
        return None if rate is None else rate / self.devices_per_chip

    def transcendentals_source(self) -> str:
        """Where the transcendental rate comes from, in words (``unknown …`` without one)."""
        citation = self.sources.get("transcendentals", "")
        if self.transcendentals_per_s is None:
            return citation if citation.startswith("unknown") else "unknown: no rate in chips.toml"
        return f"chips.toml {self.name} transcendentals_per_s" + (
            f" ({citation})" if citation else ""
        )

    @property
    def device_hbm_bytes_per_s(self) -> float:
        return self.hbm_bytes_per_s / self.devices_per_chip

    @property
    def device_hbm_capacity_bytes(self) -> float:
        return self.hbm_bytes / self.devices_per_chip

    @property
    def figures_source(self) -> str:
        """``trace`` when any figure used for scoring came from the trace, else ``catalogue``."""
        return "trace" if "trace" in self.figure_sources.values() else "catalogue"

    @property
    def critical_intensity_bf16(self) -> float:
        """FLOPs per HBM byte at which a bf16 op turns compute-bound (MODEL.md section 1)."""
        return self.peak_flops["bf16"] / self.hbm_bytes_per_s

    def per_core(self) -> Chip:
        """The figures of one TensorCore of a megacore chip (compute and HBM split evenly).

        A trace that accounts per TensorCore (each core's share of an op) is scored against
        these; a chip that is not megacore is returned unchanged.
        """
        cores = self.tensorcores_per_chip
        if not self.megacore or cores <= 1:
            return self
        sources = dict(self.figure_sources)
        sources["accounting"] = f"per TensorCore: chip figures / {cores} (megacore)"
        return dataclasses.replace(
            self,
            peak_flops={key: rate / cores for key, rate in self.peak_flops.items()},
            transcendentals_per_s=(
                None if self.transcendentals_per_s is None else self.transcendentals_per_s / cores
            ),
            hbm_bytes_per_s=self.hbm_bytes_per_s / cores,
            hbm_bytes=self.hbm_bytes / cores,
            tensorcores_per_chip=1,
            megacore=False,
            figure_sources=sources,
        )

    def has_wraparound(
        self,
        axis_size: int,
        slice_shape: tuple[int, ...] | None = None,
        slice_devices: int | None = None,
    ) -> bool:
        """Whether a ring along a mesh axis of ``axis_size`` chips has its wraparound link.

        TPU v5e/v6e: only axes of exactly 16 (MODEL.md section 4); v4/v5p: axes that are whole
        4x4x4 cubes (size a multiple of 4, and the slice made of whole cubes when its shape or
        device count is known).
        Axes of 1 or 2 chips: both directions reach the one neighbour, so treat as a ring.
        """
        if self.topology not in ("torus2d", "torus3d"):
            return True  # switched fabrics: every device reaches every other directly
        if axis_size <= 2:
            return True
        rule = self.wraparound
        if rule == "always":
            return True
        if rule == "axis-16":
            return axis_size == 16
        if rule == "cube-4":
            if axis_size % 4:
                return False
            if slice_devices is not None and slice_devices % 64:
                return False  # not made of whole 4x4x4 cubes
            return slice_shape is None or all(size % 4 == 0 for size in slice_shape)
        return False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def normalise_dtype(dtype: str) -> str:
    """Map an HLO element type to the catalogue's classic rate keys (bf16, fp8, int8, f32)."""
    dtype = dtype.lower()
    if dtype.startswith("f8") or dtype in ("fp8",):
        return "fp8"
    if dtype in ("s8", "u8", "int8", "s4", "u4"):
        return "int8"
    if dtype in ("f32", "f64", "c64", "c128", "tf32"):
        return "f32"
    return "bf16"  # bf16, f16 and anything else run at the 16-bit matrix rate


# ---------------------------------------------------------------------------- loading


def _chip_from_table(name: str, table: Any, origin: str) -> Chip:
    entry = convert(table, ChipEntry, origin=origin, key=f"chips.{name}")
    if entry.megacore and (entry.tensorcores_per_chip < 2 or entry.devices_per_chip != 1):
        raise ConfigError(
            f"{origin}: chips.{name}.megacore: a megacore chip has tensorcores_per_chip >= 2 "
            "acting as one device (devices_per_chip = 1)"
        )
    peak_flops = {
        dtype: float(rate)
        for dtype in DTYPES
        if (rate := getattr(entry.peak_flops, dtype)) is not None
    }
    return Chip(
        name=name,
        display_name=entry.display_name or name,
        kind=entry.kind,
        peak_flops=peak_flops,
        hbm_bytes=float(entry.hbm_bytes),
        hbm_bytes_per_s=float(entry.hbm_bytes_per_s),
        ici_link_bytes_per_s_uni=float(entry.ici_link_bytes_per_s_uni),
        ici_link_bytes_per_s_bi=float(entry.ici_link_bytes_per_s_bi),
        ici_links=entry.ici_links,
        topology=entry.topology,
        ici_hop_latency_s=float(entry.ici_hop_latency_s),
        dcn_bytes_per_s=float(entry.dcn_bytes_per_s),
        pcie_bytes_per_s=float(entry.pcie_bytes_per_s),
        wraparound=entry.wraparound,
        transcendentals_per_s=(
            None if entry.transcendentals_per_s is None else float(entry.transcendentals_per_s)
        ),
        devices_per_chip=entry.devices_per_chip,
        tensorcores_per_chip=entry.tensorcores_per_chip,
        megacore=entry.megacore,
        mxu_size=entry.mxu_size,
        device_strings=tuple(entry.device_strings),
        vendor=entry.vendor,
        compute_capabilities=tuple(entry.compute_capabilities),
        approximate=entry.approximate,
        sources=dict(entry.sources),
        figure_sources={"all": "catalogue" if origin == CATALOGUE_FILE else origin},
    )


def read_chip_file(path: str | os.PathLike[str]) -> dict[str, Chip]:
    """Chips defined in one TOML file (``[chips.NAME]`` tables)."""
    path = Path(path)
    origin = path.name if path == data_path(CATALOGUE_FILE) else str(path)
    tables = read_named_tables(path, "chips", what="chip file")
    return {name: _chip_from_table(name, table, origin) for name, table in tables.items()}


_BUILTIN: dict[str, Chip] | None = None
# The user's chips in force (``using_chip_file``): part of every lookup within the block.
_USER_CHIPS: ContextVar[dict[str, Chip] | None] = ContextVar("profan user chips", default=None)


@contextmanager
def using_chip_file(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Within: the chips of ``path`` (read and checked now; None: none) are part of the
    catalogue, adding or replacing chips (a command's ``--chips``, ``RunOptions.in_force``)."""
    token = _USER_CHIPS.set(read_chip_file(path) if path else None)
    try:
        yield
    finally:
        _USER_CHIPS.reset(token)


def catalogue(extra: str | Path | None = None) -> dict[str, Chip]:
    """Every known chip: the packaged catalogue, then the user's chips in force
    (``using_chip_file``), then ``extra``."""
    global _BUILTIN
    if _BUILTIN is None:
        _BUILTIN = read_chip_file(data_path(CATALOGUE_FILE))
    chips = dict(_BUILTIN)
    chips.update(_USER_CHIPS.get() or {})
    if extra is not None:
        chips.update(read_chip_file(extra))
    return chips


def _key(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def get_chip(name: str, *, extra: str | Path | None = None) -> Chip:
    """A chip by catalogue name (``tpu-v5e``), display name or a device string (``TPU v5 lite``)."""
    chips = catalogue(extra)
    if name in chips:
        return chips[name]
    wanted = _key(name)
    for chip in chips.values():
        names = (chip.name, chip.display_name, *chip.device_strings)
        if any(_key(candidate) == wanted for candidate in names):
            return chip
    raise ConfigError(f"unknown chip {name!r}; known chips: {', '.join(sorted(chips))}")


def match_device_string(type_string: str, chips: dict[str, Chip] | None = None) -> Chip | None:
    """The chip a trace's device string names: exact match first, then the longest contained one.

    Longest-first matters: ``TPU v5 lite`` contains ``TPU v5`` (v5p) but means v5e.
    """
    chips = chips if chips is not None else catalogue()
    wanted = _key(type_string)
    if not wanted:
        return None
    best: tuple[int, Chip] | None = None
    for chip in chips.values():
        for candidate in (*chip.device_strings, chip.display_name):
            key = _key(candidate)
            if not key:
                continue
            if key == wanted:
                return chip
            if key in wanted and (best is None or len(key) > best[0]):
                best = (len(key), chip)
    return best[1] if best else None


def _compute_capability(stats: dict[str, object]) -> str | None:
    major = stats.get("compute_cap_major")
    minor = stats.get("compute_cap_minor")
    if major is not None:
        return f"{major}.{minor or 0}"
    for key in ("compute_capability", "gcn_arch_name"):
        if stats.get(key):
            return str(stats[key]).split(":")[0]
    return None


def _match_gpu(stats: dict[str, object], chips: dict[str, Chip]) -> tuple[Chip | None, str]:
    """A GPU by vendor + compute capability; memory size breaks ties (H100 80 GB vs H200)."""
    capability = _compute_capability(stats)
    if not capability:
        return None, ""
    vendor = str(stats.get("device_vendor") or "").lower()
    candidates = [
        chip
        for chip in chips.values()
        if capability in chip.compute_capabilities
        and (not vendor or not chip.vendor or chip.vendor.lower() == vendor)
    ]
    if not candidates:
        return None, ""
    how = f"{vendor or 'GPU'} compute capability {capability}"
    memory = stats.get("memory_size")
    if isinstance(memory, int | float) and memory > 0:
        candidates.sort(key=lambda chip: abs(math.log(chip.hbm_bytes / float(memory))))
        if len(candidates) > 1:  # say what told them apart
            nearest = candidates[0]
            how += (
                f", {memory / 1e9:.0f} GB of memory: nearest {nearest.name}'s "
                f"{nearest.hbm_bytes / 1e9:.0f} GB"
            )
    return candidates[0], how


def _transcendentals_figure(chip: Chip) -> str:
    """``catalogue`` or ``unknown``: traces carry no transcendental rate of their own."""
    return "catalogue" if chip.transcendentals_per_s is not None else "unknown"


def chip_for_device(device: DeviceInfo, *, override: str | None = None) -> Chip:
    """The catalogue chip for a trace's device, with the trace's own peak figures applied.

    ``override`` (``--chip NAME``) picks the entry by name instead of by the device string.
    Figures the trace carries (``peak_flops_per_s`` for bf16, ``peak_hbm_bytes_per_s``) replace
    the catalogue's — unless ``override`` names a different chip than the trace's (a what-if:
    the trace's figures describe other hardware); ``figure_sources`` records where each came from.
    """
    chips = catalogue()
    detected: Chip | None = None
    how = ""
    if device.type_string:
        detected = match_device_string(device.type_string, chips)
        how = f"device string {device.type_string!r}"
    if detected is None and device.kind == "GPU":
        detected, how = _match_gpu(device.stats, chips)
    if detected is None and device.kind == "CPU":
        detected = chips["cpu"]
        how = "CPU device"
    chip = detected
    if override:
        chip = get_chip(override)
        if detected is not None and detected.name != chip.name:
            sources = {
                "chip": f"--chip {override}",
                "note": f"the trace ran on {detected.name}; its own figures are not used",
            }
            for dtype in chip.peak_flops:
                sources[f"peak_flops.{dtype}"] = "catalogue"
            sources["hbm_bytes_per_s"] = "catalogue"
            sources["transcendentals_per_s"] = _transcendentals_figure(chip)
            return dataclasses.replace(chip, figure_sources=sources)
        how = f"--chip {override}"
    if chip is None:
        raise ConfigError(
            f"cannot tell which chip the trace ran on (device {device.kind} "
            f"{device.type_string!r}); pass --chip NAME (one of {', '.join(sorted(chips))})"
        )
    sources = {"chip": how}
    peak = dict(chip.peak_flops)
    hbm_bw = chip.hbm_bytes_per_s
    for dtype in peak:
        sources[f"peak_flops.{dtype}"] = "catalogue"
    sources["hbm_bytes_per_s"] = "catalogue"
    sources["transcendentals_per_s"] = _transcendentals_figure(chip)
    # The trace describes one device; the catalogue holds per-chip figures.
    # A roofline must stay a lower bound on time: a trace figure far below the published peak
    # (ROCm derives "memory_bandwidth" from the memory clock without the double data rate, half
    # of MI300X's 5.3 TB/s) would let ops beat their roofline, so the catalogue keeps it then.
    if device.peak_flops_per_s:
        traced = float(device.peak_flops_per_s) * chip.devices_per_chip
        if traced >= TRACE_FIGURE_FLOOR * peak["bf16"]:
            peak["bf16"] = traced
            sources["peak_flops.bf16"] = "trace"
        else:
            sources["peak_flops.bf16"] = f"catalogue (trace reported {traced:.3g}, too low)"
    if device.peak_hbm_bytes_per_s:
        traced = float(device.peak_hbm_bytes_per_s) * chip.devices_per_chip
        if traced >= TRACE_FIGURE_FLOOR * hbm_bw:
            hbm_bw = traced
            sources["hbm_bytes_per_s"] = "trace"
        else:
            sources["hbm_bytes_per_s"] = f"catalogue (trace reported {traced:.3g}, too low)"
    return dataclasses.replace(
        chip, peak_flops=peak, hbm_bytes_per_s=hbm_bw, figure_sources=sources
    )

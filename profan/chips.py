"""The chip catalogue: hardware figures per chip, read from ``profan/data/chips.toml``.

Figures are per chip; a ``Chip`` also answers per JAX *device* (TPU v2/v3 expose each TensorCore
as a device, so a device has half the chip).  A user TOML file with the same schema adds or
replaces chips: ``PROFAN_CHIPS=/path/chips.toml`` or ``--chips FILE`` on the command line.

``chip_for_device(DeviceInfo)`` maps what a trace says about its device to an entry; the trace's
own peak figures win when present and ``Chip.figure_sources`` says where each figure came from.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profan.errors import ConfigError
from profan.paths import data_path

if TYPE_CHECKING:
    from profan.trace.profile import DeviceInfo

CATALOGUE_FILE = "chips.toml"
USER_CHIPS_ENV = "PROFAN_CHIPS"

TOPOLOGIES = ("torus2d", "torus3d", "switched", "fully-connected", "none")
WRAPAROUND_RULES = ("always", "never", "axis-16", "cube-4")
DTYPES = ("bf16", "fp8", "int8", "f32")
# A trace's own peak figure replaces the catalogue's unless it is below this share of it.
TRACE_FIGURE_FLOOR = 0.75

# Required numeric fields of a catalogue entry (name -> description for error messages).
_NUMERIC_FIELDS = (
    "hbm_bytes",
    "hbm_bytes_per_s",
    "ici_link_bytes_per_s_uni",
    "ici_link_bytes_per_s_bi",
    "ici_links",
    "ici_hop_latency_s",
    "dcn_bytes_per_s",
    "pcie_bytes_per_s",
)


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
    devices_per_chip: int = 1
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
        """Dense peak FLOP/s of one device for the math dtype (falls back to bf16)."""
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

    @property
    def device_hbm_bytes_per_s(self) -> float:
        return self.hbm_bytes_per_s / self.devices_per_chip

    @property
    def critical_intensity_bf16(self) -> float:
        """FLOPs per HBM byte at which a bf16 op turns compute-bound (MODEL.md section 1)."""
        return self.peak_flops["bf16"] / self.hbm_bytes_per_s

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
    """Map an HLO element type to the catalogue's peak-rate keys (bf16, fp8, int8, f32)."""
    dtype = dtype.lower()
    if dtype.startswith("f8") or dtype in ("fp8",):
        return "fp8"
    if dtype in ("s8", "u8", "int8", "s4", "u4"):
        return "int8"
    if dtype in ("f32", "f64", "c64", "c128", "tf32"):
        return "f32"
    return "bf16"  # bf16, f16 and anything else run at the 16-bit matrix rate


# ---------------------------------------------------------------------------- loading


def _chip_from_table(name: str, table: dict[str, Any], origin: str) -> Chip:
    def need(key: str) -> Any:
        if key not in table:
            raise ConfigError(f"{origin}: chip {name!r} lacks the field {key!r}")
        return table[key]

    peak = need("peak_flops")
    if not isinstance(peak, dict) or not peak:
        raise ConfigError(f"{origin}: chip {name!r}: peak_flops must be a table dtype = FLOP/s")
    peak_flops: dict[str, float] = {}
    for dtype, rate in peak.items():
        if dtype not in DTYPES:
            raise ConfigError(
                f"{origin}: chip {name!r}: unknown dtype {dtype!r} in peak_flops "
                f"(expected one of {', '.join(DTYPES)})"
            )
        if not isinstance(rate, int | float) or rate <= 0:
            raise ConfigError(f"{origin}: chip {name!r}: peak_flops.{dtype} must be > 0")
        peak_flops[dtype] = float(rate)
    if "bf16" not in peak_flops:
        raise ConfigError(f"{origin}: chip {name!r}: peak_flops needs at least bf16")
    numbers: dict[str, float] = {}
    for key in _NUMERIC_FIELDS:
        value = need(key)
        if not isinstance(value, int | float) or value < 0:
            raise ConfigError(f"{origin}: chip {name!r}: {key} must be a number >= 0")
        numbers[key] = float(value)
    topology = need("topology")
    if topology not in TOPOLOGIES:
        raise ConfigError(
            f"{origin}: chip {name!r}: topology {topology!r} is not one of {', '.join(TOPOLOGIES)}"
        )
    wraparound = table.get("wraparound", "never")
    if wraparound not in WRAPAROUND_RULES:
        raise ConfigError(
            f"{origin}: chip {name!r}: wraparound {wraparound!r} is not one of "
            f"{', '.join(WRAPAROUND_RULES)}"
        )
    kind = table.get("kind", "TPU")
    if kind not in ("TPU", "GPU", "CPU"):
        raise ConfigError(f"{origin}: chip {name!r}: kind must be TPU, GPU or CPU")
    sources = {str(k): str(v) for k, v in table.get("sources", {}).items()}
    return Chip(
        name=name,
        display_name=str(table.get("display_name", name)),
        kind=kind,
        peak_flops=peak_flops,
        hbm_bytes=numbers["hbm_bytes"],
        hbm_bytes_per_s=numbers["hbm_bytes_per_s"],
        ici_link_bytes_per_s_uni=numbers["ici_link_bytes_per_s_uni"],
        ici_link_bytes_per_s_bi=numbers["ici_link_bytes_per_s_bi"],
        ici_links=int(numbers["ici_links"]),
        topology=topology,
        ici_hop_latency_s=numbers["ici_hop_latency_s"],
        dcn_bytes_per_s=numbers["dcn_bytes_per_s"],
        pcie_bytes_per_s=numbers["pcie_bytes_per_s"],
        wraparound=wraparound,
        devices_per_chip=int(table.get("devices_per_chip", 1)),
        mxu_size=int(table.get("mxu_size", 0)),
        device_strings=tuple(str(s) for s in table.get("device_strings", ())),
        vendor=str(table["vendor"]) if "vendor" in table else None,
        compute_capabilities=tuple(str(c) for c in table.get("compute_capabilities", ())),
        approximate=bool(table.get("approximate", False)),
        sources=sources,
        figure_sources={"all": "catalogue" if origin == CATALOGUE_FILE else origin},
    )


def read_chip_file(path: str | Path) -> dict[str, Chip]:
    """Chips defined in one TOML file (``[chips.NAME]`` tables)."""
    path = Path(path)
    origin = path.name if path == data_path(CATALOGUE_FILE) else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read chip file: {error.strerror or error}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    tables = document.get("chips")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f"{path}: no [chips.NAME] tables found")
    chips = {}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: chips.{name} must be a table")
        chips[name] = _chip_from_table(name, table, origin)
    return chips


_BUILTIN: dict[str, Chip] | None = None


def catalogue(extra: str | Path | None = None) -> dict[str, Chip]:
    """Every known chip: the packaged catalogue, then ``$PROFAN_CHIPS``, then ``extra``."""
    global _BUILTIN
    if _BUILTIN is None:
        _BUILTIN = read_chip_file(data_path(CATALOGUE_FILE))
    chips = dict(_BUILTIN)
    env_file = os.environ.get(USER_CHIPS_ENV)
    if env_file:
        chips.update(read_chip_file(env_file))
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
    memory = stats.get("memory_size")
    if isinstance(memory, int | float) and memory > 0:
        candidates.sort(key=lambda chip: abs(math.log(chip.hbm_bytes / float(memory))))
    how = f"{vendor or 'GPU'} compute capability {capability}"
    return candidates[0], how


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

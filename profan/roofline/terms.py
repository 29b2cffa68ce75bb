"""The roofline terms of one op execution (MODEL.md section 1).

``t_compute = FLOPs / peak FLOP/s`` (for the math dtype), ``t_transcendental = transcendentals /
the chip's transcendental rate``, ``t_hbm = HBM bytes / HBM bandwidth``, ``t_ici`` = the
collective's time (``profan.roofline.interconnect``), ``t_host`` = a copy between host memory and
HBM over PCIe; ``roofline = max(...)`` and ``bound_by`` is the largest term.

Transcendentals (exp, log, tanh, logistic, sqrt, … as XLA's cost analysis counts them, apart
from its FLOPs) run on their own unit: the EUP beside the VPU and MXU on a TPU, the special
function units beside the FMA pipes and tensor cores on a GPU.  The units work at the same time,
so the two compute terms are not added: an op takes at least the longer of them, and the bound
says which (``compute`` or ``transcendental``).  A chip without a transcendental rate in the
catalogue times FLOPs alone and the op's derivation says the rate is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profan.chips import Chip, normalise_dtype
from profan.cost import OpCost
from profan.cost.collectives import sent_bytes_per_device
from profan.roofline.interconnect import collective_time

BOUNDS = ("compute", "hbm", "ici", "host", "transcendental")
GPU_DEVICES_PER_NODE = 8  # NVLink/Infinity Fabric domain; groups wider than a node use DCN


@dataclass(slots=True)
class OpTimes:
    """Roofline times of one op execution."""

    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    t_host_s: float
    bound_by: str
    notes: list[str] = field(default_factory=list)
    peak: str | None = None  # the FLOP/s peak of the compute term: ``bf16``, ``tf32``, ``bf16/6``
    t_transcendental_s: float = 0.0  # transcendentals at the chip's rate (0: none, or unknown)

    @property
    def roofline_s(self) -> float:
        return max(
            self.t_compute_s, self.t_hbm_s, self.t_ici_s, self.t_host_s, self.t_transcendental_s
        )


def crosses_hosts(groups: list[list[int]], chip: Chip) -> bool:
    """Whether a GPU collective's groups span more than one node (then it runs over DCN)."""
    if chip.kind != "GPU" or not groups:
        return False
    return any(len({d // GPU_DEVICES_PER_NODE for d in group}) > 1 for group in groups)


def compute_peak(cost: OpCost, chip: Chip, notes: list[str]) -> tuple[float, str]:
    """The FLOP/s one device reaches for the op's math, and its label.  Matrix math (dots,
    convolutions, fusions and kernels built on them) runs on the matrix units at the rate its
    operand dtype and precision select (``Chip.peak_flops_per_s``: TF32 for f32 on NVIDIA, bf16
    passes on TPU, ...); other math at the catalogue rate of its dtype."""
    if cost.matrix_math:
        peak = chip.peak_flops_per_s(cost.dtype, cost.precision or None, algorithm=cost.algorithm)
        notes.append(f"compute peak {peak.label}: {peak.source}")
        return peak.flops_per_s, peak.label
    key = normalise_dtype(cost.dtype or "bf16")
    return chip.device_peak_flops(key), key if key in chip.peak_flops else "bf16"


def transcendental_time(cost: OpCost, chip: Chip, notes: list[str]) -> float:
    """The op's transcendentals at one device's transcendental rate; 0 without any, or when the
    chip's rate is unknown (``notes`` then says so: they are not timed)."""
    count = cost.transcendentals or 0.0
    if count <= 0:
        return 0.0
    rate = chip.device_transcendentals_per_s
    if rate is None:
        notes.append(
            f"{count:.3g} transcendentals not timed: {chip.name} has no transcendental rate in "
            "the chip catalogue"
        )
        return 0.0
    notes.append(
        f"{count:.3g} transcendentals at {rate:.3g}/s (chips.toml {chip.name} "
        "transcendentals_per_s, per device; `profan chips` says where it comes from)"
    )
    return count / rate


def op_times(
    cost: OpCost,
    chip: Chip,
    *,
    mesh_axes: tuple[int, ...] | None = None,
    slice_devices: int | None = None,
) -> OpTimes:
    """Roofline terms of one execution of an op with ``cost`` on ``chip`` (per device).

    ``mesh_axes``: sizes of the mesh axes a collective runs over, when the program's mesh is
    known (else read off its device groups); ``slice_devices``: devices in the slice (decides
    whether an axis has its wraparound link).
    """
    notes: list[str] = []
    flops = cost.flops or 0.0
    peak_flops, peak = compute_peak(cost, chip, notes)
    t_compute = flops / peak_flops if flops else 0.0
    t_transcendental = transcendental_time(cost, chip, notes)
    hbm = cost.roofline_bytes
    t_hbm = hbm / chip.device_hbm_bytes_per_s if hbm else 0.0
    t_ici = 0.0
    t_host = 0.0
    if cost.host_transfer:  # the half's bytes, in host memory or in HBM, cross PCIe
        t_host, t_hbm = cost.all_space_bytes / chip.pcie_bytes_per_s, 0.0
        notes.append("host <-> device copy: PCIe bandwidth")
    info = cost.collective
    if info is not None and info.group_size > 1:
        axis_sizes = mesh_axes or info.axis_sizes or (info.group_size,)
        timing = collective_time(
            info.kind,
            info.full_bytes,
            info.group_size,
            chip,
            n_axes=len(axis_sizes),
            axis_sizes=tuple(axis_sizes),
            slice_devices=slice_devices,
            crosses_hosts=crosses_hosts(info.groups, chip),
        )
        t_ici = timing.t_s
        notes.append(timing.describe())
    terms = {
        "compute": t_compute,
        "hbm": t_hbm,
        "ici": t_ici,
        "host": t_host,
        "transcendental": t_transcendental,
    }
    bound_by = max(terms, key=lambda key: terms[key]) if any(terms.values()) else "none"
    return OpTimes(
        t_compute, t_hbm, t_ici, t_host, bound_by, notes, peak if flops else None, t_transcendental
    )


def row_ici_bytes(cost: OpCost) -> float:
    """Interconnect bytes of one execution on the row that carries their time: an async
    collective's on its done (XLA's cost analysis puts them on the start, which only issues the
    transfer), none on the start."""
    if cost.async_role == "start":
        return 0.0
    info = cost.collective
    if cost.async_role == "done" and info is not None:
        return sent_bytes_per_device(info.kind, info.full_bytes, info.group_size)
    return cost.ici_bytes


def async_start_times(times: OpTimes) -> OpTimes:
    """A ``-start`` only issues its transfer: no roofline time of its own (scored on the done)."""
    return OpTimes(0.0, 0.0, 0.0, 0.0, "async-start", times.notes)

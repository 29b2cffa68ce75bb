"""Time of a collective over the interconnect (MODEL.md section 4).

Bandwidth-bound times, with ``V`` the bytes of the full (unsharded along the axis) array:

* all-gather / reduce-scatter: ``V / (W_bi x n_axes)`` on a full ring (wraparound link present);
  without the wraparound only one direction is usable: ``(n-1)/n x V / (W_uni x n_axes)``
  (MODEL.md 5b: 3 hops of an 8.4 MB shard at 4.5e10 B/s on a 4-long axis);
* all-reduce: twice the all-gather;
* all-to-all: a quarter of the all-gather on a bidirectional ring (half without wraparound);
* collective-permute: each device sends its buffer one hop: ``bytes / W_uni``.

Switched fabrics (NVLink/NVSwitch, Infinity Fabric) use a ring over the device's total egress
bandwidth ``links x W_uni``: ``(n-1)/n x V / (links x W_uni)``.  Groups that cross hosts/slices
use the DCN figure instead.

Latency floor: each hop costs ``ici_hop_latency_s`` (≈1 µs); a ring of ``n`` with wraparound needs
≈``n/2`` hops, without it ``n-1``.  ``T = max(T_hop x hops, T_bandwidth)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from profan.chips import Chip
from profan.cost.collectives import KINDS


@dataclass(frozen=True, slots=True)
class CollectiveTime:
    """A collective's predicted time and how it was derived."""

    kind: str
    full_bytes: int  # V: bytes of the full array along the collective's axis
    group_size: int
    n_axes: int
    wraparound: bool
    link: str  # "ici" | "dcn" | "switched" | "none"
    bandwidth_bytes_per_s: float  # the bandwidth the formula divided by
    hops: int
    t_bandwidth_s: float
    t_latency_s: float

    @property
    def t_s(self) -> float:
        return max(self.t_bandwidth_s, self.t_latency_s)

    @property
    def latency_bound(self) -> bool:
        return self.t_latency_s > self.t_bandwidth_s

    def describe(self) -> str:
        bound = "latency-bound" if self.latency_bound else "bandwidth-bound"
        ring = "full ring" if self.wraparound else "no wraparound"
        return (
            f"{self.kind} V={self.full_bytes} B over {self.group_size} devices, "
            f"{self.n_axes} axis(es), {self.link} ({ring}) at "
            f"{self.bandwidth_bytes_per_s:.3g} B/s: {self.t_bandwidth_s * 1e6:.3g} us bandwidth, "
            f"{self.hops} hop(s) = {self.t_latency_s * 1e6:.3g} us latency; {bound}"
        )


def collective_time(
    kind: str,
    full_bytes: int,
    group_size: int,
    chip: Chip,
    *,
    n_axes: int = 1,
    axis_sizes: tuple[int, ...] | None = None,
    slice_shape: tuple[int, ...] | None = None,
    slice_devices: int | None = None,
    crosses_hosts: bool = False,
) -> CollectiveTime:
    """Predicted time of one collective on ``chip`` (see the module docstring for the model).

    ``axis_sizes`` are the sizes of the mesh axes the groups span (their product is the group
    size); they decide whether each axis has its wraparound link, with the slice's shape or device
    count where known.  ``crosses_hosts`` selects DCN.
    """
    if kind not in KINDS:
        raise ValueError(f"not a collective kind: {kind!r}")
    n_axes = max(1, n_axes)
    if axis_sizes is None:
        axis_sizes = (group_size,) if n_axes == 1 else (round(group_size ** (1 / n_axes)),) * n_axes
    if group_size <= 1 or full_bytes <= 0:
        return CollectiveTime(kind, full_bytes, group_size, n_axes, True, "none", 0.0, 0, 0.0, 0.0)
    share = (group_size - 1) / group_size
    hop_s = chip.ici_hop_latency_s

    if crosses_hosts:
        link = "dcn"
        wraparound = True
        bandwidth = chip.dcn_bytes_per_s
        t_gather = share * full_bytes / bandwidth
        hops = group_size - 1
    elif chip.topology in ("switched", "fully-connected", "none"):
        link = "switched"
        wraparound = True
        bandwidth = chip.ici_links * chip.ici_link_bytes_per_s_uni
        t_gather = share * full_bytes / bandwidth
        hops = group_size - 1  # a ring algorithm takes n-1 steps
    else:
        link = "ici"
        wraparound = all(
            chip.has_wraparound(size, slice_shape, slice_devices) for size in axis_sizes
        )
        if wraparound:
            bandwidth = chip.ici_link_bytes_per_s_bi * n_axes
            t_gather = full_bytes / bandwidth
            hops = sum(max(1, size // 2) for size in axis_sizes)
        else:
            bandwidth = chip.ici_link_bytes_per_s_uni * n_axes
            t_gather = share * full_bytes / bandwidth
            hops = sum(max(1, size - 1) for size in axis_sizes)

    if kind in ("all-gather", "reduce-scatter"):
        t_bandwidth = t_gather
    elif kind == "all-reduce":
        t_bandwidth = 2 * t_gather
        hops *= 2  # a reduce-scatter then an all-gather
    elif kind == "all-to-all":
        t_bandwidth = t_gather / (4 if wraparound else 2)
    else:  # collective-permute: each device's buffer moves one hop
        per_link = chip.dcn_bytes_per_s if crosses_hosts else chip.ici_link_bytes_per_s_uni
        bandwidth = per_link
        t_bandwidth = full_bytes / per_link
        hops = 1
    return CollectiveTime(
        kind=kind,
        full_bytes=full_bytes,
        group_size=group_size,
        n_axes=n_axes,
        wraparound=wraparound,
        link=link,
        bandwidth_bytes_per_s=bandwidth,
        hops=hops,
        t_bandwidth_s=t_bandwidth,
        t_latency_s=hops * hop_s,
    )


def latency_floor_s(kind: str, group_size: int, chip: Chip, *, n_axes: int = 1) -> float:
    """The smallest time a collective over ``group_size`` devices can take on ``chip``."""
    return collective_time(kind, 1, group_size, chip, n_axes=n_axes).t_latency_s

"""What the cost model hands out: the cost of one op execution, a collective's facts, totals."""

from __future__ import annotations

from dataclasses import dataclass, field

from profan.cost.kernels.model import weaker_source


@dataclass(frozen=True, slots=True)
class CollectiveInfo:
    """What the interconnect model needs to know about a collective."""

    kind: str  # one of profan.cost.collectives.KINDS
    full_bytes: int  # V: the full array along the collective's axis
    group_size: int
    groups: list[list[int]] = field(default_factory=list)
    n_axes: int = 1
    axis_sizes: tuple[int, ...] = ()
    groups_note: str = ""  # set when the groups are assumed, not read (unreadable text)


@dataclass(slots=True)
class OpCost:
    """What one execution of an instruction costs (per device)."""

    flops: float | None
    transcendentals: float | None
    hbm_bytes_read: float
    hbm_bytes_written: float
    ici_bytes: float = 0.0
    dtype: str | None = None  # element type of the math (drives the peak FLOP/s used)
    derivation: list[str] = field(default_factory=list)
    collective: CollectiveInfo | None = None
    async_role: str | None = None  # "start" | "done" for async pairs
    unknown: bool = False  # a custom call profan cannot cost: flagged, not guessed
    host_transfer: bool = False  # moves data between host memory (S(5)) and the device
    transfer_direction: str | None = None  # "to-device" | "to-host" for host transfers
    # HBM bytes the roofline should use when they differ from XLA's accounting (in-place
    # scatters); ``None`` = ``hbm_bytes``.
    roofline_hbm_bytes: float | None = None
    # The line left operands out (XProf's ``fusion(...)`` / ``...(+N)``): bytes read count only
    # the operands shown, so they are a lower bound, not the op's traffic.
    hbm_bytes_read_is_lower_bound: bool = False
    # Where the FLOPs and the bytes come from: one of ``profan.cost.kernels.SOURCES`` (hlo,
    # backend-config, cost-estimate, trace, shape-signature, lower-bound, unknown).
    flops_source: str = "hlo"
    bytes_source: str = "hlo"
    # Matrix math (dot, convolution, a fusion or kernel built on one): its compute term uses the
    # chip's matrix-unit peak for the operand dtype and precision (``Chip.peak_flops_per_s``).
    matrix_math: bool = False
    precision: tuple[str, ...] = ()  # operand precisions as printed (DEFAULT / HIGH / HIGHEST)
    algorithm: str | None = None  # the dot algorithm when the op names one

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_bytes_read + self.hbm_bytes_written

    def add(self, other: OpCost) -> None:
        """Accumulate FLOPs/transcendentals/bytes of ``other`` (``None`` is contagious)."""
        self.flops = None if self.flops is None or other.flops is None else self.flops + other.flops
        if self.transcendentals is None or other.transcendentals is None:
            self.transcendentals = None
        else:
            self.transcendentals += other.transcendentals
        self.hbm_bytes_read += other.hbm_bytes_read
        self.hbm_bytes_written += other.hbm_bytes_written
        self.ici_bytes += other.ici_bytes
        self.unknown = self.unknown or other.unknown
        self.flops_source = weaker_source(self.flops_source, other.flops_source)
        self.bytes_source = weaker_source(self.bytes_source, other.bytes_source)


@dataclass(slots=True)
class ModuleTotals:
    """A module's FLOPs, transcendentals and bytes summed the way XLA's cost analysis sums them."""

    flops: float
    transcendentals: float
    bytes_accessed: float
    unknown_ops: list[str] = field(default_factory=list)

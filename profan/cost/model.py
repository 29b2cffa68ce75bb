"""What the cost model hands out: the cost of one op execution, a collective's facts, totals."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    # Bytes moved (read + written) in each memory space other than HBM that the op touches (TPU
    # VMEM operands, sync flags, SMEM scalars, host memory), by the space's label (``vmem``,
    # ``host``, ``S(2)``: ``profan.cost.bytes.space_label``): the rules of the HBM bytes applied
    # to that space's arrays (``CostModel.estimate``).
    other_space_bytes: dict[str, float] = field(default_factory=dict)

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_bytes_read + self.hbm_bytes_written

    def copy(self) -> OpCost:
        """A copy whose mutable fields (the derivation, the other spaces' bytes) are its own:
        one the caller may change without touching a cost kept for reuse."""
        return replace(
            self, derivation=list(self.derivation), other_space_bytes=dict(self.other_space_bytes)
        )

    @property
    def roofline_bytes(self) -> float:
        """The HBM bytes the roofline charges: XLA's accounting unless the op moves less (a
        fused read of only what its outputs need, an in-place update)."""
        return self.roofline_hbm_bytes if self.roofline_hbm_bytes is not None else self.hbm_bytes

    @property
    def bytes_by_space(self) -> dict[str, float]:
        """Bytes moved in each memory space the op touches: ``hbm`` (the roofline's) first."""
        return {"hbm": self.roofline_bytes, **dict(sorted(self.other_space_bytes.items()))}

    @property
    def all_space_bytes(self) -> float:
        """Bytes moved in every memory space together: what XProf's "measured memory BW"
        counts (the compiler's ``bytes_accessed``), where ``roofline_bytes`` is its HBM BW."""
        return sum(self.bytes_by_space.values())

    def scale_bytes(self, factor: float) -> None:
        """Multiply every byte figure (HBM, the roofline's, the other spaces') by ``factor``."""
        self.hbm_bytes_read *= factor
        self.hbm_bytes_written *= factor
        if self.roofline_hbm_bytes is not None:
            self.roofline_hbm_bytes *= factor
        for space in self.other_space_bytes:
            self.other_space_bytes[space] *= factor

    def add(self, other: OpCost) -> None:
        """Accumulate FLOPs/transcendentals/bytes of ``other`` (``None`` is contagious)."""
        self.flops = None if self.flops is None or other.flops is None else self.flops + other.flops
        if self.transcendentals is None or other.transcendentals is None:
            self.transcendentals = None
        else:
            self.transcendentals += other.transcendentals
        self.hbm_bytes_read += other.hbm_bytes_read
        self.hbm_bytes_written += other.hbm_bytes_written
        for space, moved in other.other_space_bytes.items():
            self.other_space_bytes[space] = self.other_space_bytes.get(space, 0.0) + moved
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

"""The chip catalogue (``catalogue``: figures per chip from ``profan/data/chips.toml``, a user's
chip files, trace device -> entry) and precision-aware peaks (``peaks``)."""

from profan.chips.catalogue import (
    CATALOGUE_FILE,
    DTYPES,
    TOPOLOGIES,
    TRACE_FIGURE_FLOOR,
    WRAPAROUND_RULES,
    Chip,
    ChipEntry,
    PeakFlopsEntry,
    catalogue,
    chip_for_device,
    get_chip,
    match_device_string,
    normalise_dtype,
    read_chip_file,
    using_chip_file,
)
from profan.chips.peaks import PRECISION_LEVELS, TPU_F32_PASSES, Peak, peak_for

__all__ = [
    "CATALOGUE_FILE",
    "DTYPES",
    "PRECISION_LEVELS",
    "TOPOLOGIES",
    "TPU_F32_PASSES",
    "TRACE_FIGURE_FLOOR",
    "WRAPAROUND_RULES",
    "Chip",
    "ChipEntry",
    "Peak",
    "PeakFlopsEntry",
    "catalogue",
    "chip_for_device",
    "get_chip",
    "match_device_string",
    "normalise_dtype",
    "peak_for",
    "read_chip_file",
    "using_chip_file",
]

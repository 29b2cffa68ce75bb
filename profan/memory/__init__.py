"""Where the device memory goes: the compiler's buffer assignment, or an estimate from HLO text."""

from profan.memory.analyze import analyze_hlo_file, analyze_profile, analyze_trace, hbm_per_device
from profan.memory.assignment import program_memory
from profan.memory.breakdown import breakdown
from profan.memory.estimate import estimate
from profan.memory.model import Breakdown, Buffer, MemoryReport, ProgramMemory, TimelinePoint

__all__ = [
    "Breakdown",
    "Buffer",
    "MemoryReport",
    "ProgramMemory",
    "TimelinePoint",
    "analyze_hlo_file",
    "analyze_profile",
    "analyze_trace",
    "breakdown",
    "estimate",
    "hbm_per_device",
    "program_memory",
]

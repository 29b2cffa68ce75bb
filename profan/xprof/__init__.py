"""XProf's tool outputs read as profan's models: the op profile (``op_profile``: every op's HLO
line and its fused body) and the modules rebuilt from it (``rebuild``) for ``CostModel``."""

from profan.xprof.megacore import megacore_body
from profan.xprof.op_profile import (
    FusedLine,
    OpMetrics,
    OpProfile,
    OpProfileError,
    ProfiledOp,
    ProfiledProgram,
    instruction_name,
    op_profile_from_json,
    read_op_profile,
)
from profan.xprof.rebuild import RebuildError, find_op, op_for_line, op_module, program_module

__all__ = [
    "FusedLine",
    "OpMetrics",
    "OpProfile",
    "OpProfileError",
    "ProfiledOp",
    "ProfiledProgram",
    "RebuildError",
    "find_op",
    "instruction_name",
    "megacore_body",
    "op_for_line",
    "op_module",
    "op_profile_from_json",
    "program_module",
    "read_op_profile",
]

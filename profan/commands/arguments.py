"""The options every command that reads a trace takes, declared once: which chip to score
against, the HLO dumps joined to the trace, which run of a profile directory, and the rules'
thresholds (``profan.api.ReportOptions`` holds what they say)."""

from __future__ import annotations

import argparse


def add_trace_options(parser: argparse.ArgumentParser, *, config: bool = True) -> None:
    """``--chip``, ``--hlo``, ``--run`` and (``config``) ``--config``, in that order."""
    parser.add_argument("--chip", help="chip to score against (default: from the trace)")
    parser.add_argument("--hlo", help="directory of HLO text dumps to join to the trace")
    parser.add_argument("--run", help="which run of a multi-run profile directory")
    if config:
        parser.add_argument("--config", help="profan.toml with [rules] thresholds")

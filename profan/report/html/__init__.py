"""The report as one interactive, self-contained HTML page (no network, opens from disk)."""

from profan.report.html.page import render

__all__ = ["render"]

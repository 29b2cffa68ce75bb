"""The report as one interactive, self-contained HTML page (no network, opens from disk)."""

from profan.report.render.html.page import render

__all__ = ["render"]

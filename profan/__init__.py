"""profan: reads what an ML accelerator did and scores every op against its roofline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from profan.trace.profile import Profile


def load(path: str, *, hlo: str | None = None, run: str | None = None, **options: Any) -> Profile:
    """Load a trace directory or file into a ``Profile`` (see ``profan.trace``)."""
    from profan.trace import load as _load

    return _load(path, hlo=hlo, run=run, **options)


__all__ = ["__version__", "load"]

"""profan: reads what an ML accelerator did and scores every op against its roofline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profan.capture import Capture, capture
from profan.version import __version__

if TYPE_CHECKING:
    from profan.trace.options import LoadOptions
    from profan.trace.profile import Profile


def load(
    path: str,
    *,
    hlo: str | None = None,
    run: str | None = None,
    options: LoadOptions | None = None,
    **fields: Any,
) -> Profile:
    """Load a trace directory or file into a ``Profile``.

    Keywords are the fields of ``profan.trace.LoadOptions`` (``hlo``, ``run``, ``workers``,
    ``use_cache``, ...), or pass one ``options=LoadOptions(...)``; keywords override it.
    """
    from profan.trace import load as _load

    return _load(path, hlo=hlo, run=run, options=options, **fields)


__all__ = ["Capture", "__version__", "capture", "load"]

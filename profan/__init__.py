"""profan: reads what an ML accelerator did and scores every op against its roofline."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from profan.lazy import callable_submodule, functions_over_submodules, lazy_exports
from profan.version import __version__

if TYPE_CHECKING:
    from profan import report
    from profan.api import Report, ReportOptions
    from profan.capture import Capture, capture
    from profan.trace.options import LoadOptions
    from profan.trace.profile import Profile

# Imported on first use: a command that never profiles (every CLI command) does not pay for
# ``profan.capture``'s imports, nor ``import profan`` for the API's.  ``profan.report`` is the
# package of that name, which can be called (``profan.report(path)``: ``profan.api.report``).
_exports = lazy_exports(
    __name__,
    {
        "Capture": "profan.capture",
        "capture": "profan.capture",
        "Report": "profan.api",
        "ReportOptions": "profan.api",
    },
)


def __getattr__(name: str) -> Any:
    if name == "report":
        return importlib.import_module("profan.report")
    return _exports(name)


def load(
    path: str,
    *,
    hlo: str | None = None,
    run: str | None = None,
    options: LoadOptions | None = None,
    **fields: Any,
) -> Profile:
    """Load a trace into a ``Profile``: any path ``profan report`` reads (a trace or run
    directory, a folder with ``trace/`` beside ``hlo/``, an ``.xplane.pb`` or
    ``.trace.json.gz`` file, a ``gs://`` or ``s3://`` URL).

    Keywords are the fields of ``profan.trace.LoadOptions`` (``hlo``, ``run``, ``workers``,
    ``use_cache``, ...), or pass one ``options=LoadOptions(...)``; keywords override it.
    """
    from profan.api import load as _load

    return _load(path, hlo=hlo, run=run, options=options, **fields)


def _report(path: Any, **options: Any) -> Report:
    """``profan.report(path, **options)``: ``profan.api.report``."""
    from profan.api import report as _api_report

    return _api_report(path, **options)


# ``profan.capture`` is the function (the submodule stays in ``sys.modules`` only), and the
# package ``profan.report``, called, is the API's ``report``.
functions_over_submodules(__name__, "capture")
callable_submodule(__name__, "report", _report)

__all__ = ["Capture", "Report", "ReportOptions", "__version__", "capture", "load", "report"]

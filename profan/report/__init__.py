"""What users read: the report model, suspicious-op rules, renderers, budgets, diffs,
annotations.

Called, this package is the API's entry point: ``profan.report(path, **options)`` is
``profan.api.report`` (a ``profan.api.Report``: the op table as a DataFrame, every format of
the CLI); its submodules import as ever (``from profan.report import terminal``)."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profan.api import Report


class _Package(types.ModuleType):
    """A package that can be called: ``profan.report(path)``, one name for the command, the
    API's function and the package of what it builds."""

    def __call__(self, path: Any, **options: Any) -> Report:
        from profan.api import report

        return report(path, **options)


sys.modules[__name__].__class__ = _Package

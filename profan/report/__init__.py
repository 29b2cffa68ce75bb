"""What users read: the report model, suspicious-op rules, renderers, budgets, diffs,
annotations.

Called, this package is the API's entry point: ``profan.report(path, **options)`` is
``profan.api.report`` (a ``profan.api.Report``: the op table as a DataFrame, every format of
the CLI), which ``profan/__init__.py`` sets up (``profan.lazy.callable_submodule``: the API
sits above this package); its submodules import as ever (``from profan.report import
terminal``)."""

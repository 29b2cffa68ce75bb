"""What users read: the report model and its formatting (``model``, ``format``, ``keys``,
``slices``, ``stored``), the rules (``rules``), the analysis that builds a report from a trace
(``analysis``), budgets, baselines and diffs (``check``) and the renderers (``render``), each
layer reading only those before it.

Called, this package is the API's entry point: ``profan.report(path, **options)`` is
``profan.api.report`` (a ``profan.api.Report``: the op table as a DataFrame, every format of
the CLI), which ``profan/__init__.py`` sets up (``profan.lazy.callable_submodule``: the API
sits above this package); its submodules import as ever (``from profan.report.render import
terminal``)."""

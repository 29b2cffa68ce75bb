"""The rules: what makes an op or a profile suspicious (``catalogue``), their thresholds
(``config``, ``[rules]`` of ``profan.toml``), what a finding would save and the order findings are
listed in (``savings``), the questions they ask of an HLO instruction (``hlo_checks``) and what a
``cost-unknown`` finding asks of the reader (``advice``).  They read the report model only."""

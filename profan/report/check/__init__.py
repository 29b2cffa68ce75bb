"""``profan check`` and ``profan diff``: budgets from ``profan.toml``, regressions against a
baseline, and two reports compared.  They read built reports only."""

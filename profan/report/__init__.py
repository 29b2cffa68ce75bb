"""What users read: the report model, suspicious-op rules, renderers, budgets, diffs,
annotations."""

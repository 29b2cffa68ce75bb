"""Trace loading: a profile directory or file -> ``Profile`` (op executions joined to HLO)."""

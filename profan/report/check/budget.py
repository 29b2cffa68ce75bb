"""``profan check``: budgets from ``profan.toml``, the absolute gates on one profile; the
comparison with a baseline (the ``[baseline]`` table) is ``regressions.py``'s.

``profan.toml``::

    [budget]                      # absolute limits on this profile
    step_time_s = 0.050           # median step time at most
    mfu_min = 0.20
    exposed_comm_s = 0.002        # exposed communication per step, per device, at most
    exposed_comm_share = 0.10     # ... as a share of the busy span
    max_suspicious = 10           # findings of the rules at most
    peak_hbm_bytes = 60e9         # every program's memory peak per device at most
    hbm_headroom_min = 0.10       # ... leaving at least this share of the chip's memory free
    max_host_skew_s = 0.005       # largest step skew between hosts (multi-host profiles)

    [[budget.ops]]                # per-op limits; match = glob on op names (or program/name,
    match = "all-reduce*"         # or the opcode); "scope:GLOB" matches the JAX scope instead
    max_time_s = 0.010            # time of the matching ops per step (mean), per device
    min_efficiency = 0.25         # each matching op

    [baseline]                    # tolerances when --baseline is given
    step_time_tolerance = 0.10    # a report: median step time may grow 10%
    op_time_tolerance = 0.50      # a report: a matched op may grow 50% ...
    op_min_time_share = 0.02      # ... when it takes at least 2% of the op time
    mfu_tolerance = 0.10          # a report: MFU may drop 10% (relative)
    new_collectives = true        # a report: fail on collectives the baseline did not have
    no_new_suspicious = true      # a report: fail on findings the baseline did not have
    time_gate = "auto"            # a baseline file: the step time gates on TPU/GPU only ...
    time_noise_factor = 3.0       # ... within max(time_tolerance_min, 3 x the steps' noise)
    time_tolerance_min = 0.02

    [rules]                       # thresholds of the suspicious-op rules (RuleConfig)
    efficiency_below = 0.05
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from profan.errors import ConfigError
from profan.report.analysis.hosts import host_checks
from profan.report.check.baseline.entry import Entry
from profan.report.check.memory import memory_checks
from profan.report.check.regressions import against, mfu_missing, step_time_missing
from profan.report.check.results import CheckResult
from profan.report.format import percent, seconds
from profan.report.keys import base_name, check_id
from profan.report.model import OpEntry, Report
from profan.report.rules.config import NonNegative, RuleConfig
from profan.tomlschema import Pattern, convert, read_toml

_STRUCT = {"frozen": True, "kw_only": True, "forbid_unknown_fields": True}


class OpBudget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[[budget.ops]]``: limits on the ops whose name (``program/name``) or opcode match a
    glob, or whose JAX scope does (``scope:GLOB``)."""

    match: Pattern  # at most MAX_PATTERN characters: fnmatch's time grows with a glob
    max_time_s: NonNegative | None = None  # the matching ops per step (mean), per device
    min_efficiency: NonNegative | None = None  # each matching op


class BudgetTable(msgspec.Struct, **_STRUCT):
    """``[budget]``: absolute limits on one profile."""

    step_time_s: NonNegative | None = None
    mfu_min: NonNegative | None = None
    exposed_comm_s: NonNegative | None = None
    exposed_comm_share: NonNegative | None = None
    max_suspicious: Annotated[int, msgspec.Meta(ge=0)] | None = None
    ops: tuple[OpBudget, ...] = ()
    peak_hbm_bytes: NonNegative | None = None  # largest program memory peak per device
    hbm_headroom_min: NonNegative | None = None  # share of the chip's memory left free
    max_host_skew_s: NonNegative | None = None  # largest step skew between hosts


class BaselineTable(msgspec.Struct, **_STRUCT):
    """``[baseline]``: tolerances against a baseline (``--baseline``; regressions.Policy)."""

    step_time_tolerance: NonNegative = 0.10
    op_time_tolerance: NonNegative = 0.50
    op_min_time_share: NonNegative = 0.02
    mfu_tolerance: NonNegative = 0.10
    new_collectives: bool = True
    no_new_suspicious: bool = True
    # per-machine baseline files (profan.report.check.baseline): gate on step time at all
    # ("auto": on TPU/GPU, not on CPU); tolerance = max(time_tolerance_min,
    # time_noise_factor x (median - min) / min)
    time_gate: Literal["auto"] | bool = "auto"
    time_noise_factor: NonNegative = 3.0
    time_tolerance_min: NonNegative = 0.02


class Budget(msgspec.Struct, **_STRUCT):
    """Everything ``profan check`` checks a report against: ``[budget]`` and ``[baseline]`` of
    ``profan.toml`` side by side (see their tables for each field), and ``[rules]``."""

    step_time_s: float | None = None
    mfu_min: float | None = None
    exposed_comm_s: float | None = None
    exposed_comm_share: float | None = None
    max_suspicious: int | None = None
    peak_hbm_bytes: float | None = None
    hbm_headroom_min: float | None = None
    max_host_skew_s: float | None = None
    ops: tuple[OpBudget, ...] = ()
    step_time_tolerance: float = 0.10
    op_time_tolerance: float = 0.50
    op_min_time_share: float = 0.02
    mfu_tolerance: float = 0.10
    new_collectives: bool = True
    no_new_suspicious: bool = True
    time_gate: Literal["auto"] | bool = "auto"
    time_noise_factor: float = 3.0
    time_tolerance_min: float = 0.02
    rules: RuleConfig = RuleConfig()


_TABLES = ("budget", "baseline", "rules", "tool")  # ``tool``: other tools' settings, ignored


def budget_from_mapping(data: Mapping[str, Any], *, where: str) -> Budget:
    """A ``Budget`` from a ``profan.toml``'s tables (as read from TOML, or written as a dict);
    errors name ``where`` (the file), the key and what it allows."""
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise ConfigError(f"{where}: unknown table {unknown[0]!r} (allowed: {', '.join(_TABLES)})")
    budget = convert(data.get("budget", {}), BudgetTable, origin=where, key="budget")
    baseline = convert(data.get("baseline", {}), BaselineTable, origin=where, key="baseline")
    rules = data.get("rules", {})
    if not isinstance(rules, Mapping):
        raise ConfigError(f"{where}: rules: must be a table")
    return Budget(
        **msgspec.structs.asdict(budget),
        **msgspec.structs.asdict(baseline),
        rules=RuleConfig.from_mapping(rules, origin=where),
    )


def load_budget(path: str | Path) -> Budget:
    return budget_from_mapping(read_toml(path, what="the budget"), where=str(path))


# --------------------------------------------------------------------------------------------


# ``match = "scope:GLOB"`` matches the op's JAX scope (``jit(train)/layer0/attention``); a
# pattern with ``|`` the op's stable key (``module|scope|kind``, profan.report.keys); any other
# its name, its ``program/name`` or its opcode.  (A scope names every op a layer made, its
# collectives too: only a pattern that asks for scopes or keys selects by them.)
SCOPE_PREFIX = "scope:"


def _matches(op: OpEntry, pattern: str) -> bool:
    if pattern.startswith(SCOPE_PREFIX):
        return fnmatch.fnmatchcase(op.scope or "", pattern[len(SCOPE_PREFIX) :])
    if "|" in pattern:
        return fnmatch.fnmatchcase(op.key, pattern)
    names = (op.name, op.label, f"{base_name(op.module)}/{op.name}", op.opcode)
    return any(fnmatch.fnmatchcase(text, pattern) for text in names)


def _op_id(op: OpEntry) -> str:
    return check_id(op.key, op.name)


def evaluate(
    report: Report,
    budget: Budget,
    baseline: Report | Entry | None = None,
    versions: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """The budget's absolute gates on ``report``, then, given a ``baseline`` (a report, or its
    machine's entry of a baseline file), its regressions from it (``regressions.against``)."""
    results: list[CheckResult] = []
    s = report.summary
    devices = max(s.device_count, 1)
    median = s.step_time_median_s
    if budget.step_time_s is not None:
        limit = f"budget {seconds(budget.step_time_s)}"
        if (why := step_time_missing(report)) is not None:
            results.append(
                CheckResult("step_time", False, f"median step time unknown: {why} ({limit})")
            )
        else:
            assert median is not None  # (step_time_missing checked it)
            results.append(
                CheckResult(
                    "step_time",
                    median <= budget.step_time_s,
                    f"median step time {seconds(median)} ({limit})",
                )
            )
    mfu = s.mfu
    if budget.mfu_min is not None:
        limit = f"budget at least {percent(budget.mfu_min)}"
        if (why := mfu_missing(report)) is not None:
            results.append(CheckResult("mfu", False, f"MFU unknown: {why} ({limit})"))
        else:
            assert mfu is not None  # (mfu_missing checked it)
            results.append(
                CheckResult("mfu", mfu >= budget.mfu_min, f"MFU {percent(mfu)} ({limit})")
            )
    if budget.exposed_comm_s is not None:
        exposed = s.exposed_comm_per_step_s
        if exposed is None:
            exposed = s.exposed_comm_s
        results.append(
            CheckResult(
                "exposed_comm",
                exposed <= budget.exposed_comm_s,
                f"exposed communication {seconds(exposed)} per step "
                f"(budget {seconds(budget.exposed_comm_s)})",
            )
        )
    if budget.exposed_comm_share is not None:
        share = s.exposed_comm_share
        results.append(
            CheckResult(
                "exposed_comm_share",
                share <= budget.exposed_comm_share,
                f"exposed communication {percent(share)} of the busy span "
                f"(budget {percent(budget.exposed_comm_share)})",
            )
        )
    if budget.max_suspicious is not None:
        count = len(report.findings)
        results.append(
            CheckResult(
                "suspicious",
                count <= budget.max_suspicious,
                f"{count} suspicious findings (budget {int(budget.max_suspicious)})",
            )
        )
    for name, passed, message, source in memory_checks(
        report, budget.peak_hbm_bytes, budget.hbm_headroom_min
    ):
        results.append(CheckResult(name, passed, message, source))
    for name, passed, message, source in host_checks(report, budget.max_host_skew_s):
        results.append(CheckResult(name, passed, message, source))
    for op_budget in budget.ops:
        chosen = [op for op in report.ops if _matches(op, op_budget.match)]
        name = f"ops[{op_budget.match}]"
        if not chosen:
            results.append(CheckResult(name, False, f"no op matches {op_budget.match!r}"))
            continue
        if op_budget.max_time_s is not None:
            limit = f"budget {seconds(op_budget.max_time_s)}"
            steps = s.step_count
            heaviest = max(chosen, key=lambda op: op.measured_s)
            if not steps:  # a per-step figure needs steps: no verdict on a total instead
                results.append(
                    CheckResult(
                        f"{name}.time",
                        False,
                        f"time per step unknown: the trace has no step markers ({limit} per step)",
                        heaviest.source,
                    )
                )
            else:
                per_step = sum(op.measured_s for op in chosen) / devices / steps
                results.append(
                    CheckResult(
                        f"{name}.time",
                        per_step <= op_budget.max_time_s,
                        f"{len(chosen)} op(s) matching {op_budget.match!r} take "
                        f"{seconds(per_step)} per step per device (mean of {steps} steps; "
                        f"heaviest {heaviest.label}; {limit})",
                        heaviest.source,
                    )
                )
        if op_budget.min_efficiency is not None:
            if all(op.efficiency is None for op in chosen):  # the gate must not vanish
                results.append(
                    CheckResult(
                        f"{name}.efficiency",
                        False,
                        f"efficiency unknown: none of the {len(chosen)} op(s) matching "
                        f"{op_budget.match!r} has an ideal time to measure it by (budget at "
                        f"least {percent(op_budget.min_efficiency)})",
                        chosen[0].source,
                    )
                )
            for op in chosen:
                if op.efficiency is None:
                    continue
                if not op.cost_known:  # the efficiency is only a lower bound: no verdict
                    results.append(
                        CheckResult(
                            f"{name}.efficiency:{_op_id(op)}",
                            True,
                            f"{op.label} not judged: its FLOPs/bytes are {op.flops_source}/"
                            f"{op.bytes_source}, so {percent(op.efficiency)} is only a lower "
                            "bound on its efficiency (add a kernel model: --kernels FILE)",
                            op.source,
                        )
                    )
                    continue
                results.append(
                    CheckResult(
                        f"{name}.efficiency:{_op_id(op)}",
                        op.efficiency >= op_budget.min_efficiency,
                        f"{op.label} at {percent(op.efficiency)} of its roofline "
                        f"(budget at least {percent(op_budget.min_efficiency)})",
                        op.source,
                    )
                )
    if baseline is not None:  # (the baseline's rows: regressions.py, for either form)
        results.extend(against(report, baseline, budget, versions))
    return results

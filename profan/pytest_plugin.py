"""pytest plugin: performance checks that live in a JAX project's own tests.

Installed with profan (entry point ``pytest11``; ``-p no:profan`` turns it off). It gives

* the ``profan`` fixture: ``profan.capture(fn, *args, steps=3, warmup=1, **kwargs)`` profiles a
  program and returns its ``Report``; ``profan.check(report, budget=PATH_OR_DICT,
  baseline=PATH)`` fails the test with the lines ``profan check`` prints, naming the ops that
  regressed and their source lines;
* the marker ``@pytest.mark.profan(budget=..., baseline=..., steps=3, warmup=1)``: the test's
  body is the step, run ``warmup`` times untraced and ``steps`` times traced, then checked; the
  body should ``return`` the step's outputs so that each step waits for them (a dropped output
  cannot be waited for; pytest's warning about returning values does not apply here);
* ``--profan-update-baseline``: write the baselines (this machine's entry) instead of comparing;
* ``--profan-trace-dir DIR``: keep every captured trace under ``DIR/<test>`` (CI artefacts);
* ``--profan-github``: print GitHub ``::error`` annotations for failed checks at the end of the
  run, on the ops' source lines (on by default when ``GITHUB_ACTIONS=true``).

Each capture's figures go into the JUnit XML as ``record_property`` entries (``profan.*``).
Paths given to ``budget`` and ``baseline`` are relative to the test file's directory.

This module is imported by every pytest session where profan is installed: it imports only
pytest and the standard library until a test uses it.
"""

from __future__ import annotations

import inspect
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from profan.report.check.budget import Budget
    from profan.report.check.results import CheckResult
    from profan.report.model import Report

_RESULTS = pytest.StashKey[list["CheckResult"]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("profan", "profan performance checks")
    group.addoption(
        "--profan-update-baseline",
        action="store_true",
        help="write this machine's entry of every profan baseline instead of comparing to it",
    )
    group.addoption(
        "--profan-trace-dir",
        metavar="DIR",
        help="keep the trace of every profan capture under DIR/<test name>",
    )
    group.addoption(
        "--profan-github",
        action="store_true",
        help="print GitHub ::error annotations for failed profan checks at the end "
        "(default when GITHUB_ACTIONS=true)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "profan(budget=None, baseline=None, steps=3, warmup=1): profile the test's body as the "
        "step (run warmup times untraced, then steps times traced) and check it against the "
        "budget (profan.toml path or dict) and the baseline file",
    )
    config.stash[_RESULTS] = []


# --------------------------------------------------------------------------------------------


def _figures(report: Report) -> dict[str, Any]:
    """The numbers worth a JUnit property, from the JSON report."""
    from profan.report.check.baseline import entry_from_report

    data = report.to_dict()
    entry = entry_from_report(data)
    summary = data.get("summary") or {}
    figures: dict[str, Any] = {
        "machine": entry.machine,
        "devices": entry.device_count,
        "steps": entry.steps,
        "step_time_min_s": entry.step_min_s,
        "step_time_median_s": entry.step_median_s,
        **entry.totals,
        "mfu": summary.get("mfu"),
        "findings": len(data.get("findings") or []),
    }
    return {
        name: value
        for name, value in figures.items()
        if value is not None and not (isinstance(value, float) and not math.isfinite(value))
    }


def _versions() -> dict[str, str]:
    """Versions of what compiled the program: a baseline records them, a check names changes."""
    try:
        import jax
        import jaxlib
    except ImportError:  # a report made elsewhere, checked where JAX is not installed
        return {}
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__}


def _budget(value: str | Path | Mapping[str, Any] | Budget | None, base: Path) -> Budget:
    from profan.errors import ConfigError
    from profan.report.check import budget as budgets

    if value is None:
        return budgets.Budget()
    if isinstance(value, str | Path):
        return budgets.load_budget(base / value)
    if isinstance(value, Mapping):
        return budgets.budget_from_mapping(value, where="budget dict")
    if isinstance(value, budgets.Budget):
        return value
    raise ConfigError(
        f"budget must be a profan.toml path, a dict of its tables or a Budget, not {value!r}"
    )


class Profan:
    """The ``profan`` fixture: capture programs and check them inside a test."""

    def __init__(self, node: pytest.Item, config: pytest.Config) -> None:
        self._node = node
        self._config = config
        self._captures = 0

    @property
    def updating(self) -> bool:
        """Whether this run writes baselines (``--profan-update-baseline``)."""
        return bool(self._config.getoption("profan_update_baseline"))

    def _keep_trace(self) -> Path | bool:
        folder = self._config.getoption("profan_trace_dir")
        if not folder:
            return False
        self._captures += 1
        name = re.sub(r"[^\w.-]+", "_", self._node.nodeid).strip("_")
        return Path(folder) / (name if self._captures == 1 else f"{name}.{self._captures}")

    def capture(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Report:
        """``profan.capture`` (same arguments); the figures become JUnit properties."""
        from profan.capture import capture
        from profan.errors import ProfanError

        kwargs.setdefault("keep_trace", self._keep_trace())
        try:
            report = capture(fn, *args, **kwargs)
        except ProfanError as error:
            pytest.fail(f"profan.capture: {error}", pytrace=False)
        self.record(report)
        return report

    def record(self, report: Report) -> None:
        for name, value in _figures(report).items():
            self._node.user_properties.append((f"profan.{name}", value))

    def check(
        self,
        report: Report,
        budget: str | Path | Mapping[str, Any] | Budget | None = None,
        baseline: str | Path | None = None,
    ) -> list[CheckResult]:
        """Check ``report`` against ``budget`` (profan.toml path, or a dict of its tables) and
        the baseline file; fail the test with ``profan check``'s lines when a check fails.
        With ``--profan-update-baseline`` the baseline is written instead of compared."""
        from profan.errors import ProfanError
        from profan.report.check import baseline as baselines
        from profan.report.check.budget import evaluate
        from profan.report.check.regressions import against_file
        from profan.report.check.results import CheckResult, summary_text

        base = Path(self._node.path).parent
        try:
            limits = _budget(budget, base)
            results = evaluate(report, limits)
            capture = report.trace.capture
            if capture is not None and capture.last_step_cut_short:
                results.insert(
                    0,
                    CheckResult(
                        "capture.complete",
                        False,
                        "the last traced step did less work than the others: its device work "
                        "was still running when the trace stopped (return or keep its outputs)",
                    ),
                )
            if baseline is not None:
                path = base / baseline
                if self.updating:
                    entry = baselines.write_baseline(path, report, _versions())
                    results.append(
                        CheckResult("baseline", True, f"recorded {entry.machine} in {path}")
                    )
                else:
                    results.extend(against_file(report, path, limits, _versions()))
        except ProfanError as error:
            pytest.fail(f"profan check: {error}", pytrace=False)
        failed = [r for r in results if not r.passed]
        self._node.user_properties.append(("profan.checks_failed", len(failed)))
        self._config.stash[_RESULTS].extend(failed)
        if failed:
            hint = (
                "\n(if the change is intended: pytest --profan-update-baseline)"
                if any(r.name.startswith("baseline") for r in failed)
                else ""
            )
            pytest.fail(summary_text(results) + hint, pytrace=False)
        return results


@pytest.fixture
def profan(request: pytest.FixtureRequest) -> Profan:
    """Capture JAX programs and check them against budgets and baselines."""
    return Profan(request.node, request.config)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Tests marked ``profan``: the body is the step, profiled and checked."""
    marker = pyfuncitem.get_closest_marker("profan")
    if marker is None:
        return None
    from profan.capture import Capture
    from profan.errors import ProfanError

    where = f"@pytest.mark.profan on {pyfuncitem.nodeid}"
    options = dict(marker.kwargs)
    unknown = sorted(set(options) - {"budget", "baseline", "steps", "warmup"})
    if marker.args or unknown:
        pytest.fail(
            f"{where}: takes the keywords budget, baseline, steps, warmup"
            + (f"; unknown: {', '.join(unknown)}" if unknown else "; got positional arguments"),
            pytrace=False,
        )
    function = pyfuncitem.obj
    if inspect.iscoroutinefunction(function):
        pytest.fail(f"{where}: needs a plain (not async) test function", pytrace=False)
    names = inspect.signature(function).parameters
    arguments = {name: value for name, value in pyfuncitem.funcargs.items() if name in names}
    helper = Profan(pyfuncitem, pyfuncitem.config)
    try:
        run = Capture(
            steps=options.get("steps", 3),
            warmup=options.get("warmup", 1),
            keep_trace=helper._keep_trace(),
            name=pyfuncitem.name,
        )
        with run:
            for _ in range(run.warmup + run.steps):
                with run.step(wait=()):
                    # wait for what the body returns, else for every live array
                    run.block(function(**arguments))
    except ProfanError as error:
        pytest.fail(f"{where}: {error}", pytrace=False)
    assert run.report is not None
    helper.record(run.report)
    helper.check(run.report, budget=options.get("budget"), baseline=options.get("baseline"))
    return True


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    failed = config.stash.get(_RESULTS, [])
    wanted = config.getoption("profan_github") or os.environ.get("GITHUB_ACTIONS") == "true"
    if not failed or not wanted:
        return
    from profan.report.check.results import github_annotations

    for line in github_annotations(failed).splitlines():
        terminalreporter.write_line(line)

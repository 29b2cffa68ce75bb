"""Re-opening a profile from the cache prints, byte for byte, what a cold read prints: every
report format, ``check``, ``diff`` and ``annotate``, on every fixture trace and corpus trace.

For each trace the cold output comes from a read with the cache off; then the CLI runs three
ways: a first run that reads the trace and fills the cache, runs that re-open the stored
report (every format), and a run whose report was removed so that it is rebuilt from the
stored profile (the per-trace cache level: another chip or rule set re-opens that way)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from profan.cache import store
from profan.cli import main
from profan.commands.report import render
from profan.report.analysis.build import build_report
from profan.report.analysis.page_data import add_page_data
from profan.report.analysis.pipeline import analyse
from profan.report.check import diff
from profan.report.check.budget import evaluate, load_budget
from profan.report.check.results import github_annotations, junit_xml, summary_text
from profan.report.model import Report
from profan.report.render import annotate, comparison
from profan.report.render.terminal import terminal_width
from tests.conftest import FIXTURES_DIR, corpus_params

pytestmark = pytest.mark.slow

FIXTURES = sorted(p.name for p in FIXTURES_DIR.iterdir() if (p / "trace").is_dir())
CORPUS_TRACES = corpus_params("traces", "*.xplane.pb")
FORMATS = ("json", "term", "md", "html")
BUDGET = "[budget]\nmax_suspicious = 5\nmfu_min = 0.5\n"


def _trace(name: str, request: pytest.FixtureRequest | None = None) -> str:
    """A fixture trace, or (given the test's request) a corpus trace read through corpus_dir."""
    if name in FIXTURES or request is None:
        return str(FIXTURES_DIR / name)
    return str(request.getfixturevalue("corpus_dir") / "traces" / name)


class Cold:
    """Each trace's report (and annotated HLO) from a read with the cache off, made once."""

    def __init__(self) -> None:
        self.reports: dict[str, Report] = {}
        self.pages: dict[str, Report] = {}  # with what only the HTML page shows
        self.annotated: dict[str, str] = {}

    def of(self, name: str, trace: str | None = None) -> Report:
        if name not in self.reports:
            analysis = analyse(trace or _trace(name), use_cache=False)
            self.reports[name] = build_report(analysis)
            self.annotated[name] = annotate.render(self.reports[name], analysis.profile, None)
            self.pages[name] = build_report(analysis)
            add_page_data(self.pages[name], analysis.profile)
        return self.reports[name]


@pytest.fixture(scope="module")
def cold() -> Cold:
    return Cold()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reopen-cache")


def _out(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    if argv[0] == "check":  # 1 exactly when a result failed, re-opened or not
        assert code == int("FAIL  " in captured.out), captured.out
    return captured.out


@pytest.mark.parametrize("name", FIXTURES + CORPUS_TRACES)
def test_cached_outputs_are_byte_identical_to_a_cold_read(
    name: str,
    cold: Cold,
    cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(cache))
    trace = _trace(name, request)
    report = cold.of(name, trace)
    expected = {fmt: render(report, fmt, top=20, out_dir=None) for fmt in FORMATS}
    expected["html"] = render(cold.pages[name], "html", top=20, out_dir=None)
    reports_before = len(list((cache / "reports").glob("*.entry")))

    assert _out(["report", trace, "--format", "json"], capsys) == expected["json"]  # fills
    stored = len(list((cache / "reports").glob("*.entry")))
    assert stored == reports_before + 2  # the report, and its JSON text
    for fmt in FORMATS:  # re-opened from the stored report
        assert _out(["report", trace, "--format", fmt], capsys) == expected[fmt], fmt

    store.clear(["reports"])  # rebuilt from the stored profile
    assert _out(["report", trace, "--format", "term"], capsys) == expected["term"]
    assert _out(["report", trace, "--format", "json"], capsys) == expected["json"]

    budget = tmp_path / "profan.toml"
    budget.write_text(BUDGET)
    results = evaluate(report, load_budget(budget))
    checked = summary_text(results)
    junit = tmp_path / "junit.xml"
    for _ in range(2):  # fills, then re-opens the check's output
        assert _out(["check", trace, "--budget", str(budget)], capsys) == checked
        argv = ["check", trace, "--budget", str(budget), "--github", "--junit", str(junit)]
        assert _out(argv, capsys) == checked + github_annotations(results)
        assert junit.read_text(encoding="utf-8") == junit_xml(results)
        junit.unlink()

    for _ in range(2):  # fills, then re-opens the annotated text
        assert _out(["annotate", trace], capsys) == cold.annotated[name]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("mlp", "mlp_worse"),
        ("gpu_transformer", "gpu_transformer_nocb"),
        ("gpu_transformer", "gpu_transformer_h200"),  # the same program on another chip
        ("fsdp", "transformer"),
    ],
)
def test_cached_diff_is_byte_identical(
    before: str,
    after: str,
    cold: Cold,
    cache: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(cache))
    a, b = _trace(before), _trace(after)
    width = terminal_width(sys.stdout)
    # each side labelled as profan diff labels it: its path, chip, devices and programs, all
    # read from the cold report (b2cdb58)
    label_a = f"{a}  ({comparison.side(cold.of(before), a).text()})"
    label_b = f"{b}  ({comparison.side(cold.of(after), b).text()})"
    expected = diff.render(
        cold.of(before), cold.of(after), label_a=label_a, label_b=label_b, width=width
    )
    for _ in range(2):  # fills (or re-opens the reports stored above), then re-opens the text
        assert _out(["diff", a, b], capsys) == expected
    store.clear(["reports"])  # both reports rebuilt from the stored profiles
    assert _out(["diff", a, b], capsys) == expected


def test_another_chip_or_rule_set_reuses_the_profile_not_the_report(
    cold: Cold,
    cache: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The report's key holds the chip and the rule thresholds: changing either builds a new
    report (from the stored profile), and its output is the cold one of those options."""
    monkeypatch.setenv("PROFAN_CACHE_DIR", str(cache))
    trace = _trace("mlp")
    config = tmp_path / "profan.toml"
    config.write_text("[rules]\nefficiency_below = 0.9\nmin_time_share = 0.0\n")
    runs = {
        "default": [],
        "chip": ["--chip", "tpu-v5e"],
        "rules": ["--config", str(config)],
    }
    outputs = {}
    for label, extra in runs.items():
        argv = ["report", trace, "--format", "json", *extra]
        outputs[label] = _out([*argv, "--no-cache"], capsys)
        profiles = len(list((cache / "profiles").glob("*.entry")))
        assert _out(argv, capsys) == outputs[label] == _out(argv, capsys), label
        if label != "default":  # the profile stored by the first run served this one
            assert len(list((cache / "profiles").glob("*.entry"))) == profiles
    assert len(set(outputs.values())) == 3

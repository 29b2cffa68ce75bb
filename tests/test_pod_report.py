"""The cross-host view in the report (JSON, terminal, Markdown, HTML) and in ``profan check``,
on the real multi-host fixture (host1 sleeps before every step, see its meta.json)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from profan.cli import main


@pytest.fixture(scope="module")
def meta(fixtures_dir: Path) -> dict:
    return json.loads((fixtures_dir / "multihost" / "meta.json").read_text())


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


def test_json_has_hosts_and_a_straggler_finding(
    fixtures_dir: Path, meta: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(["report", str(fixtures_dir / "multihost"), "--format", "json"], capsys)
    assert code == 0
    report = json.loads(out)
    hosts = {entry["host"]: entry for entry in report["hosts"]}
    assert set(hosts) == {h["host"] for h in meta["hosts"]}
    for entry in report["hosts"]:
        assert {"host", "devices", "step_time_median_s", "late_s"} <= set(entry)
        assert len(entry["late_s"]) == meta["steps"]
    slow = hosts[meta["slow_host"]]
    assert abs(slow["late_median_s"] - meta["sleep_s"]) <= 0.2 * meta["sleep_s"]
    stragglers = [f for f in report["findings"] if f["rule"] == "straggler-host"]
    assert [f["host"] for f in stragglers] == [meta["slow_host"]]
    assert report["cross_host"]["stragglers"] == [meta["slow_host"]]
    assert report["cross_host"]["max_skew_s"] >= meta["sleep_s"] * 0.8
    # Other findings carry no host key (their JSON is as before).
    assert all("host" not in f for f in report["findings"] if f["rule"] != "straggler-host")


def test_single_host_json_has_no_cross_host_keys(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(["report", str(fixtures_dir / "mlp"), "--format", "json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert "hosts" not in report and "cross_host" not in report


def test_terminal_markdown_and_html_name_the_straggler(
    fixtures_dir: Path, meta: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(fixtures_dir / "multihost")
    _, terminal = _run(["report", trace], capsys)
    assert "Hosts" in terminal and f"stragglers: {meta['slow_host']}" in terminal
    _, markdown = _run(["report", trace, "--format", "md"], capsys)
    assert "## Hosts" in markdown and f"| {meta['slow_host']} |" in markdown
    assert main(["report", trace, "--format", "html", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    heat = page[page.index("class='heatmap'") :]
    row = heat[heat.index(f">{meta['slow_host']}<") :].split("</tr>")[0]
    # The straggler's cells are the reddest: full red (255,0,0) for its largest lateness.
    assert row.count("rgb(255,") == meta["steps"] and "rgb(255,0,0)" in row


def test_check_budget_on_host_skew(
    fixtures_dir: Path, meta: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = str(fixtures_dir / "multihost")
    strict = tmp_path / "strict.toml"
    strict.write_text(f"[budget]\nmax_host_skew_s = {meta['sleep_s'] / 2}\n")
    loose = tmp_path / "loose.toml"
    loose.write_text(f"[budget]\nmax_host_skew_s = {meta['sleep_s'] * 3}\n")
    code, out = _run(["check", trace, "--budget", str(strict)], capsys)
    assert code == 1 and "host_skew" in out and meta["slow_host"] in out
    code, _ = _run(["check", trace, "--budget", str(loose)], capsys)
    assert code == 0
    code, _ = _run(["check", str(fixtures_dir / "mlp"), "--budget", str(strict)], capsys)
    assert code == 0  # one host: nothing to skew


def test_workers_option_bounds_concurrent_reads_and_keeps_the_report(
    fixtures_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--workers N`` (or ``PROFAN_WORKERS``) is how many hosts are read at once: the report is
    the same whatever N; a bad value is a one-line error, exit 2."""
    from profan.errors import ConfigError
    from profan.trace.options import WORKERS_ENV, RunOptions

    load = importlib.import_module("profan.trace.load")  # (profan.trace.load is the function)

    monkeypatch.delenv(WORKERS_ENV, raising=False)
    asked: list[int | None] = []  # what profan.load uses: the workers the host map is given
    map_hosts = load.map_hosts

    def spying(*args: object, workers: int | None, **kwargs: object) -> object:
        asked.append(workers)
        return map_hosts(*args, workers=workers, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(load, "map_hosts", spying)
    trace = str(fixtures_dir / "multihost")
    reports = {}
    for workers in ("1", "3"):  # --no-cache: each run reads the hosts
        argv = ["report", trace, "--format", "json", "--workers", workers, "--no-cache"]
        code, out = _run(argv, capsys)
        assert code == 0
        reports[workers] = json.loads(out)
        assert asked[-1] == int(workers)
    assert reports["1"] == reports["3"]
    with monkeypatch.context() as patch:  # the environment's value, when the option is not given
        patch.setenv(WORKERS_ENV, "2")
        code, _ = _run(["report", trace, "--format", "json", "--no-cache"], capsys)
        assert code == 0 and asked[-1] == 2
    # an explicit option wins over the environment
    assert RunOptions.from_environment({WORKERS_ENV: "3"}, workers=2).workers == 2
    monkeypatch.setenv(WORKERS_ENV, "0")
    with pytest.raises(ConfigError, match="PROFAN_WORKERS"):
        RunOptions.from_environment()
    code = main(["report", trace, "--format", "json", "--no-cache"])
    error = capsys.readouterr().err
    assert code == 2 and "PROFAN_WORKERS='0'" in error and len(error.splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["report", trace, "--workers", "0"])
    assert exit_info.value.code == 2


def test_hosts_read_one_after_another_are_collected_where_the_command_is_not() -> None:
    """``profan.cli.run`` turns the cyclic collector off for the command; reading host after
    host in one process turns it on meanwhile, and then off again."""
    import gc

    from profan.trace.executors import Progress, map_hosts

    def collecting(task: int) -> tuple[int, bool]:
        return task, gc.isenabled()

    was = gc.isenabled()
    gc.disable()
    try:
        several = map_hosts(
            collecting, [1, 2], [1, 1], workers=1, scheduler=None, progress=Progress(2, 2, False)
        )
        assert several == [(1, True), (2, True)] and not gc.isenabled()
        one = map_hosts(
            collecting, [1], [1], workers=1, scheduler=None, progress=Progress(1, 1, False)
        )
        assert one == [(1, False)] and not gc.isenabled()
    finally:
        if was:
            gc.enable()

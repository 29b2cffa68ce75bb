"""The interactive HTML report in a real headless Chromium (Playwright, system Chromium), on a
fixture trace and on the TPU v6e corpus trace: the table sorts and filters, an op opens with
its HLO line, a step's timeline holds exactly the trace's op events of that step, a roofline
point names its op, and the page asks nothing of any network.  Numbers are checked against
independent sources: the JSON report of the same trace, ``profan.load``'s events, XLA's dumps.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import profan
from profan.report.analysis.pipeline import resolve_layout
from tests.browser import VIEWPORT, browser, screenshots, visit
from tests.conftest import FIXTURES_DIR, REPO_ROOT

pytestmark = pytest.mark.slow
REPO = REPO_ROOT
INDEX_COMMENT = re.compile(r"/\*index=\d+\*/")


def _profan(*args: str) -> None:
    """profan run from the repository root (the page then names the trace by a relative path,
    as the committed screenshots must)."""
    done = subprocess.run(
        [sys.executable, "-m", "profan", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def launched() -> Iterator[Any]:
    with browser() as chromium:
        yield chromium


def _build(trace: Path, out: Path) -> dict[str, Any]:
    """The page (with --plots) and, from a separate run, the JSON report of the same trace."""
    relative = os.path.relpath(trace, REPO)
    _profan("report", relative, "--format", "html", "--out", str(out), "--plots")
    _profan("report", relative, "--format", "json", "--out", str(out))
    return {
        "trace": trace,
        "page": out / "report.html",
        "json": json.loads((out / "report.json").read_text()),
        "out": out,
    }


@pytest.fixture(scope="module")
def fixture_page(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    built = _build(FIXTURES_DIR / "transformer", tmp_path_factory.mktemp("transformer"))
    dumps = sorted((FIXTURES_DIR / "transformer" / "hlo").glob("*after_optimizations.txt"))
    built["hlo_line"] = lambda name, opcode: _line(dumps, name)
    return built


@pytest.fixture(scope="module")
def v6e_page(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> dict[str, Any]:
    built = _build(
        corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb", tmp_path_factory.mktemp("v6e")
    )
    references = sorted((corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("*"))
    built["hlo_line"] = lambda name, opcode: _head(_line(references, name), opcode)
    return built


@pytest.fixture(params=["fixture", "v6e"])
def built(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.getfixturevalue(f"{request.param}_page")


def _line(files: list[Path], name: str) -> str:
    """The instruction's line as XLA printed it."""
    pattern = re.compile(rf"\s*(?:ROOT )?%?{re.escape(name)} = ")
    for file in files:
        for line in file.read_text().splitlines():
            if pattern.match(line):
                return INDEX_COMMENT.sub("", line.strip())
    raise AssertionError(f"{name} not in {files}")


def _head(line: str, opcode: str) -> str:
    """``name = shape opcode(`` of a line in either of XLA's print forms."""
    text = line.strip().removeprefix("ROOT ").lstrip("%")
    return text[: text.index(f" {opcode}(") + len(opcode) + 2]


def _uncovered_points(page: Any) -> list[int]:
    """Roofline points whose centre no other point covers (what a mouse can reach)."""
    page.eval_on_selector("#roofline", "box => box.scrollIntoView({block: 'center'})")
    return page.eval_on_selector_all(
        "#roofline circle.point",
        "points => points.filter(p => { const b = p.getBoundingClientRect();"
        " return document.elementFromPoint(b.x + b.width / 2, b.y + b.height / 2) === p; })"
        ".map(p => Number(p.dataset.index))",
    )


def _cells(page: Any, column: str) -> list[str | None]:
    return page.eval_on_selector_all(
        f"#ops-table tbody td[data-col='{column}']",
        "cells => cells.map(c => c.dataset.value === undefined ? null : c.dataset.value)",
    )


def test_one_file_no_network_and_pngs_only_when_asked(launched: Any, built: dict) -> None:
    html = built["page"].read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)
    assert "Content-Security-Policy" in html
    assert {p.name for p in built["out"].glob("*.png")} == {
        "roofline.png",
        "time_per_step.png",
        "measured_vs_ideal.png",
    }
    with visit(launched, built["page"]) as seen:
        page = seen.page
        page.click("#ops-table tbody tr")
        page.keyboard.press("Escape")
        page.hover(f"#roofline circle.point[data-index='{_uncovered_points(page)[0]}']")
        page.select_option("#tl-step", index=0)
        # a function, not an expression: the page's CSP forbids eval, which Playwright's
        # expression polling would need
        page.wait_for_function(
            "() => window.profanPage.timeline.stats.step === "
            "Number(document.getElementById('tl-step').value)"
        )
        assert seen.requests == [built["page"].resolve().as_uri()]
        assert seen.errors == []


def test_sort_by_efficiency_filter_by_flag_open_an_op(launched: Any, built: dict) -> None:
    ops = built["json"]["ops"]
    with visit(launched, built["page"]) as seen:
        page = seen.page
        if page.query_selector("#ops-more button"):
            page.click("#ops-more button")
        assert page.eval_on_selector_all("#ops-table tbody tr", "rows => rows.length") == len(ops)
        page.click("#ops-table th[data-col='eff']")
        assert page.get_attribute("#ops-table th[data-col='eff']", "aria-sort") == "descending"
        shown = _cells(page, "eff")
        known = [float(v) for v in shown if v is not None]
        assert known == sorted(known, reverse=True)
        assert all(v is not None for v in shown[: len(known)])
        assert shown.count(None) == sum(op["efficiency"] is None for op in ops)
        assert all(v is None for v in shown[len(known) :])  # unknown efficiency sorts last
        assert sorted(known) == pytest.approx(
            sorted(op["efficiency"] for op in ops if op["efficiency"] is not None)
        )
        page.click("#ops-table th[data-col='eff']")
        ascending = [float(v) for v in _cells(page, "eff") if v is not None]
        assert ascending == sorted(known)

        counts: dict[str, int] = {}
        for op in ops:
            for flag in op["flags"]:
                counts[flag] = counts.get(flag, 0) + 1
        flag = max(counts, key=lambda f: counts[f])
        page.select_option("#filter-flag", flag)
        rows = page.eval_on_selector_all(
            "#ops-table tbody tr",
            "rows => rows.map(r => r.querySelector(\"td[data-col='flags']\").textContent)",
        )
        assert len(rows) == counts[flag] and all(flag in text for text in rows)

        first = page.get_attribute("#ops-table tbody tr", "data-key")
        page.click("#ops-table tbody tr")
        assert page.is_visible("#detail")
        op = next(op for op in ops if op["key"] == first)
        assert page.text_content("#detail .detail-name") == op["label"]
        hlo = page.text_content("#detail-hlo")
        want = built["hlo_line"](op["name"], op["opcode"])
        assert (
            (hlo == want)
            if built["trace"].name == "transformer"
            else (_head(hlo, op["opcode"]) == want)
        )
        flags_text = page.text_content("#detail .flag-detail")
        finding = next(
            f
            for f in built["json"]["findings"]
            if f["op"] == op["key"] and f["rule"] == op["flags"][0]
        )
        assert finding["message"] in flags_text
        for name, value in built["json"]["rules"][op["flags"][0]]["thresholds"].items():
            assert f"{name} = {json.dumps(value)}" in flags_text
        page.keyboard.press("Escape")
        assert not page.is_visible("#detail")
        assert seen.errors == []


def test_a_steps_timeline_holds_that_steps_op_events(launched: Any, built: dict) -> None:
    trace, hlo = resolve_layout(built["trace"], None)
    profile = profan.load(trace, hlo=hlo)
    events = profile.ops
    steps = sorted(int(s) for s in events["step"].dropna().unique())
    step = steps[0] if len(steps) < 3 else steps[1]  # not the page's default (the median step)
    mine = events[events["step"] == step]
    spans = profile.async_ops  # start-to-done spans of async ops: their own lanes
    my_spans = spans[spans["step"] == step] if spans is not None else events.iloc[:0]
    with visit(launched, built["page"]) as seen:
        page = seen.page
        page.select_option("#tl-step", str(step))
        page.wait_for_function(f"() => window.profanPage.timeline.stats.step === {step}")
        stats = page.evaluate("window.profanPage.timeline.stats")
        lanes = page.evaluate("window.profanPage.report.timeline.lanes")
        assert stats["slices"] == len(mine) and stats["spans"] == len(my_spans)
        per_device = mine.groupby(["host", "device"], observed=True).size()
        in_flight = my_spans.groupby(["host", "device"], observed=True).size()
        want = [
            int(
                (in_flight if lane.get("in_flight") else per_device).get(
                    (lane["host"], lane["device"]), 0
                )
            )
            for lane in lanes
        ]
        assert stats["perLane"] == want and sum(want) == len(mine) + len(my_spans)
        if spans is not None and len(spans):  # the TPU trace: its transfers are drawn in flight
            assert len(my_spans) > 0 and any(lane.get("in_flight") for lane in lanes)
            assert "async spans (start to done)" in page.text_content("#tl-status")
        # at the whole step every slice is in view: drawn as a rectangle or merged into a
        # pixel column with others, never lost
        everything = len(mine) + len(my_spans)
        assert stats["visible"] == everything == stats["drawn"] + stats["merged"]
        # a click on a slice opens its op
        widest = page.evaluate(
            "(() => { const d = window.profanPage.timeline.data; let w = 0;"
            " for (let i = 0; i < d.n; i++)"
            "   if (d.duration[i] > d.duration[w] && d.op[i] >= 0) w = i;"
            " return w; })()"
        )
        point = page.evaluate(f"window.profanPage.timeline.locate({widest})")
        label = page.evaluate(
            f"window.profanPage.report.ops[window.profanPage.timeline.data.op[{widest}]].label"
        )
        page.mouse.move(point["x"], point["y"])
        assert label in page.text_content("#tip")
        page.mouse.click(point["x"], point["y"])
        assert page.text_content("#detail .detail-name") == label
        assert seen.errors == []


def test_hovering_a_roofline_point_names_its_op(launched: Any, built: dict) -> None:
    plotted = {
        op["key"]: op["label"]
        for op in built["json"]["ops"]
        if op["flops"] > 0 and op["hbm_bytes"] > 0 and op["measured_s"] > 0
    }
    with visit(launched, built["page"]) as seen:
        page = seen.page
        assert page.eval_on_selector_all("#roofline circle.point", "c => c.length") == len(plotted)
        uncovered = _uncovered_points(page)
        assert uncovered
        for index in uncovered[:5]:
            point = page.query_selector(f"#roofline circle.point[data-index='{index}']")
            point.hover()
            label = plotted[point.get_attribute("data-op")]
            assert page.is_visible("#tip") and page.text_content("#tip b") == label
        point.click()
        assert page.text_content("#detail .detail-name") == label
        assert seen.errors == []


def test_header_reads_at_a_glance(launched: Any, built: dict) -> None:
    """Step notes collapse into one line with their count, which expands; op names never wrap;
    the header takes less than half of the first screen."""
    noted = [s for s in built["json"]["steps"] if s.get("note")]
    with visit(launched, built["page"]) as seen:
        page = seen.page
        header = page.eval_on_selector("header", "h => h.getBoundingClientRect().height")
        # (330 px before 2ac16b7 gave the cards their per-step and whole-trace figures, ~4
        # more lines, and a partial trace its devices line: the transformer's header is 352 px)
        assert header < VIEWPORT["height"] / 2
        heights = page.eval_on_selector_all(
            ".step-notes summary",
            "items => items.map(e => [e.getBoundingClientRect().height,"
            " parseFloat(getComputedStyle(e).lineHeight) || 18])",
        )
        assert heights and all(height < 1.5 * line for height, line in heights), heights
        if noted:  # (the trace's own notes fold the same way: details.step-notes.trace-notes)
            steps = ".step-notes:not(.trace-notes)"
            summary = page.text_content(f"{steps} summary")
            assert f"notes on {len(noted)} of {len(built['json']['steps'])} steps" in summary
            assert not page.is_visible(f"{steps} li")
            page.click(f"{steps} summary")
            assert page.eval_on_selector_all(f"{steps} li", "items => items.length") == len(noted)
        lines = page.eval_on_selector_all(
            "#ops-table td.name",
            "cells => cells.map(c => { const r = document.createRange(); r.selectNodeContents(c);"
            " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size; })",
        )
        assert lines and set(lines) == {1}
        assert seen.errors == []


def test_screenshots(launched: Any, fixture_page: dict, tmp_path: Path) -> None:
    """The README's screenshots: 1400x1000, drawn (not blank), small.  With
    ``PROFAN_SCREENSHOTS=DIR`` they are written there too (docs/img for the README)."""
    from PIL import Image

    out = Path(os.environ.get("PROFAN_SCREENSHOTS") or tmp_path)
    ops = fixture_page["json"]["ops"]
    matmul = next(op for op in ops if op["category"] == "matmul" and op["flags"])
    with visit(launched, fixture_page["page"]) as seen:
        shots = screenshots(seen.page, out, matmul["label"])
        assert seen.errors == []
    for name, path in shots.items():
        with Image.open(path) as image:
            assert image.size == (1400, 1000), name
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 20, f"{name} looks blank"
        assert path.stat().st_size < 250_000, f"{name}: {path.stat().st_size} bytes"


def test_a_page_from_a_plain_json_report_says_what_it_lacks(
    launched: Any, fixture_page: dict, tmp_path: Path
) -> None:
    """``profan report report.json --format html`` (a JSON report built without the page's data):
    the table, charts and findings work; the timeline and the HLO say why they are missing."""
    _profan("report", str(fixture_page["out"] / "report.json"), "--format", "html", "--out",
            str(tmp_path))  # fmt: skip
    with visit(launched, tmp_path / "report.html") as seen:
        page = seen.page
        assert "carries no timeline" in page.text_content("#tl-wrap")
        page.click("#ops-table tbody tr")
        assert "built without the page's data" in page.text_content("#detail")
        assert page.eval_on_selector_all("#roofline circle.point", "c => c.length") > 0
        assert seen.errors == []

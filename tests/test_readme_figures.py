"""The README's figures against the report they show (issue 28): the quick start's quoted output
of ``profan report fixtures/transformer``, the figures its prose reads off that output, and the
three screenshots of the HTML report (docs/img/).  Every expectation comes from the report
itself, so a README left behind by a change to the report fails here and says what to update.

The screenshots are taken by this test: ``PROFAN_UPDATE_SCREENSHOTS=1 python -m pytest
tests/test_readme_figures.py`` writes them (and docs/img/screenshots.json, the figures they
show) into docs/img; without it they go to a temporary directory and the page's figures are
compared with the ones the committed screenshots show.  The browser part needs Playwright and
the system Chromium (``pip install -e '.[test,browser]'``, ``apt-get install chromium``) and
skips with a message without them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from profan.units import percent, seconds
from tests.conftest import REPO_ROOT

REPO = REPO_ROOT
README = REPO / "README.md"
IMG = REPO / "docs" / "img"
MANIFEST = IMG / "screenshots.json"
FIXTURE = "fixtures/transformer"  # as the README's commands name it, from the repository root
UPDATE = os.environ.get("PROFAN_UPDATE_SCREENSHOTS", "") not in ("", "0")
REGENERATE = "PROFAN_UPDATE_SCREENSHOTS=1 python -m pytest tests/test_readme_figures.py"
ELLIPSIS = "…"


def _profan(*args: str) -> str:
    """profan run as the README runs it: from the repository root, stdout piped (160 columns:
    ``COLUMNS`` is dropped so the caller's terminal does not change the layout)."""
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "profan", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def quoted_block() -> tuple[int, list[str]]:
    """The quick start's quoted output: the first fenced block after "The first command prints",
    as (the README line number of its first line, its lines)."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("The first command prints"))
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return opening + 2, [line.rstrip() for line in lines[opening + 1 : closing]]


def abridged_chunks(first_line: int, block: list[str]) -> list[tuple[int, list[str]]]:
    """The quoted block cut at its ``…`` lines (where the README leaves output out): runs of
    lines the real output must hold consecutively, in this order; (README line number, lines)."""
    chunks: list[tuple[int, list[str]]] = []
    run: list[str] = []
    run_start = first_line
    for number, line in enumerate(block, first_line):
        if line.strip() == ELLIPSIS:
            if run:
                chunks.append((run_start, run))
            run, run_start = [], number + 1
        else:
            run.append(line)
    if run:
        chunks.append((run_start, run))
    return chunks


def _longest_match(output: list[str], chunk: list[str], start: int) -> tuple[int, int]:
    """Where in ``output`` (from ``start``) the longest prefix of ``chunk`` matches: (index, its
    length)."""
    best = (start, 0)
    for i in range(start, len(output)):
        k = 0
        while k < len(chunk) and i + k < len(output) and output[i + k] == chunk[k]:
            k += 1
        if k > best[1]:
            best = (i, k)
    return best


def _first_word(line: str) -> str:
    words = re.findall(r"[\w.()-]+", line)
    return words[0] if words else ""


@pytest.fixture(scope="module")
def terminal() -> list[str]:
    """``profan report fixtures/transformer``, piped: the command the README quotes."""
    return [line.rstrip() for line in _profan("report", FIXTURE).splitlines()]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The JSON report of the same fixture."""
    out = tmp_path_factory.mktemp("readme-json")
    _profan("report", FIXTURE, "--format", "json", "--out", str(out))
    return json.loads((out / "report.json").read_text())


def test_quoted_output_is_the_reports_output(terminal: list[str]) -> None:
    """Each run of quoted lines between the README's ``…`` is found, line for line and in order,
    in today's output (the ``…`` stand for what the README leaves out)."""
    first_line, block = quoted_block()
    assert block, "README: the quick start's quoted output is empty"
    position = 0
    for number, chunk in abridged_chunks(first_line, block):
        at, matched = _longest_match(terminal, chunk, position)
        if matched == len(chunk):
            position = at + matched
            continue
        stale = chunk[matched]
        if matched:
            now = terminal[at + matched] if at + matched < len(terminal) else "(end of output)"
        else:  # no line of the run matched: show the output's line that starts the same way
            word = _first_word(stale)
            now = next((line for line in terminal if word and _first_word(line) == word), None)
            now = now if now is not None else "(no such line in the output)"
        pytest.fail(
            f"README.md line {number + matched} (the quick start's quoted output) is stale:\n"
            f"  README: {stale}\n  report: {now}\n"
            f"Quote `profan report {FIXTURE} | cat` again (keep the `…` lines where it abridges)."
        )


def test_quick_start_prose_reads_the_reports_figures(report: dict[str, Any]) -> None:
    """The quick start's "Read it as: on this 4×2 (data × model) mesh the step spends 83% of its
    busy device time in all-reduces": the mesh and the collectives' share of the op time per
    device, as the report has them."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    found = re.search(
        r"on this (\d+)×(\d+) \((\w+) × (\w+)\) mesh the step spends (\d+)% of its busy device"
        r" time in all-reduces",
        text,
    )
    assert found, "README: the 'Read it as' sentence (mesh, share of time in all-reduces) is gone"
    rows, columns, row_axis, column_axis, share = found.groups()
    meshes = list(report["summary"]["mesh"].values())
    assert {row_axis: int(rows), column_axis: int(columns)} in meshes, (meshes, found.group(0))
    by_category = report["summary"]["time_by_category_s"]
    collective = by_category["collective"] / sum(by_category.values())
    assert int(share) == round(100 * collective), (
        f"README says {share}% of the time in all-reduces; the report: {percent(collective)}"
    )


def test_readme_names_the_screenshots_this_test_takes() -> None:
    readme = README.read_text(encoding="utf-8")
    named = set(re.findall(r"\(docs/img/([\w.-]+\.png)\)", readme))
    assert named == {f"report-{name}.png" for name in SHOTS}
    assert all((IMG / name).is_file() for name in named)
    if REGENERATE not in " ".join(readme.split()):
        pytest.fail(f"README: say how the screenshots are made again ({REGENERATE})")


SHOTS = ("first-screen", "detail", "timeline")

# What the screenshots show, read off the page: the header's cards, the step the timeline draws,
# the rows of the op table on the first screen, and the op whose detail pane is open.
_CARDS = """() => [...document.querySelectorAll('header .card')].map(c => [
  c.querySelector('.card-title').textContent.trim(),
  c.querySelector('.card-value').textContent.trim()])"""
_ROWS = """() => [...document.querySelectorAll('#ops-table tbody tr')].slice(0, 7).map(r =>
  [...r.querySelectorAll('td')].slice(0, 6).map(td => td.textContent.trim()).join(' | '))"""
_STEP = """() => { const s = document.getElementById('tl-step');
  return s ? s.selectedOptions[0].textContent.trim() : null; }"""


def _detail_op(report: dict[str, Any]) -> dict[str, Any]:
    """The op the README's second screenshot opens: "a matmul flagged far from its roofline",
    the one with the longest measured time."""
    ops = [
        op
        for op in report["ops"]
        if op["category"] == "matmul" and "far-from-roofline" in (op.get("flags") or [])
    ]
    assert ops, "README: no matmul of the fixture is flagged far-from-roofline any more"
    return max(ops, key=lambda op: op["measured_s"])


def test_screenshots_show_the_reports_figures(report: dict[str, Any], tmp_path: Path) -> None:
    """Render the page of the README's fixture at 1400x1000 and take the three screenshots (into
    docs/img with PROFAN_UPDATE_SCREENSHOTS=1, else into a temporary directory).  The page's
    header shows the report's figures; the committed screenshots show the page's figures of
    today (docs/img/screenshots.json records what they showed when they were taken)."""
    from PIL import Image

    from tests.browser import VIEWPORT, browser, screenshots, visit

    page_dir = tmp_path / "page"
    _profan("report", FIXTURE, "--format", "html", "--out", str(page_dir))
    op = _detail_op(report)
    out = IMG if UPDATE else tmp_path / "img"
    with browser() as launched, visit(launched, page_dir / "report.html") as seen:
        page = seen.page
        shown = {
            "fixture": FIXTURE,
            "viewport": f"{VIEWPORT['width']}x{VIEWPORT['height']}",
            "cards": dict(page.evaluate(_CARDS)),
            "timeline step": page.evaluate(_STEP),
            "first rows": page.evaluate(_ROWS),
            "detail op": op["label"],
        }
        shots = screenshots(page, out, op["label"])
        assert seen.errors == []
    for name, path in shots.items():
        with Image.open(path) as image:
            assert image.size == (VIEWPORT["width"], VIEWPORT["height"]), name
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 20, f"{name} looks blank"
        assert path.stat().st_size < 250_000, f"{name}: {path.stat().st_size} bytes"

    summary = report["summary"]
    cards = shown["cards"]
    assert cards["findings"] == str(len(report["findings"])), cards
    assert cards["step time (median)"] == seconds(summary["step_time_median_s"]), cards
    assert cards["MFU"] == percent(summary["mfu"]), cards
    assert cards["exposed communication"] == percent(summary["exposed_comm_share"]), cards
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert f"at {VIEWPORT['width']}×{VIEWPORT['height']}" in readme, "README: the screenshots' size"

    if UPDATE:
        MANIFEST.write_text(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
        return
    taken = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    stale = {
        key: (taken.get(key), value) for key, value in shown.items() if taken.get(key) != value
    }
    assert not stale, (
        "docs/img's screenshots show another report than today's page:\n"
        + "\n".join(
            f"  {key}: screenshots {then!r}, page {now!r}" for key, (then, now) in stale.items()
        )
        + f"\nTake them again: {REGENERATE}"
    )


def test_the_quick_loops_lists_name_tests_that_exist() -> None:
    """README, Development: ``pytest -m "not slow"`` is the quick loop, and tests/conftest.py
    names the single tests it leaves out (SLOW_TESTS) or keeps (QUICK_TESTS) by file and
    function: every name there is still a test function of that file (a renamed test would
    silently fall back into, or out of, the loop)."""
    import ast

    from tests.conftest import QUICK_TESTS, SLOW_TESTS

    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert 'python -m pytest -q -m "not slow"' in readme, "README: the quick loop's command"
    missing = []
    for table in (SLOW_TESTS, QUICK_TESTS):
        for file, names in table.items():
            path = REPO / "tests" / file
            if not path.is_file():  # a file that is gone takes its tests with it
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
            missing += [f"{file}::{name}" for name in names if name.split("[")[0] not in defined]
    assert missing == [], f"tests/conftest.py names tests that are gone: {missing}"

"""Driving the HTML report in the system's headless Chromium with Playwright (extra
``browser``; no browser is ever downloaded).  Shared by the browser tests and by the
README's screenshots: ``PROFAN_SCREENSHOTS=docs/img python -m pytest
tests/test_report_html_browser.py -k screenshots`` writes them again."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

VIEWPORT = {"width": 1400, "height": 1000}
# Headless, and nothing that would reach a network on its own (updates, sync, field trials).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    """The system Chromium, or skip the test saying how to get it."""
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.skip("no system Chromium (apt-get install chromium); the browser tests need one")


def sync_playwright() -> Any:
    module = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (pip install 'profan[browser]')"
    )
    return module.sync_playwright


@dataclass
class Visit:
    """One page load: the page, every request it made, and every script error it raised."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextmanager
def browser() -> Iterator[Any]:
    executable = chromium_path()
    with sync_playwright()() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextmanager
def visit(launched: Any, page_file: Path) -> Iterator[Visit]:
    """Open ``page_file`` at 1400x1000 and wait until its first timeline step is drawn.
    Every request is recorded and any that is not the page itself is refused."""
    context = launched.new_context(viewport=VIEWPORT)
    page = context.new_page()
    seen = Visit(page)
    url = page_file.resolve().as_uri()
    page.on("request", lambda request: seen.requests.append(request.url))
    page.on("pageerror", lambda error: seen.errors.append(str(error)))
    page.on(
        "console",
        lambda message: seen.errors.append(message.text) if message.type == "error" else None,
    )
    context.route(
        "**/*",
        lambda route: route.continue_() if route.request.url == url else route.abort(),
    )
    try:
        page.goto(url)
        page.evaluate("window.profanPage.ready")
        yield seen
    finally:
        context.close()


def optimise_png(path: Path) -> None:
    """A screenshot as a 256-colour palette PNG (a fraction of Chromium's size; the page's
    flat colours survive the palette)."""
    from PIL import Image

    with Image.open(path) as image:
        reduced = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    reduced.save(path, optimize=True)


# The first third of the step's ops, the longest matmul there under the mouse.
_TIMELINE_VIEW = """(() => {
  const t = window.profanPage.timeline, d = t.data, ops = window.profanPage.report.ops;
  let a = Infinity;
  for (let i = 0; i < d.n; i++) a = Math.min(a, d.start[i]);
  const b = a + (d.extent[1] - a) / 3;
  t.zoomTo(a - (b - a) * 0.02, b);
  let best = 0;
  for (let i = 0; i < d.n; i++) {
    const k = d.op[i];
    if (k < 0 || ops[k].category !== "matmul" || d.start[i] > a + (b - a) * 0.8) continue;
    if (d.duration[i] > d.duration[best]) best = i;
  }
  return t.locate(best);
})()"""


def screenshots(page: Any, out_dir: Path, op_label: str) -> dict[str, Path]:
    """The README's three: the first screen, the detail pane of ``op_label``, the timeline
    (zoomed into the step, a slice hovered)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shots = {
        name: out_dir / f"report-{name}.png" for name in ("first-screen", "detail", "timeline")
    }
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.move(1, 1)
    page.screenshot(path=str(shots["first-screen"]))
    index = page.evaluate(
        "(label) => window.profanPage.report.ops.findIndex((op) => op.label === label)", op_label
    )
    page.click(f"#ops-table tr[data-index='{index}']")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(shots["detail"]))
    page.keyboard.press("Escape")
    page.evaluate(
        "document.activeElement.blur(); document.getElementById('timeline').scrollIntoView()"
    )
    box = page.evaluate(_TIMELINE_VIEW)
    page.mouse.move(box["x"], box["y"])
    page.screenshot(path=str(shots["timeline"]))
    page.mouse.move(1, 1)
    for path in shots.values():
        optimise_png(path)
    return shots

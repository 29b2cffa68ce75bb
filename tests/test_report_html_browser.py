"""The HTML report and its plots render in a real headless Chromium (screenshot checked)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

CHROMIUM = next(
    (
        p
        for p in (
            "/usr/bin/chromium",
            shutil.which("chromium") or "",
            shutil.which("chromium-browser") or "",
        )
        if p and os.path.exists(p)
    ),
    None,
)
WIDTH, HEIGHT = 1280, 3000


def _count_colour(image: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    pixels = (image[..., :3] * 255).round().astype(int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=-1) <= tolerance).sum())


def _rows_with(image: np.ndarray, rgb: tuple[int, int, int]) -> np.ndarray:
    pixels = (image[..., :3] * 255).round().astype(int)
    return np.nonzero((np.abs(pixels - np.array(rgb)).max(axis=-1) <= 12).any(axis=1))[0]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_html_report_renders_in_chromium(
    fixtures_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib import image as mpimg

    env = dict(os.environ)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "profan", "report", str(fixtures_dir / "mlp_worse"),
         "--format", "html", "--out", str(out), "--plots"],
        capture_output=True, text=True, env=env, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out / "report.html"
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 3  # roofline, per step, measured vs ideal
    assert {p.name for p in out.glob("*.png")} >= {"roofline.png", "measured_vs_ideal.png"}

    shot = tmp_path / "shot.png"
    browser = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
         f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shot.exists(), browser.stderr[-2000:]
    image = mpimg.imread(str(shot))
    assert image.shape[0] == HEIGHT and image.shape[1] == WIDTH
    # the ops table: header cells are #2b4a6f
    table_rows = _rows_with(image, (0x2B, 0x4A, 0x6F))
    assert _count_colour(image, (0x2B, 0x4A, 0x6F)) > 2000, "ops table header not drawn"
    # the plots: measured bars (#d62728) and ideal bars (#2ca02c) of the measured-vs-ideal chart,
    # drawn as images (decoded PNGs, not broken-image icons)
    red_rows = _rows_with(image, (0xD6, 0x27, 0x28))
    assert _count_colour(image, (0xD6, 0x27, 0x28)) > 300, "plot bars not drawn"
    assert _count_colour(image, (0x2C, 0xA0, 0x2C)) > 100, "ideal bars not drawn"
    # plots come before the table on the page
    assert red_rows.min() < table_rows.max()
    # not blank: a fair share of the page is non-white
    non_white = (image[..., :3] < 0.95).any(axis=-1).mean()
    assert non_white > 0.05

"""The HTML page as a file: drawn from the report alone (a report read back from JSON renders the
same bytes, which is what a cache of built reports relies on), every script and style inline,
nothing fetched from anywhere.  What it does in a browser: test_report_html_browser.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from profan.report.analysis.pipeline import report_for
from profan.report.model import Report
from profan.report.render import html
from profan.report.render.html.page import SCRIPTS, STYLE, asset


def _embedded(page: str) -> dict:
    return json.loads(page.split("id='profan-data'>", 1)[1].split("</script>", 1)[0])


@pytest.mark.parametrize("name", ["transformer", "multihost", "gpu_transformer"])
def test_a_report_read_back_renders_the_same_page(fixtures_dir: Path, name: str) -> None:
    report = report_for(fixtures_dir / name, page=True)
    page = html.render(report, top=20)
    again = Report.from_dict(json.loads(json.dumps(report.to_dict())))
    assert html.render(again, top=20) == page
    # and the page's data is that report, nothing else
    assert _embedded(page)["report"] == json.loads(json.dumps(report.to_dict()))


@pytest.mark.corpus
def test_v6e_read_back_renders_the_same_page(corpus_dir: Path, tmp_path: Path) -> None:
    from profan.cli import main

    report = report_for(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb", page=True)
    (tmp_path / "saved").mkdir()
    saved = tmp_path / "saved" / "built.json"
    saved.write_text(json.dumps(report.to_dict()))
    out = tmp_path / "out"
    assert main(["report", str(saved), "--format", "html", "--out", str(out)]) == 0
    assert (out / "report.html").read_text(encoding="utf-8") == html.render(report)


def test_everything_is_inline(fixtures_dir: Path) -> None:
    page = html.render(report_for(fixtures_dir / "transformer", page=True))
    for name in (*SCRIPTS, STYLE):
        assert asset(name).strip() in page
    assert not re.search(r"\b(src|href)\s*=\s*['\"]?(https?:|//)", page)
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=", page)
    assert "default-src 'none'" in page  # the browser itself refuses any request
    # the inline data cannot close its own script element
    data = page.split("id='profan-data'>", 1)[1].split("</script>", 1)[0]
    assert "<" not in data


def test_a_report_without_page_data_still_renders(fixtures_dir: Path) -> None:
    """A JSON report from ``--format json`` (no timeline, no HLO lines) gives a page that says
    what it lacks (the browser test reads the words)."""
    plain = Report.from_dict(json.loads(json.dumps(report_for(fixtures_dir / "mlp").to_dict())))
    data = _embedded(html.render(plain))["report"]
    assert "timeline" not in data and all(op["hlo"] is None for op in data["ops"])

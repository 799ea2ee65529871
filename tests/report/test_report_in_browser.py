"""The HTML report opened in a real headless Chromium: it renders, and logs nothing to the console.

Skipped with a message where no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fib_core.report import plots
from fib_core.report.browser import INSTALL_HINT, find_browser, render_dom, screenshot
from fib_core.report.html import ReportSection, build_html

pytestmark = pytest.mark.skipif(find_browser() is None, reason=INSTALL_HINT)


def test_the_console_check_sees_a_broken_page(tmp_path: Path) -> None:
    """The detector itself: a page with a script error must be caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p>"
        "<script>console.error('deliberate'); notDefined();</script></body></html>"
    )
    found = render_dom(page).console
    assert any("deliberate" in m for m in found)
    assert any("notDefined" in m for m in found)


def test_report_renders_without_console_messages(tmp_path: Path, mkrecord) -> None:
    prev = mkrecord({1: 0.010, 64: 0.200, 256: 1.0}, solution_hash="1" * 64)
    cur = mkrecord({1: 0.008, 64: 0.202}, failed={256: "bad <values>"}, solution_hash="2" * 64)
    page = tmp_path / "report.html"
    page.write_text(build_html([ReportSection(cur, previous=prev, history=[prev, cur])]))
    rendered = render_dom(page)
    assert rendered.console == []
    dom = rendered.dom
    for uuid in ("wl-b1", "wl-b64", "wl-b256"):
        assert f'data-uuid="{uuid}"' in dom
    if plots.plots_available():
        assert len(re.findall(r"<svg\b", dom)) == 5  # parsed as SVG elements by the browser
    png = screenshot(page, tmp_path / "report.png", height=800)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

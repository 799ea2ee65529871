"""A headless Chromium, when one is installed: the report as a browser renders it, or a PNG.

Used by ``scripts/report.py --png`` (a screenshot for the README or a pull request) and by the
tests that open the report in a real browser and look for console messages. Nothing here is
needed to write a report; every function says plainly when no browser is found.

Example::

    from fib_core.report.browser import find_browser, screenshot
    if find_browser():
        screenshot("runs/report.html", "runs/report.png")
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fib_core.errors import FibError

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_ENV = "FIB_BROWSER"
INSTALL_HINT = (
    "no headless Chromium found (looked for $FIB_BROWSER, " + ", ".join(CANDIDATES) + "); "
    "install one, e.g. `apt-get install chromium` on Debian/Ubuntu"
)
_TIMEOUT_S = 120
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-extensions",
    "--no-first-run",
    "--hide-scrollbars",
)
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]\s*(.*)")


@dataclass(frozen=True)
class Rendered:
    """What the browser made of a page: its DOM after load, and every console message."""

    dom: str
    console: list[str]


def find_browser() -> str | None:
    """The browser executable: ``$FIB_BROWSER`` if set, else the first of :data:`CANDIDATES`."""
    named = os.environ.get(BROWSER_ENV)
    if named:
        return shutil.which(named) or (named if Path(named).is_file() else None)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def render_dom(html_path: str | Path, *, browser: str | None = None) -> Rendered:
    """Load ``html_path`` in headless Chromium; the DOM it built and its console messages.

    The page gets a private, throw-away profile folder; Chromium writes nothing else.
    """
    out = _run(html_path, ["--enable-logging=stderr", "--v=0", "--dump-dom"], browser)
    console = [m.group(1) for line in out.stderr.splitlines() if (m := _CONSOLE.search(line))]
    return Rendered(dom=out.stdout, console=console)


def screenshot(
    html_path: str | Path,
    png_path: str | Path,
    *,
    width: int = 1280,
    height: int = 3000,
    browser: str | None = None,
) -> Path:
    """Render ``html_path`` to a PNG of ``width`` x ``height`` pixels (the page's top part)."""
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    _run(html_path, [f"--window-size={width},{height}", f"--screenshot={png_path}"], browser)
    if not png_path.is_file():
        raise FibError(f"{png_path}: the browser wrote no screenshot")
    return png_path


def _run(
    html_path: str | Path, flags: list[str], browser: str | None
) -> subprocess.CompletedProcess:
    import tempfile

    exe = browser or find_browser()
    if exe is None:
        raise FibError(INSTALL_HINT)
    page = Path(html_path).resolve()
    if not page.is_file():
        raise FibError(f"{html_path}: no such HTML file")
    with tempfile.TemporaryDirectory(prefix="fib-browser-") as profile:
        cmd = [exe, *_FLAGS, f"--user-data-dir={profile}", *flags, page.as_uri()]
        try:
            return subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                check=False,
                env={**os.environ, "HOME": profile},
            )
        except subprocess.TimeoutExpired:
            raise FibError(f"{exe}: no answer within {_TIMEOUT_S} s rendering {page}") from None

"""A headless Chromium, when one is installed: the report as a browser renders it, or a PNG.

Used by ``scripts/report.py --png`` (a screenshot for the README or a pull request) and by the
tests that open the report in a real browser: :class:`Page` keeps the page open and drives it
through Chromium's DevTools protocol over a pipe (``--remote-debugging-pipe``: no port, no
network, no extra package), so a test can click a table header, read the rows back, and
collect every script error and console message. Nothing here is needed to write a report;
every function says plainly when no browser is found.

Example::

    from fib_core.report.browser import Page, find_browser, screenshot
    if find_browser():
        screenshot("runs/report.html", "runs/report.png", width=1400)
        with Page("runs/report.html") as page:
            print(page.evaluate("document.title"), page.errors)
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

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
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--hide-scrollbars",
)
# Run by a child Python: fds argv[1] and argv[2] become 3 and 4 (where Chromium's
# --remote-debugging-pipe reads commands and writes replies), then it becomes argv[3:].
_WIRE_FDS = (
    "import fcntl, os, sys\n"
    "a, b = (fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3])\n"
    "os.dup2(a, 3)\nos.dup2(b, 4)\nos.close(a)\nos.close(b)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


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


def screenshot(
    html_path: str | Path,
    png_path: str | Path,
    *,
    width: int = 1400,
    height: int | None = None,
    browser: str | None = None,
) -> Path:
    """Render ``html_path`` to a PNG ``width`` pixels wide: the whole page, or its top
    ``height`` pixels."""
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with Page(html_path, width=width, browser=browser) as page:
        page.screenshot(png_path, height=height)
    if not png_path.is_file():
        raise FibError(f"{png_path}: the browser wrote no screenshot")
    return png_path


class Page:
    """One page open in headless Chromium, driven over the DevTools protocol on a pipe.

    ``errors`` collects what a contestant would see in the browser's console: uncaught script
    exceptions, ``console.error``/``console.warn`` calls, and the browser's own error and
    warning entries (a resource blocked by the page's security policy, a failed load).
    ``messages`` has every console line, whatever its level.

    Example::

        with Page("runs/report.html", width=1400) as page:
            page.evaluate("document.querySelector('th').click()")
            assert page.errors == []
    """

    def __init__(
        self,
        html_path: str | Path,
        *,
        width: int = 1400,
        height: int = 1000,
        browser: str | None = None,
    ) -> None:
        self.page = Path(html_path).resolve()
        if not self.page.is_file():
            raise FibError(f"{html_path}: no such HTML file")
        self.exe = browser or find_browser()
        if self.exe is None:
            raise FibError(INSTALL_HINT)
        self.width, self.height = width, height
        self.errors: list[str] = []
        self.messages: list[str] = []
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[str] = []
        self._cond = threading.Condition()
        self._next_id = 0
        self._session: str | None = None
        self._proc: subprocess.Popen | None = None
        self._profile: tempfile.TemporaryDirectory | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Page:
        self._profile = tempfile.TemporaryDirectory(prefix="fib-browser-")
        to_child, self._out = os.pipe()  # our commands -> Chromium's fd 3
        self._in, from_child = os.pipe()  # Chromium's fd 4 -> our replies
        profile = self._profile.name
        try:  # a small Python step puts the two pipe ends at fds 3 and 4, then runs Chromium
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WIRE_FDS, str(to_child), str(from_child),
                 self.exe, *_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                 "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(to_child, from_child),
                env={**os.environ, "HOME": profile},
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        threading.Thread(target=self._read, daemon=True).start()
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._call(
                "Target.attachToTarget", {"targetId": target, "flatten": True}
            )["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                self._call(f"{domain}.enable")
            self._resize(self.height)
            self._call("Page.navigate", {"url": self.page.as_uri()})
            self._wait_event("Page.loadEventFired")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the browser and its pipes; safe to call twice."""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                self._send("Browser.close", {}, session=False)
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            os.close(self._out)
        if self._profile is not None:
            self._profile.cleanup()
            self._profile = None

    # --- what a test does with the page ----------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able values come back as
        Python ones); a script exception raises :class:`FibError` with its message."""
        reply = self._call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in reply:
            raise FibError(f"in the page: {_exception_text(reply['exceptionDetails'])}")
        return reply.get("result", {}).get("value")

    def screenshot(self, png_path: str | Path, *, height: int | None = None) -> Path:
        """A PNG of the page at the page's width: all of it, or its top ``height`` pixels.

        The page is laid out as in the window it was opened with (a box sized to 75 % of the
        window's height keeps that size), and captured beyond the window's bottom: a window
        as tall as the page would lay it out differently from what a reader sees."""
        full = self._call("Page.getLayoutMetrics")["cssContentSize"]["height"]
        tall = int(min(full, height) if height else full)
        clip = {"x": 0, "y": 0, "width": self.width, "height": max(tall, 1), "scale": 1}
        data = self._call("Page.captureScreenshot", {"format": "png", "clip": clip,
                                                      "captureBeyondViewport": True})["data"]
        path = Path(png_path)
        path.write_bytes(base64.b64decode(data))
        return path

    # --- the protocol -----------------------------------------------------------------------

    def _resize(self, height: int) -> None:
        self._call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def _send(self, method: str, params: dict[str, Any], *, session: bool = True) -> int:
        with self._cond:
            self._next_id += 1
            ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session and self._session:
            message["sessionId"] = self._session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return ident

    def _call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        ident = self._send(method, params or {}, session=not method.startswith(("Target.",
                                                                                 "Browser.")))
        with self._cond:
            if not self._cond.wait_for(lambda: ident in self._replies or self._dead(),
                                       timeout=_TIMEOUT_S):
                raise FibError(f"{self.exe}: no answer to {method} within {_TIMEOUT_S} s")
            if ident not in self._replies:
                raise FibError(f"{self.exe}: the browser exited while answering {method}")
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise FibError(f"{self.exe}: {method} failed: {reply['error'].get('message')}")
        return reply.get("result", {})

    def _wait_event(self, method: str) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: method in self._events or self._dead(),
                                       timeout=_TIMEOUT_S):
                raise FibError(f"{self.exe}: {method} did not come within {_TIMEOUT_S} s")

    def _dead(self) -> bool:
        return self._proc is None or self._proc.poll() is not None

    def _read(self) -> None:
        """The reader thread: splits the pipe's NUL-separated JSON messages and files them."""
        buffer = b""
        with os.fdopen(self._in, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    self._file(json.loads(raw))
        with self._cond:
            self._cond.notify_all()

    def _file(self, message: dict[str, Any]) -> None:
        params = message.get("params", {})
        method = message.get("method", "")
        with self._cond:
            if "id" in message:
                self._replies[message["id"]] = message
            elif method == "Runtime.exceptionThrown":
                self.errors.append(_exception_text(params.get("exceptionDetails", {})))
            elif method == "Runtime.consoleAPICalled":
                text = " ".join(_remote_text(a) for a in params.get("args", []))
                self.messages.append(f"{params.get('type')}: {text}")
                if params.get("type") in ("error", "warning", "assert"):
                    self.errors.append(text)
            elif method == "Log.entryAdded":
                entry = params.get("entry", {})
                self.messages.append(f"{entry.get('level')}: {entry.get('text')}")
                if entry.get("level") in ("error", "warning"):
                    self.errors.append(str(entry.get("text")))
            else:
                self._events.append(method)
            self._cond.notify_all()


def _exception_text(details: dict[str, Any]) -> str:
    exc = details.get("exception") or {}
    return str(exc.get("description") or details.get("text") or "script error")


def _remote_text(arg: dict[str, Any]) -> str:
    return str(arg.get("value", arg.get("description", "")))

"""Headless Chromium driven over the Chrome DevTools protocol, for the explorer's browser tests.

The protocol runs over ``--remote-debugging-pipe`` (Chromium reads commands from its fd 3 and
writes answers to its fd 4, each message JSON ended by a NUL byte), so the driver needs
nothing but the standard library and the system's Chromium: no chromedriver, no WebSocket
client, no port to pick. Waiting is done in the page (a promise that settles when a condition
holds), never by sleeping in Python.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import sys
import threading
from typing import Any

__all__ = ["Browser", "BrowserError", "find_chromium", "CHROMIUM_FLAGS"]

#: Chromium's flags for a root user in a container, with a fresh profile added per browser.
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--disable-extensions", "--disable-default-apps",
    "--no-default-browser-check", "--remote-debugging-pipe",
)
#: How long one command or one wait may take before the test fails (a loaded machine is slow).
TIMEOUT = 60.0


_AS_FDS_3_AND_4 = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); os.execv(sys.argv[3], sys.argv[3:])"


class BrowserError(AssertionError):
    """A protocol command failed, a script threw, or a wait ran out."""


def find_chromium() -> str | None:
    """The Chromium binary: ``$TABLESDK_CHROMIUM``, else ``chromium`` (Debian) or its other names."""
    given = os.environ.get("TABLESDK_CHROMIUM")
    if given:
        return given
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page (tab), attached over the DevTools pipe."""

    def __init__(self, binary: str, width: int = 1280, height: int = 800) -> None:
        self._profile = tempfile.mkdtemp(prefix="tablesdk-chromium-")
        commands_read, commands_write = os.pipe()
        answers_read, answers_write = os.pipe()
        # Chromium's fds 3 and 4: a fresh Python puts the pipe ends there and execs Chromium (no code
        # runs in a fork of this threaded process). They are moved above 10 first, so that neither
        # dup2 overwrites the other.
        child_in = fcntl.fcntl(commands_read, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(answers_write, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (commands_read, answers_write):
            os.close(fd)
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [sys.executable, "-c", _AS_FDS_3_AND_4, str(child_in), str(child_out),
             binary, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, pass_fds=(child_in, child_out),
        )
        os.close(child_in)
        os.close(child_out)
        self._commands = os.fdopen(commands_write, "wb", buffering=0)
        self._answers = os.fdopen(answers_read, "rb", buffering=0)
        self._lock = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self._closed = False
        #: JavaScript dialogs (alert, confirm, prompt, beforeunload) the page opened, in order.
        self.dialogs: list[dict[str, Any]] = []
        #: Console messages and uncaught exceptions of the page.
        self.console: list[str] = []
        self._reader = threading.Thread(target=self._read, name="chromium-devtools", daemon=True)
        self._reader.start()
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Page.enable", "Runtime.enable"):
            self.command(method)
        self.command("Emulation.setDeviceMetricsOverride",
                     {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # -------------------------------------------------------------- protocol

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._answers.read(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    self._closed = True
                    self._lock.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                self._dispatch(json.loads(raw))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            with self._lock:
                self._replies[message["id"]] = message
                self._lock.notify_all()
            return
        method = message.get("method")
        params = message.get("params", {})
        if method == "Page.javascriptDialogOpening":
            self.dialogs.append(params)
            # answered from the reader thread without waiting: a dialog blocks the page until then
            self._write({"id": self._take_id(), "sessionId": message.get("sessionId"),
                         "method": "Page.handleJavaScriptDialog", "params": {"accept": False}})
        elif method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params["args"]))
        elif method == "Runtime.exceptionThrown":
            self.console.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])

    def _take_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def _write(self, message: dict[str, Any]) -> None:
        self._commands.write(json.dumps(message).encode() + b"\0")

    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
              timeout: float = TIMEOUT) -> dict[str, Any]:
        ident = self._take_id()
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._write(message)
        with self._lock:
            if not self._lock.wait_for(lambda: ident in self._replies or self._closed, timeout):
                raise BrowserError(f"{method}: no answer in {timeout} s")
            if ident not in self._replies:
                raise BrowserError(f"{method}: Chromium closed the pipe ({self.log_tail()})")
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def command(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one protocol command to the page and return its result."""
        return self._send(method, params, self._session)

    def log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-2000:]

    # -------------------------------------------------------------- the page

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.command("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                   "returnByValue": True, "userGesture": True})
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"{expression[:200]}: {text}")
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        """Load ``url`` and wait for its document to be complete."""
        self.command("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def wait_for(self, condition: str, timeout_ms: int = int(TIMEOUT * 1000)) -> Any:
        """Wait, in the page, until the JavaScript ``condition`` is truthy; return its value."""
        script = """new Promise((resolve, reject) => {
            const deadline = performance.now() + %d;
            const check = () => {
                let value;
                try { value = (%s); } catch (error) { value = undefined; }
                if (value) resolve(value);
                else if (performance.now() > deadline) reject(new Error("timed out waiting for: " + %s));
                else setTimeout(check, 20);
            };
            check();
        })""" % (timeout_ms, condition, json.dumps(condition))
        return self.evaluate(script)

    def text(self, selector: str) -> str:
        return str(self.evaluate(f"document.querySelector({json.dumps(selector)}).textContent"))

    def visible(self, selector: str) -> bool:
        return bool(self.evaluate(f"""(() => {{
            const node = document.querySelector({json.dumps(selector)});
            return Boolean(node && node.getClientRects().length > 0);
        }})()"""))

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the element (it must be shown, and not covered)."""
        box = self.wait_for(f"""(() => {{
            const node = document.querySelector({json.dumps(selector)});
            if (!node || node.getClientRects().length === 0 || node.disabled) return null;
            node.scrollIntoView({{block: "center", inline: "center"}});
            const r = node.getBoundingClientRect();
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            const hit = document.elementFromPoint(x, y);
            return hit && (hit === node || node.contains(hit)) ? {{x, y}} : null;
        }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.command("Input.dispatchMouseEvent",
                         {"type": kind, "x": box["x"], "y": box["y"], "button": "left", "clickCount": 1})

    def type(self, selector: str, text: str) -> None:
        """Replace the text of an input as a user would: focus, select all, type."""
        self.wait_for(f"document.querySelector({json.dumps(selector)})")
        self.evaluate(f"(() => {{ const n = document.querySelector({json.dumps(selector)}); n.focus(); n.select(); }})()")
        if text:
            self.command("Input.insertText", {"text": text})
        else:
            self.command("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Delete", "code": "Delete",
                                                    "windowsVirtualKeyCode": 46})
            self.command("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Delete", "code": "Delete",
                                                    "windowsVirtualKeyCode": 46})

    def select(self, selector: str, value: str) -> None:
        """Choose an option of a ``<select>`` (and fire its change event, as a user's choice does)."""
        self.evaluate(f"""(() => {{
            const node = document.querySelector({json.dumps(selector)});
            node.value = {json.dumps(value)};
            node.dispatchEvent(new Event("change", {{bubbles: true}}));
        }})()""")

    def screenshot(self) -> bytes:
        """The page as a PNG."""
        return base64.b64decode(self.command("Page.captureScreenshot", {"format": "png"})["data"])

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        try:
            if not self._closed:
                self._send("Browser.close", timeout=10)
        except (BrowserError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for stream in (self._commands, self._answers):
            try:
                stream.close()
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

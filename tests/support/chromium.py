"""A small synchronous driver for headless Chromium over the DevTools protocol (aiohttp).

Enough for the report tests: open a page, evaluate JavaScript, press keys, take a screenshot,
and record what must not happen (JavaScript dialogs, uncaught exceptions, console errors).
The browser is Debian's `chromium`; nothing is downloaded. The protocol runs on an event loop
in a background thread, so a dialog opened by the page is seen and dismissed at once even
while the test thread is busy."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp

LAUNCH_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--remote-debugging-port=0", "--window-size=1400,1000",
]

# key → (code, windowsVirtualKeyCode, text)
KEYS = {
    "j": ("KeyJ", 74, "j"), "k": ("KeyK", 75, "k"),
    "ArrowRight": ("ArrowRight", 39, ""), "ArrowLeft": ("ArrowLeft", 37, ""),
    "Home": ("Home", 36, ""), "End": ("End", 35, ""), "Enter": ("Enter", 13, "\r"),
}


def find_chromium() -> str | None:
    for cand in (os.environ.get("VLMOCR_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium"),
                 shutil.which("chromium-browser")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    return None


class CDPError(RuntimeError):
    pass


class Chromium:
    """One headless browser process and one DevTools connection."""

    def __init__(self, executable: str, profile_dir: Path, timeout: float = 60.0) -> None:
        self.profile_dir = profile_dir
        profile_dir.mkdir(parents=True, exist_ok=True)
        port_file = profile_dir / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a stale one from an earlier browser would mislead us
        self.log_path = profile_dir.parent / "chromium.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [executable, *LAUNCH_FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: close() can end every child it left
        )
        try:
            self._start(timeout)
        except BaseException:
            self.close()
            raise

    def _start(self, timeout: float) -> None:
        port_file = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while True:
            if port_file.is_file():
                lines = port_file.read_text().split("\n")
                if len(lines) >= 2 and lines[0].strip() and lines[1].strip():
                    break
            if self.proc.poll() is not None:
                raise CDPError(f"chromium exited with {self.proc.returncode}; see {self.log_path}")
            if time.monotonic() > deadline:
                raise CDPError(f"chromium did not open its DevTools port in {timeout} s; see {self.log_path}")
            time.sleep(0.05)
        self.ws_url = f"ws://127.0.0.1:{lines[0].strip()}{lines[1].strip()}"
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._listeners: dict[str, list[Any]] = {}  # sessionId → pages
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="cdp", daemon=True)
        self._thread.start()
        self._call(self._connect(), timeout)

    # --- plumbing on the loop thread
    async def _connect(self) -> None:
        self._http = aiohttp.ClientSession()
        self._ws = await self._http.ws_connect(self.ws_url, max_msg_size=0)
        self._reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data:
                fut = self._pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    if "error" in data:
                        fut.set_exception(CDPError(str(data["error"])))
                    else:
                        fut.set_result(data.get("result", {}))
                continue
            for page in self._listeners.get(data.get("sessionId", ""), []):
                await page._on_event(data["method"], data.get("params", {}))
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(CDPError("DevTools connection closed"))

    async def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        msg: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        fut = self.loop.create_future()
        self._pending[msg["id"]] = fut
        await self._ws.send_str(json.dumps(msg))
        return await fut

    def _call(self, coro: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # --- the API
    def new_page(self, width: int = 1400, height: int = 1000) -> Page:
        target = self._call(self.send("Target.createTarget", {"url": "about:blank"}))
        attached = self._call(self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}))
        page = Page(self, target["targetId"], attached["sessionId"])
        self._listeners.setdefault(page.session, []).append(page)
        for domain in ("Page", "Runtime", "Log"):
            page.cmd(f"{domain}.enable")
        page.cmd("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        return page

    def close(self) -> None:
        try:
            if getattr(self, "_http", None) is not None:
                async def shut() -> None:
                    if getattr(self, "_ws", None) is not None:
                        try:
                            await asyncio.wait_for(self.send("Browser.close"), 5)
                        except Exception:
                            pass
                        await self._ws.close()
                    await self._http.close()

                self._call(shut(), 15)
        except Exception:
            pass
        finally:
            if getattr(self, "_thread", None) is not None:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(5)
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
            try:  # helpers (zygote, renderers) of the browser we started, if any outlived it
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._log.close()


class Page:
    def __init__(self, browser: Chromium, target_id: str, session: str) -> None:
        self.browser = browser
        self.target_id = target_id
        self.session = session
        self.dialogs: list[dict] = []
        self.exceptions: list[str] = []
        self.console_errors: list[str] = []
        self.log_entries: list[dict] = []
        self._load_events = 0

    async def _on_event(self, method: str, params: dict) -> None:
        if method == "Page.javascriptDialogOpening":
            self.dialogs.append(params)
            asyncio.ensure_future(self.browser.send("Page.handleJavaScriptDialog", {"accept": False}, self.session))
        elif method == "Page.loadEventFired":
            self._load_events += 1
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.exceptions.append(details.get("exception", {}).get("description") or details.get("text", "?"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded":
            self.log_entries.append(params.get("entry", {}))

    def cmd(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.browser._call(self.browser.send(method, params, self.session), timeout)

    def goto(self, url: str, timeout: float = 30.0) -> float:
        """Navigate and wait for the load event; returns the seconds it took."""
        before = self._load_events
        t0 = time.monotonic()
        result = self.cmd("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise CDPError(f"navigation to {url} failed: {result['errorText']}")
        while self._load_events == before:
            if time.monotonic() - t0 > timeout:
                raise CDPError(f"no load event for {url} in {timeout} s")
            time.sleep(0.02)
        return time.monotonic() - t0

    def eval(self, expression: str, timeout: float = 30.0) -> Any:
        res = self.cmd("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                       timeout)
        if res.get("exceptionDetails"):
            raise CDPError(f"{expression!r} threw: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def press(self, key: str) -> None:
        code, vk, text = KEYS[key]
        down: dict[str, Any] = {"type": "keyDown" if text else "rawKeyDown", "key": key, "code": code,
                                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk}
        if text:
            down["text"] = text
            down["unmodifiedText"] = text
        self.cmd("Input.dispatchKeyEvent", down)
        self.cmd("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                                            "nativeVirtualKeyCode": vk})

    def screenshot(self, path: Path) -> Path:
        data = self.cmd("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(base64.b64decode(data))
        os.replace(tmp, path)
        return path

    def close(self) -> None:
        try:
            self.browser._call(self.browser.send("Target.closeTarget", {"targetId": self.target_id}), 10)
        except Exception:
            pass
        pages = self.browser._listeners.get(self.session, [])
        if self in pages:
            pages.remove(self)

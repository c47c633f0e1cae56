"""An aiohttp application served on 127.0.0.1 from a thread of this process, for the stand-ins
(the Hub, the HF Jobs API) that tests and subprocesses under test talk to over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Iterator

from aiohttp import web


@contextlib.contextmanager
def serve_app_in_thread(app: web.Application, name: str, start_timeout: float = 30) -> Iterator[str]:
    """Serve `app` on a free port of 127.0.0.1 on its own event loop for the ``with`` block;
    yields the base URL. A start-up failure is raised here, naming `name`."""
    started: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Event, int] | BaseException] = queue.Queue()

    async def main() -> None:
        stop = asyncio.Event()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        started.put((asyncio.get_running_loop(), stop, int(runner.addresses[0][1])))
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - report a start-up failure to the waiting test
            started.put(exc)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    first = started.get(timeout=start_timeout)
    if isinstance(first, BaseException):
        raise RuntimeError(f"{name} did not start: {first}") from first
    loop, stop, port = first
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)

"""An OpenAI-compatible endpoint that misbehaves on purpose (cf. OCRmyPDF's tests/plugins):
endless or oversized bodies, answers of the wrong types, a server that accepts and never
answers, a key that is refused or echoed back. Real HTTP on 127.0.0.1, in a thread.

`mode` chooses the fault; /v1/models answers normally unless the mode is about it."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web

MODES = (
    "chat_endless",  # chunked chat answer that never ends
    "chat_huge_declared",  # Content-Length: 2 GB, then bytes until the client leaves
    "chat_content_int", "chat_usage_str", "chat_finish_object",  # wrong JSON types
    "models_endless", "models_not_list",
    "hang",  # /v1/models answers; chat and /health accept and never answer
    "hang_health_ok",  # chat never answers; /health does (an engine stuck behind a live API server)
    "unauthorized",  # 401 with the server's message
    "echo_key",  # the answer quotes the Authorization header
)
CHUNK = b"x" * (1 << 20)


@dataclass
class Hostile:
    mode: str
    model: str = "test-model"
    sent_bytes: int = 0
    chat_requests: int = 0
    seen_auth: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def _endless(self, request: web.Request, declared: int | None = None) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if declared is not None:
            resp.content_length = declared
        else:
            resp.enable_chunked_encoding()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await resp.write(b'{"choices":[{"message":{"content":"')
            while True:  # until the client hangs up
                await resp.write(CHUNK)
                self.sent_bytes += len(CHUNK)
        return resp

    async def models(self, request: web.Request) -> web.StreamResponse:
        if self.mode == "models_endless":
            return await self._endless(request)
        if self.mode == "models_not_list":
            return web.json_response({"object": "list", "data": "test-model"})
        return web.json_response({"object": "list", "data": [{"id": self.model, "owned_by": "vllm",
                                                              "max_model_len": 32768}]})

    async def health(self, request: web.Request) -> web.Response:
        if self.mode == "hang":
            await asyncio.sleep(3600)
        return web.Response(text="")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.chat_requests += 1
        self.seen_auth.append(request.headers.get("Authorization", ""))
        await request.read()
        mode = self.mode
        if mode == "chat_endless":
            return await self._endless(request)
        if mode == "chat_huge_declared":
            return await self._endless(request, declared=2 << 30)
        if mode in ("hang", "hang_health_ok"):
            await asyncio.sleep(3600)
        if mode == "unauthorized":
            return web.json_response({"object": "error", "message": "Invalid API key: sk-wrong", "code": 401},
                                     status=401)
        content: object = "Some text read from the page."
        usage: object = {"prompt_tokens": 10, "completion_tokens": 7, "total_tokens": 17}
        finish: object = "stop"
        if mode == "chat_content_int":
            content = 12345
        elif mode == "chat_usage_str":
            usage = "lots"
        elif mode == "chat_finish_object":
            finish = {"reason": "stop"}
        elif mode == "echo_key":
            content = f"Debug: you sent {request.headers.get('Authorization', '')} to me."
        return web.json_response({
            "id": "x", "object": "chat.completion", "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
            "usage": usage,
        })


@contextlib.contextmanager
def hostile_endpoint(mode: str) -> Iterator[tuple[str, Hostile]]:
    """(base URL ending in /v1, the server's state) while the block runs."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {MODES}")
    server = Hostile(mode)
    started: queue.Queue = queue.Queue()
    stop_box: list = []

    async def main() -> None:
        runner = web.AppRunner(server.app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        stop = asyncio.Event()
        stop_box.append((asyncio.get_running_loop(), stop))
        started.put(port)
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(main()), name="hostile-endpoint", daemon=True)
    thread.start()
    port = started.get(timeout=30)
    try:
        yield f"http://127.0.0.1:{port}/v1", server
    finally:
        loop, stop = stop_box[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)

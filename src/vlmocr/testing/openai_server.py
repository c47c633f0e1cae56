"""A fake vLLM server: real HTTP on 127.0.0.1, OpenAI chat-completions, fault injection.

Why a real server rather than a mocked client: the code under test owns its HTTP client, its
connection pool, its timeouts and retries; only a real socket exercises them. The server behaves
like vLLM 0.x where the client can see it (routes, error shapes, usage, finish reasons, the
context-length check, /metrics gauges) and lets a test inject the failures seen in production:
429, 500, hangs, dropped connections, malformed JSON, generation loops, truncation, empty and
refused answers, and garbled ones (an answer of the right length that is not text: what a
model that cannot read a script gives back, with low token log-probabilities).

Token log-probabilities (``logprobs: true`` in the request) come back as vLLM gives them, one
entry per ~4 characters: ``GOOD_LOGPROB`` for a faithful answer, ``GARBLED_LOGPROB`` for a
garbled one.

What it answers depends on ``ServerConfig.answer``:

* ``pagecode`` (default): decode the page code drawn by ``pagecode.py`` in each received image and
  answer ``expected_text(code)`` ("NOCODE" when the image carries none), so a swapped, duplicated
  or dropped page shows up as a text mismatch.
* ``ocr``: run RapidOCR on each image (real text from real scans; ~2–4 s a page).
* ``static``: ``static_text`` without looking at the image (cheapest; throughput benchmarks).
* ``script``: ``script[code]`` (a dict, or a picklable callable ``code -> text``); pages missing
  from a dict fall back to the ``pagecode`` answer.

Several images in one request are answered in order, separated by a blank line.

Start it in a background process (``serve_in_process``), in a thread of the current process
(``serve_in_thread``, for callables that cannot be pickled), or from the command line:

    python -m vlmocr.testing.openai_server --port 0 --slots 8 --latency 0.5

which prints the base URL (``http://127.0.0.1:PORT/v1``) as its first stdout line.

Admin routes (never behind the API key): ``GET /_stats``, ``GET|POST /_config``, ``POST /_reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2 as httpx
from aiohttp import web

from ..runfolder.record import JsonObject
from .fake_config import ANSWER_MODES, FAULT_KINDS, NOCODE, REFUSAL_TEXT, SERVER_KINDS, FaultRule, ServerConfig
from .fake_vllm import FakeVLLM, LogEntry
from .pagecode import expected_text

__all__ = [
    "FAULT_KINDS",
    "NOCODE",
    "REFUSAL_TEXT",
    "FakeVLLM",
    "FaultRule",
    "ServerConfig",
    "ServerHandle",
    "expected_text",
    "main",
    "run_server",
    "serve_in_process",
    "serve_in_thread",
]


# --------------------------------------------------------------------------------------------
# Running it
# --------------------------------------------------------------------------------------------


async def run_server(
    config: ServerConfig,
    on_ready: Callable[[int], None] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``config`` until ``stop`` is set (forever without one).

    ``on_ready(port)`` is called once the socket is bound.
    """
    server = FakeVLLM(config)
    # handler_cancellation: a request whose client disconnected is aborted (as vLLM does), so a
    # client timeout does not leave a hung or queued request holding a slot.
    runner = web.AppRunner(
        server.app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0
    )
    await runner.setup()
    # A large backlog: benchmarks open hundreds of connections at once.
    site = web.TCPSite(runner, config.host, config.port, backlog=1024)
    await site.start()
    port = int(runner.addresses[0][1])
    if on_ready is not None:
        on_ready(port)
    try:
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()


@dataclass
class ServerHandle:
    """The parent's view of a running fake server: its URL and admin calls."""

    base_url: str  # http://127.0.0.1:PORT
    _client: httpx.Client | None = field(default=None, repr=False, compare=False)

    @property
    def url(self) -> str:
        """The OpenAI base URL, with /v1."""
        return f"{self.base_url}/v1"

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def _call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        if self._client is None:
            # Reused: a new httpx client costs tens of milliseconds (it builds an SSL context).
            self._client = httpx.Client(timeout=30)
        response = self._client.request(method, self.base_url + path, json=body)
        response.raise_for_status()
        return response

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def stats(self) -> JsonObject:
        """Counts by outcome, running/waiting, max_running and the request log (``requests``)."""
        return self._call("GET", "/_stats").json()

    def requests(self) -> list[LogEntry]:
        """The request log, oldest first."""
        return cast("list[LogEntry]", self.stats()["requests"])

    def configure(self, **changes: Any) -> JsonObject:
        """Change config fields at runtime, e.g. ``faults={...}``; returns the new config."""
        return self._call("POST", "/_config", jsonable(changes)).json()

    def config(self) -> JsonObject:
        return self._call("GET", "/_config").json()

    def reset(self) -> None:
        """Forget counts, the request log and per-page fault budgets; keep the config."""
        self._call("POST", "/_reset")

    def metrics(self) -> str:
        return self._call("GET", "/metrics").text


def jsonable(value: Any) -> Any:
    if isinstance(value, FaultRule):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if callable(value):
        raise TypeError("a callable cannot be sent to a running server; pass it in ServerConfig")
    return value


def _child_main(config: ServerConfig, conn: Any) -> None:
    """Entry point of the server process started by ``serve_in_process``."""

    def exit_with_parent() -> None:
        # recv() returns or fails only when the parent closes its end or dies: then stop, so a
        # crashed test run leaves no orphan server behind.
        with contextlib.suppress(EOFError, OSError):
            conn.recv()
        os._exit(0)

    def ready(port: int) -> None:
        conn.send(port)
        threading.Thread(target=exit_with_parent, daemon=True).start()

    asyncio.run(run_server(config, on_ready=ready))


@contextlib.contextmanager
def serve_in_process(
    config: ServerConfig | None = None, *, startup_timeout: float = 60.0
) -> Iterator[ServerHandle]:
    """Run a fake server in a spawned process for the duration of the ``with`` block.

    A separate process keeps the server's CPU work (image decoding, OCR) and its event loop out of
    the code under test, as with a real server. ``config.script``, if a callable, must be
    picklable (a module-level function). Scripts using this need the usual
    ``if __name__ == "__main__":`` guard of multiprocessing's spawn method.
    """
    config = config or ServerConfig()
    ctx = multiprocessing.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe(duplex=True)
    process = ctx.Process(
        target=_child_main, args=(config, child_conn), name="fake-vllm", daemon=True
    )
    process.start()
    child_conn.close()  # only the child holds it now, so the parent sees EOF if the child dies

    def stop() -> None:
        parent_conn.close()  # the child's watcher thread exits on this alone
        process.terminate()
        process.join(5)
        if process.is_alive():
            process.kill()
            process.join(5)

    try:
        if not parent_conn.poll(startup_timeout):
            raise RuntimeError(f"fake vLLM server did not start within {startup_timeout} s")
        port = parent_conn.recv()
    except EOFError as exc:
        stop()
        raise RuntimeError(f"fake vLLM server exited at startup (code {process.exitcode})") from exc
    except BaseException:
        stop()
        raise
    handle = ServerHandle(f"http://{config.host}:{port}")
    try:
        yield handle
    finally:
        handle.close()
        stop()


@contextlib.contextmanager
def serve_in_thread(
    config: ServerConfig | None = None, *, startup_timeout: float = 30.0
) -> Iterator[ServerHandle]:
    """Run a fake server on its own event loop in a thread of this process.

    For configs a spawned process cannot receive (a lambda as ``script``). The server shares the
    GIL with the code under test, so do not use it for timing.
    """
    config = config or ServerConfig()
    started: queue.Queue[tuple[asyncio.AbstractEventLoop, asyncio.Event, int] | BaseException] = (
        queue.Queue()
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        await run_server(config, on_ready=lambda port: started.put((loop, stop, port)), stop=stop)

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # report startup failures to the waiting parent
            started.put(exc)

    thread = threading.Thread(target=target, name="fake-vllm", daemon=True)
    thread.start()
    try:
        item = started.get(timeout=startup_timeout)
    except queue.Empty:
        raise RuntimeError(f"fake vLLM server did not start within {startup_timeout} s") from None
    if isinstance(item, BaseException):
        raise RuntimeError("fake vLLM server failed to start") from item
    loop, stop, port = item
    handle = ServerHandle(f"http://{config.host}:{port}")
    try:
        yield handle
    finally:
        handle.close()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _parse_args(argv: list[str] | None) -> ServerConfig:
    parser = argparse.ArgumentParser(
        description="Fake vLLM (OpenAI chat-completions) server for tests and benchmarks. "
        "Prints its base URL as the first stdout line."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = any free port")
    parser.add_argument("--model", action="append", help="served model name (repeatable)")
    parser.add_argument("--max-model-len", type=int, default=32768)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--per-token-latency", type=float, default=0.0)
    parser.add_argument("--answer", choices=ANSWER_MODES, default="pagecode")
    parser.add_argument("--static-text", default=ServerConfig.static_text)
    parser.add_argument("--script", help="JSON file: {page code: answer text}")
    parser.add_argument("--decode", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--api-key")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--faults",
        default="{}",
        help='JSON, e.g. \'{"429": {"rate": 0.05, "pages": [3], "times": 1}}\'',
    )
    parser.add_argument(
        "--fault", action="append", default=[], metavar="KIND=RATE", help="shortcut, repeatable"
    )
    parser.add_argument("--retry-after", type=float, default=1)
    parser.add_argument("--hang-seconds", type=float, default=30.0)
    parser.add_argument("--default-max-tokens", type=int, default=1024)
    parser.add_argument("--server-kind", choices=SERVER_KINDS, default="vllm",
                        help="answer GET /version as vLLM or GET /get_server_info as SGLang")
    parser.add_argument("--server-version", default=ServerConfig.server_version)
    parser.add_argument("--model-root", help="/v1/models' root: the model path served (default: the first name)")
    args = parser.parse_args(argv)

    faults = json.loads(args.faults)  # checked by ServerConfig below
    for item in args.fault:
        kind, sep, rate = item.partition("=")
        if not sep:
            parser.error(f"--fault expects KIND=RATE, got {item!r}")
        faults[kind] = float(rate)
    script = None
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            script = json.load(handle)
    try:
        return ServerConfig(
            models=args.model or "test-model",
            max_model_len=args.max_model_len,
            slots=args.slots,
            latency=args.latency,
            per_token_latency=args.per_token_latency,
            answer=args.answer,
            static_text=args.static_text,
            script=script,
            decode={"auto": None, "yes": True, "no": False}[args.decode],
            api_key=args.api_key,
            seed=args.seed,
            faults=faults,
            retry_after=args.retry_after,
            hang_seconds=args.hang_seconds,
            default_max_tokens=args.default_max_tokens,
            server_kind=args.server_kind,
            server_version=args.server_version,
            model_root=args.model_root,
            host=args.host,
            port=args.port,
        )
    except ValueError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> None:
    config = _parse_args(argv)

    def ready(port: int) -> None:
        print(f"http://{config.host}:{port}/v1", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_server(config, on_ready=ready))


if __name__ == "__main__":
    main()

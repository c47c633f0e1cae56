"""The OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs).

One aiohttp connection pool, a per-request timeout, and retries with exponential backoff and full
jitter for what is transient (429 honouring Retry-After, 5xx, connect/read timeouts, dropped
connections, malformed JSON). A 400 is final for the request: it carries the server's message
(e.g. the prompt is over the context), which the caller may answer with a smaller image."""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from ..exceptions import EndpointUnavailable

API_KEY_ENV = ("VLMOCR_API_KEY", "OPENAI_API_KEY")


def api_key_from_env() -> str | None:
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return None


@dataclass
class ChatResult:
    text: str
    finish_reason: str | None
    tokens_in: int | None
    tokens_out: int | None
    requests: int  # HTTP requests it took (1 + retries)
    seconds: float


class RequestFailed(Exception):
    """A request that failed for good. `overflow` marks a prompt over the context length."""

    def __init__(self, message: str, *, status: int | None = None, overflow: bool = False, requests: int = 1,
                 kind: str = "http") -> None:
        super().__init__(message)
        self.status = status
        self.overflow = overflow
        self.requests = requests
        self.kind = kind  # the last outcome: "connect" means nobody answered at all


_OVERFLOW = re.compile(r"maximum context length|context length|too long|reduce the length|exceeds", re.I)


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    in_flight: int = 0

    def count(self, outcome: str) -> None:
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + 1


class OpenAIClient:
    def __init__(
        self,
        endpoint: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        max_retries: int = 6,
        backoff: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        self.base = endpoint.rstrip("/")
        if not self.base.endswith("/v1"):
            # Accept http://host:8000 as well as http://host:8000/v1.
            self.base = self.base + "/v1"
        headers = {"Content-Type": "application/json"}
        key = api_key or api_key_from_env()
        if key:
            headers["Authorization"] = f"Bearer {key}"  # never logged: only in this header
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.backoff_cap = backoff_cap
        self.stats = ClientStats()
        # aiohttp: its pool hands out a connection in O(1) and parses in C. httpx/httpcore (and
        # the httpx2 fork) rescan every pooled connection with syscalls on each request
        # (encode/httpcore#1035): 1.9-2.5 ms of client CPU per request at 256 in flight against
        # aiohttp's 0.4, which at C = 256 made the client, not the server, set the pace
        # (BENCHMARKS.md, saturation). Created lazily: a session belongs to a running loop.
        self._headers = headers
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                # No cap of its own: the caller's request limit is the cap, and it moves (adaptive
                # concurrency). A fixed cap below it queued requests here, out of the server's
                # sight, and the controller read the empty server queue as room to grow.
                connector=aiohttp.TCPConnector(limit=0, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(30.0, self.timeout)),
            )
        return self._session

    @property
    def root(self) -> str:
        return self.base[: -len("/v1")]

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------------ preflight

    async def models(self) -> list[dict[str, Any]]:
        """GET /v1/models, retried briefly (a server may still be starting)."""
        last = ""
        for attempt in range(4):
            try:
                async with self.session.get(f"{self.base}/models", timeout=aiohttp.ClientTimeout(total=15.0)) as r:
                    status, content = r.status, await r.read()
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if status == 200:
                    try:
                        return list(orjson.loads(content).get("data") or [])
                    except (orjson.JSONDecodeError, AttributeError):
                        last = "the answer to /v1/models is not JSON"
                else:
                    last = f"HTTP {status}: {content[:300].decode('utf-8', 'replace')}"
                    if status in (401, 403, 404):
                        break
            await asyncio.sleep(0.5 * (attempt + 1))
        raise EndpointUnavailable(f"endpoint {self.base} is unavailable ({last})")

    async def metrics(self) -> str | None:
        """The Prometheus text at /metrics (vLLM, SGLang), or None when there is none."""
        try:
            async with self.session.get(f"{self.root}/metrics", timeout=aiohttp.ClientTimeout(total=5.0)) as r:
                return (await r.text(errors="replace")) if r.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError):
            return None

    # ------------------------------------------------------------------ requests

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), 120.0)
            except ValueError:
                pass
        # Full jitter: spreads a burst of clients that all saw the same 429.
        return random.uniform(0, min(self.backoff_cap, self.backoff * 2**attempt))

    async def chat(self, body: dict[str, Any]) -> ChatResult:
        payload = orjson.dumps(body)
        t0 = time.monotonic()
        last = ""
        for attempt in range(self.max_retries + 1):
            self.stats.requests += 1
            if attempt:
                self.stats.retries += 1
            self.stats.in_flight += 1
            retry_after = None
            try:
                async with self.session.post(f"{self.base}/chat/completions", data=payload) as r:
                    status, content, retry_after = r.status, await r.read(), r.headers.get("retry-after")
            except asyncio.TimeoutError as exc:
                outcome, last = "timeout", f"request timed out ({type(exc).__name__})"
            except aiohttp.ClientConnectorError as exc:
                outcome, last = "connect", f"cannot connect ({exc})"
            except (aiohttp.ClientError, OSError) as exc:
                outcome, last = "dropped", f"connection dropped ({type(exc).__name__}: {exc})"
            else:
                if status == 200:
                    try:
                        data = orjson.loads(content)
                        choice = data["choices"][0]
                        text = choice["message"].get("content") or ""
                        usage = data.get("usage") or {}
                    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
                        outcome, last = "malformed", f"malformed answer: {content[:200]!r}"
                    else:
                        self.stats.count("ok")
                        self.stats.in_flight -= 1
                        tin, tout = usage.get("prompt_tokens"), usage.get("completion_tokens")
                        self.stats.tokens_in += tin or 0
                        self.stats.tokens_out += tout or 0
                        return ChatResult(text, choice.get("finish_reason"), tin, tout, attempt + 1,
                                          time.monotonic() - t0)
                elif status == 429:
                    outcome, last = "429", "rate limited (429)"
                elif status >= 500:
                    outcome, last = str(status), f"server error {status}: {content[:200].decode('utf-8', 'replace')}"
                else:
                    self.stats.count(str(status))
                    self.stats.in_flight -= 1
                    message = _error_message(content)
                    raise RequestFailed(
                        f"HTTP {status}: {message}", status=status,
                        overflow=status == 400 and bool(_OVERFLOW.search(message)), requests=attempt + 1,
                    )
            self.stats.count(outcome)
            self.stats.in_flight -= 1
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise RequestFailed(f"{last} (after {self.max_retries + 1} tries)", requests=self.max_retries + 1,
                            kind=outcome)


def _error_message(content: bytes) -> str:
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content[:500].decode("utf-8", "replace")
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err)[:500]
        return str(data.get("message") or err)[:500]
    return str(data)[:500]


def parse_metrics(text: str) -> dict[str, float]:
    """Sum Prometheus samples by metric name (labels dropped): enough for the queue gauges."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEinfNa]+)", line)
        if m:
            try:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
            except ValueError:
                pass
    return out


def queue_depth(metrics: dict[str, float]) -> tuple[float, float] | None:
    """(running, waiting) from vLLM's or SGLang's gauges, None when neither is exported."""
    for running, waiting in (
        ("vllm:num_requests_running", "vllm:num_requests_waiting"),
        ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
    ):
        if running in metrics or waiting in metrics:
            return metrics.get(running, 0.0), metrics.get(waiting, 0.0)
    return None

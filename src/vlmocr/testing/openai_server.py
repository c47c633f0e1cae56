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
import base64
import binascii
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import io
import json
import math
import multiprocessing
import os
import queue
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2 as httpx
import orjson
from aiohttp import web
from PIL import Image

from .pagecode import expected_text, read_code

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

AnswerMode = Literal["pagecode", "ocr", "static", "script"]
ANSWER_MODES: tuple[str, ...] = ("pagecode", "ocr", "static", "script")

# Faults that replace the HTTP exchange, then faults that shape the generated text. At most one
# fault fires per request: the first in this order whose rule matches.
HTTP_FAULTS: tuple[str, ...] = ("drop", "timeout", "429", "500", "malformed")
CONTENT_FAULTS: tuple[str, ...] = ("loop", "truncate", "repetition", "empty", "refuse", "garble")
FAULT_KINDS: tuple[str, ...] = HTTP_FAULTS + CONTENT_FAULTS

NOCODE = "NOCODE"
GOOD_LOGPROB = -0.02
GARBLED_LOGPROB = -2.5
REFUSAL_TEXT = "I'm sorry, but I can't help with that."
DEFAULT_LOOP_LINE = "1. . . . . . . . . . . . . . ."
# How many times the "repetition" fault repeats its line before vLLM's detector would stop it.
_REPETITION_REPEATS = 8
# vLLM counts one token per 28x28 patch for Qwen-VL-style models; close enough for a size check.
_PATCH = 28
_CHARS_PER_TOKEN = 4
# Request keys that have their own column in the request log; every other key lands in "extra".
_LOGGED_KEYS = frozenset(
    {"model", "messages", "max_tokens", "max_completion_tokens", "temperature"}
)
_PROMPT_LOG_CHARS = 2000


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FaultRule:
    """When one fault kind fires.

    A request matches when its page code is in ``pages`` or a seeded draw falls under ``rate``,
    and its temperature is below ``temperature_below`` (if set; absent temperature counts as 1.0,
    the OpenAI default). ``times`` caps how often the fault fires *per page code* across requests
    ("page 5 loops on its first 2 attempts, then succeeds"); None = without limit. ``line`` is
    the repeated line of ``loop`` and ``repetition`` (e.g. a table row).
    """

    rate: float = 0.0
    pages: frozenset[int] = frozenset()
    times: int | None = None
    temperature_below: float | None = None
    line: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be within 0..1, got {self.rate}")
        if self.times is not None and self.times < 0:
            raise ValueError(f"fault times must be >= 0, got {self.times}")
        # Accept any iterable of ints (lists arrive from JSON) but store a hashable set.
        object.__setattr__(self, "pages", frozenset(int(p) for p in self.pages))

    @classmethod
    def coerce(cls, value: FaultRule | Mapping[str, Any] | float) -> FaultRule:
        """A rule from a rule, a JSON object, or a bare rate."""
        if isinstance(value, FaultRule):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(rate=float(value))
        if isinstance(value, Mapping):
            unknown = set(value) - {f.name for f in dataclasses.fields(cls)}
            if unknown:
                raise ValueError(f"unknown fault rule keys: {sorted(unknown)}")
            return cls(**value)
        raise ValueError(f"a fault rule is a rate or an object, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "pages": sorted(self.pages),
            "times": self.times,
            "temperature_below": self.temperature_below,
            "line": self.line,
        }


ScriptAnswer = Mapping[int, str] | Callable[[int | None], str]


@dataclass
class ServerConfig:
    """Everything the fake server does; every field can be changed at runtime via ``/_config``."""

    models: str | list[str] = "test-model"
    max_model_len: int = 32768
    slots: int = 8
    latency: float = 0.0  # seconds a request holds its slot
    per_token_latency: float = 0.0  # extra seconds per completion token, also holding the slot
    answer: AnswerMode = "pagecode"
    static_text: str = "Static answer from the test server."
    # How the answers for several images in one request are joined (a multi-page model emits
    # its separator, e.g. "<PAGE>"); a test can also make it wrong on purpose.
    page_separator: str = "\n\n"
    script: ScriptAnswer | None = None
    # Decode page codes from images? None = yes unless answer is "static" and no fault names pages.
    decode: bool | None = None
    api_key: str | None = None
    seed: int = 0
    faults: dict[str, FaultRule] = field(default_factory=dict)
    retry_after: float = 1  # value of the Retry-After header on 429
    hang_seconds: float = 30.0  # how long a "timeout" fault waits before answering
    default_max_tokens: int = 1024
    max_log: int = 10000
    server_version: str = "0.0.0+fake"
    host: str = "127.0.0.1"
    port: int = 0

    def __post_init__(self) -> None:
        if self.answer not in ANSWER_MODES:
            raise ValueError(f"answer must be one of {ANSWER_MODES}, got {self.answer!r}")
        if self.slots < 1:
            raise ValueError("slots must be >= 1")
        if isinstance(self.models, (list, tuple)):
            if not self.models:
                raise ValueError("models must name at least one model")
            self.models = [str(m) for m in self.models]
        unknown = set(self.faults) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        self.faults = {kind: FaultRule.coerce(rule) for kind, rule in self.faults.items()}
        if isinstance(self.script, Mapping):
            # JSON object keys are strings; page codes are ints.
            self.script = {int(code): str(text) for code, text in self.script.items()}
        elif self.script is not None and not callable(self.script):
            raise ValueError("script must be a {page code: text} mapping or a callable")

    @property
    def model_names(self) -> list[str]:
        return [self.models] if isinstance(self.models, str) else list(self.models)

    @property
    def decodes_pages(self) -> bool:
        if self.decode is not None:
            return self.decode
        return self.answer != "static" or any(rule.pages for rule in self.faults.values())

    def replace(self, **changes: Any) -> ServerConfig:
        """A validated copy with ``changes`` applied; unknown names are an error, not ignored."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise ValueError(f"unknown config fields: {sorted(unknown)}")
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["faults"] = {kind: rule.to_json() for kind, rule in self.faults.items()}
        if isinstance(self.script, Mapping):
            data["script"] = {str(code): text for code, text in self.script.items()}
        elif self.script is not None:
            data["script"] = (
                f"<callable {getattr(self.script, '__name__', type(self.script).__name__)}>"
            )
        return data


# --------------------------------------------------------------------------------------------
# Request parsing
# --------------------------------------------------------------------------------------------


class BadRequest(Exception):
    """A request vLLM would reject with 400."""


@dataclass
class ReceivedImage:
    width: int
    height: int
    code: int | None
    data: bytes  # kept for the "ocr" answer


@dataclass
class ParsedPrompt:
    text: str
    parts: list[str]  # "role:type" in order, so tests can assert image-before-text layouts
    images: list[ReceivedImage]

    @property
    def tokens(self) -> int:
        image_tokens = sum(
            math.ceil(im.width / _PATCH) * math.ceil(im.height / _PATCH) for im in self.images
        )
        return image_tokens + len(self.text) // _CHARS_PER_TOKEN

    @property
    def page(self) -> int | None:
        """The request's page code: the first image that carries one."""
        return next((im.code for im in self.images if im.code is not None), None)


def _decode_image(url: str, decode_code: bool) -> ReceivedImage:
    if not url.startswith("data:"):
        # The real server would fetch it; this one has no network and tests must not need one.
        raise BadRequest("The test server only accepts data: image URLs.")
    header, sep, payload = url.partition(",")
    if not sep or ";base64" not in header:
        raise BadRequest("Invalid image data URL: expected data:<mime>;base64,<data>.")
    try:
        data = base64.b64decode(payload, validate=False)
        img = Image.open(io.BytesIO(data))
        width, height = img.size
        code = read_code(img) if decode_code else None
    except (binascii.Error, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise BadRequest(f"Failed to load the image: {exc}") from exc
    return ReceivedImage(width=width, height=height, code=code, data=data)


def parse_messages(messages: Any, decode_code: bool) -> ParsedPrompt:
    """Texts, part layout and images of an OpenAI ``messages`` list.

    Content may be a string or a list of text / image_url parts in any order.
    """
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list.")
    texts: list[str] = []
    parts: list[str] = []
    images: list[ReceivedImage] = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise BadRequest("Each message must be an object with a 'role'.")
        role = message["role"]
        content = message.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            texts.append(content)
            parts.append(f"{role}:text")
            continue
        if not isinstance(content, list):
            raise BadRequest("Message content must be a string or a list of parts.")
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                image_url = part.get("image_url")
                url = image_url.get("url") if isinstance(image_url, dict) else image_url
                if not isinstance(url, str):
                    raise BadRequest("image_url part without a url.")
                images.append(_decode_image(url, decode_code))
            else:
                raise BadRequest(f"Unsupported content part type: {kind!r}.")
            parts.append(f"{role}:{kind}")
    return ParsedPrompt(text="\n".join(texts), parts=parts, images=images)


def _completion_tokens(text: str) -> int:
    return max(1, len(text) // _CHARS_PER_TOKEN) if text else 0


# --------------------------------------------------------------------------------------------
# Capacity
# --------------------------------------------------------------------------------------------


class SlotGate:
    """``slots`` concurrent requests, FIFO waiting, resizable at runtime.

    Not an asyncio.Semaphore because /metrics needs the waiting count, /_config may change the
    capacity while requests wait, and release must be synchronous so a cancelled request can never
    leak a slot.
    """

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.running = 0
        self.max_running = 0
        self.present = 0  # requests inside: running or waiting for a slot
        self.max_present = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return sum(1 for fut in self._waiters if not fut.done())

    def _take(self) -> None:
        self.running += 1
        self.max_running = max(self.max_running, self.running)

    def _wake(self) -> None:
        while self._waiters and self.running < self.slots:
            fut = self._waiters.popleft()
            if not fut.done():
                self._take()  # handed over to the waiter, so no newcomer can overtake it
                fut.set_result(None)

    def resize(self, slots: int) -> None:
        self.slots = slots
        self._wake()

    def release(self) -> None:
        self.running -= 1
        self._wake()

    async def acquire(self) -> None:
        if self.running < self.slots and not self._waiters:
            self._take()
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot arrived together with the cancellation: give it back
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(fut)
            raise

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self.present += 1
        self.max_present = max(self.max_present, self.present)
        try:
            await self.acquire()
            try:
                yield
            finally:
                self.release()
        finally:
            self.present -= 1


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def _error(status: int, message: str, error_type: str) -> web.Response:
    """vLLM's ErrorResponse shape."""
    return web.json_response(
        {"object": "error", "message": message, "type": error_type, "param": None, "code": status},
        status=status,
    )


def _unit_roll(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by its inputs.

    Hashing (seed, fault, page, attempt) instead of drawing from one shared RNG keeps a run
    reproducible whatever order concurrent requests arrive in.
    """
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class FakeVLLM:
    """State and routes of one fake server. Single event loop; no locks needed."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.gate = SlotGate(config.slots)
        self._ocr_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="fake-ocr")
        self._ocr_engine: Any = None
        self.reset()

    def reset(self) -> None:
        self.seq = 0
        self.counts: Counter[str] = Counter()
        self.log: deque[dict[str, Any]] = deque(maxlen=self.config.max_log)
        self.page_attempts: Counter[int | None] = Counter()
        self.fault_fired: Counter[tuple[str, int | None]] = Counter()
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.finished: Counter[str] = Counter()
        self.hanging = 0
        self.gate.max_running = self.gate.running
        self.gate.max_present = self.gate.present

    def app(self) -> web.Application:
        # Data URLs of big scans exceed aiohttp's 1 MiB default body limit.
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/_stats", self.get_stats)
        app.router.add_get("/_config", self.get_config)
        app.router.add_post("/_config", self.post_config)
        app.router.add_post("/_reset", self.post_reset)
        return app

    # ---- plain routes ---------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.config.server_version})

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        key = self.config.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}":
            return None
        return web.json_response({"error": "Unauthorized"}, status=401)

    async def list_models(self, request: web.Request) -> web.Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        cfg = self.config
        root = cfg.model_names[0]
        data = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": root,
                "parent": None,
                "max_model_len": cfg.max_model_len,
            }
            for name in cfg.model_names
        ]
        return web.json_response({"object": "list", "data": data})

    async def metrics(self, request: web.Request) -> web.Response:
        # vLLM labels its metrics with the first served model name.
        label = f'model_name="{self.config.model_names[0]}"'
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{label}}} {float(self.gate.running)}",
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{label}}} {float(self.gate.waiting)}",
            "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
            "# TYPE vllm:prompt_tokens_total counter",
            f"vllm:prompt_tokens_total{{{label}}} {float(self.prompt_tokens_total)}",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens_total counter",
            f"vllm:generation_tokens_total{{{label}}} {float(self.generation_tokens_total)}",
            "# HELP vllm:request_success_total Count of successfully processed requests.",
            "# TYPE vllm:request_success_total counter",
        ]
        for reason in sorted({"stop", "length", *self.finished}):
            lines.append(
                f'vllm:request_success_total{{finished_reason="{reason}",{label}}} '
                f"{float(self.finished[reason])}"
            )
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    # ---- admin ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "total": self.seq,
            "counts": dict(self.counts),
            "running": self.gate.running,
            "waiting": self.gate.waiting,
            "hanging": self.hanging,
            "max_running": self.gate.max_running,
            "max_present": self.gate.max_present,  # most requests inside at once (running + waiting)
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "page_attempts": {str(p): n for p, n in self.page_attempts.items()},
            "faults_fired": {f"{kind}:{page}": n for (kind, page), n in self.fault_fired.items()},
            "requests": list(self.log),
        }

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def get_config(self, request: web.Request) -> web.Response:
        return web.json_response(self.config.to_json())

    async def post_config(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("the body must be a JSON object of config fields")
            self.apply_config(**changes)
        except (ValueError, TypeError) as exc:
            return _error(400, f"bad config: {exc}", "BadRequestError")
        return web.json_response(self.config.to_json())

    def apply_config(self, **changes: Any) -> None:
        self.config = self.config.replace(**changes)
        if "faults" in changes:
            # New rules start their per-page "times" budgets afresh.
            self.fault_fired.clear()
        if "slots" in changes:
            self.gate.resize(self.config.slots)
        if "max_log" in changes:
            self.log = deque(self.log, maxlen=self.config.max_log)

    async def post_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    # ---- chat completions -----------------------------------------------------------------

    def _pick_fault(
        self, cfg: ServerConfig, page: int | None, temperature: float, seq: int
    ) -> tuple[str, FaultRule] | None:
        attempt = self.page_attempts[page]
        self.page_attempts[page] += 1
        # Without a page code, each request is its own draw.
        draw_key = f"page{page}:{attempt}" if page is not None else f"seq{seq}"
        for kind in FAULT_KINDS:
            rule = cfg.faults.get(kind)
            if rule is None:
                continue
            if rule.temperature_below is not None and temperature >= rule.temperature_below:
                continue
            if rule.times is not None and self.fault_fired[(kind, page)] >= rule.times:
                continue
            hit = (page is not None and page in rule.pages) or (
                rule.rate > 0 and _unit_roll(cfg.seed, kind, draw_key) < rule.rate
            )
            if hit:
                self.fault_fired[(kind, page)] += 1
                return kind, rule
        return None

    def _ocr(self, data: bytes) -> str:
        if self._ocr_engine is None:
            from rapidocr import RapidOCR  # heavy import: only when a test asks for OCR

            self._ocr_engine = RapidOCR()
        result = self._ocr_engine(Image.open(io.BytesIO(data)).convert("RGB"))
        return "\n".join(result.txts or ())

    async def _answer(self, cfg: ServerConfig, prompt: ParsedPrompt) -> str:
        if cfg.answer == "static":
            return cfg.static_text
        if not prompt.images:
            return NOCODE
        answers: list[str] = []
        for image in prompt.images:
            if cfg.answer == "ocr":
                loop = asyncio.get_running_loop()
                # One OCR thread: the engine is not known to be thread-safe, and CPUs are few.
                answers.append(await loop.run_in_executor(self._ocr_pool, self._ocr, image.data))
                continue
            code = image.code
            if cfg.answer == "script" and cfg.script is not None:
                if callable(cfg.script):
                    answers.append(cfg.script(code))
                    continue
                if code is not None and code in cfg.script:
                    answers.append(cfg.script[code])
                    continue
            answers.append(expected_text(code) if code is not None else NOCODE)
        return cfg.page_separator.join(answers)

    @staticmethod
    def _shape(
        text: str, fault: tuple[str, FaultRule] | None, max_tokens: int
    ) -> tuple[str, str, int]:
        """(content, finish_reason, completion_tokens) for the generated ``text``."""
        limit = max_tokens * _CHARS_PER_TOKEN
        kind = fault[0] if fault else None
        line = (fault[1].line if fault else None) or DEFAULT_LOOP_LINE
        # "length" always reports max_tokens as used, as vLLM does when it stops on the budget.
        if kind == "loop":
            out = text + "\n"
            repeats = max(1, (limit - len(out)) // (len(line) + 1) + 1)
            return (out + (line + "\n") * repeats)[:limit], "length", max_tokens
        if kind == "truncate":
            return text[: len(text) // 2], "length", max_tokens
        if kind == "repetition":
            out = (text + "\n" + (line + "\n") * _REPETITION_REPEATS)[:limit]
            return out, "repetition", _completion_tokens(out)
        if kind == "empty":
            return "", "stop", 0
        if kind == "refuse":
            return REFUSAL_TEXT, "stop", _completion_tokens(REFUSAL_TEXT)
        if kind == "garble":
            out = garble(text)[:limit]
            return out, "stop", _completion_tokens(out)
        if _completion_tokens(text) > max_tokens:
            return text[:limit], "length", max_tokens
        return text, "stop", _completion_tokens(text)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        # A snapshot: a /_config change mid-request must not mix two configurations.
        cfg = self.config
        if (denied := self._unauthorized(request)) is not None:
            self.counts["unauthorized"] += 1
            return denied
        try:
            body = orjson.loads(await request.read())  # orjson: this stand-in's CPU is not the client's
        except (json.JSONDecodeError, UnicodeDecodeError):
            self.counts["bad_request"] += 1
            return _error(400, "The request body is not valid JSON.", "BadRequestError")
        if not isinstance(body, dict):
            self.counts["bad_request"] += 1
            return _error(400, "The request body must be a JSON object.", "BadRequestError")

        model = body.get("model") or cfg.model_names[0]
        if model not in cfg.model_names:
            self.counts["not_found"] += 1
            return _error(404, f"The model `{model}` does not exist.", "NotFoundError")

        started = time.monotonic()
        self.seq += 1
        entry: dict[str, Any] = {
            "seq": self.seq,
            "received_at": time.time(),
            "model": model,
            "page": None,
            "pages": [],
            "max_tokens": None,
            "temperature": body.get("temperature"),
            "n_images": 0,
            "image_sizes": [],
            "parts": [],
            "prompt": "",
            "prompt_tokens": None,
            "extra": {k: v for k, v in body.items() if k not in _LOGGED_KEYS},
            "fault": None,
            "outcome": "pending",
            "status": None,
            "finish_reason": None,
            "completion_tokens": None,
            "seconds": None,
        }
        self.log.append(entry)
        try:
            return await self._complete(request, cfg, body, model, entry)
        except asyncio.CancelledError:
            # The client went away (its timeout, or a drop we caused); vLLM aborts such requests.
            if entry["outcome"] == "pending":
                entry["outcome"] = "cancelled"
            raise
        finally:
            entry["seconds"] = round(time.monotonic() - started, 4)
            self.counts[entry["outcome"]] += 1

    async def _complete(
        self,
        request: web.Request,
        cfg: ServerConfig,
        body: dict[str, Any],
        model: str,
        entry: dict[str, Any],
    ) -> web.StreamResponse:
        def reject(message: str) -> web.Response:
            entry["outcome"], entry["status"] = "bad_request", 400
            return _error(400, message, "BadRequestError")

        if body.get("stream"):
            return reject("The test server does not implement streaming.")
        raw_max = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = cfg.default_max_tokens if raw_max is None else raw_max
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            return reject(f"max_tokens must be a positive integer, got {raw_max!r}.")
        raw_temperature = body.get("temperature")
        if raw_temperature is not None and not isinstance(raw_temperature, (int, float)):
            return reject(f"temperature must be a number, got {raw_temperature!r}.")
        temperature = 1.0 if raw_temperature is None else float(raw_temperature)
        entry["max_tokens"] = max_tokens

        try:
            # Image decoding and code reading take milliseconds to tens of them: off the loop.
            prompt = await asyncio.to_thread(
                parse_messages, body.get("messages"), cfg.decodes_pages
            )
        except BadRequest as exc:
            return reject(str(exc))
        entry.update(
            page=prompt.page,
            pages=[im.code for im in prompt.images],
            n_images=len(prompt.images),
            image_sizes=[[im.width, im.height] for im in prompt.images],
            parts=prompt.parts,
            prompt=prompt.text[:_PROMPT_LOG_CHARS],
            prompt_tokens=prompt.tokens,
        )

        if prompt.tokens + max_tokens > cfg.max_model_len:
            return reject(
                f"This model's maximum context length is {cfg.max_model_len} tokens. However, you "
                f"requested {prompt.tokens + max_tokens} tokens ({prompt.tokens} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                "completion."
            )

        fault = self._pick_fault(cfg, prompt.page, temperature, entry["seq"])
        kind = fault[0] if fault else None
        entry["fault"] = kind
        if kind is not None:
            entry["outcome"] = kind

        if kind == "drop":
            # Close the socket with nothing written: the client sees a disconnect, not a status.
            # Raising CancelledError stops aiohttp from trying to write a response afterwards.
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        if kind == "429":
            entry["status"] = 429
            response = _error(429, "Too many requests (injected).", "RateLimitError")
            response.headers["Retry-After"] = _header_number(cfg.retry_after)
            return response
        if kind == "500":
            entry["status"] = 500
            return _error(500, "Internal server error (injected).", "InternalServerError")
        if kind == "timeout":
            self.hanging += 1
            try:
                await asyncio.sleep(cfg.hang_seconds)
            finally:
                self.hanging -= 1

        async with self.gate.slot():
            text = await self._answer(cfg, prompt)
            content, finish_reason, completion_tokens = self._shape(text, fault, max_tokens)
            hold = cfg.latency + cfg.per_token_latency * completion_tokens
            if hold > 0:
                await asyncio.sleep(hold)

        self.prompt_tokens_total += prompt.tokens
        self.generation_tokens_total += completion_tokens
        self.finished[finish_reason] += 1
        entry.update(finish_reason=finish_reason, completion_tokens=completion_tokens, status=200)
        if entry["outcome"] == "pending":
            entry["outcome"] = "ok" if finish_reason == "stop" else finish_reason

        if kind == "malformed":
            # Cut mid-object, as a proxy or a crashing worker would.
            broken = json.dumps({"id": "chatcmpl-broken", "object": "chat.completion"})[:-1]
            return web.Response(
                status=200,
                body=(broken + ', "choices": [{"index": 0, "message": {"content": "PAGE').encode(),
                content_type="application/json",
            )
        return web.json_response(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "tool_calls": []},
                        "logprobs": _logprobs(content, kind) if body.get("logprobs") else None,
                        "finish_reason": finish_reason,
                        "stop_reason": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt.tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt.tokens + completion_tokens,
                },
            }
        )


def garble(text: str) -> str:
    """`text` as a model that cannot read the page returns it: two of every three letters turned
    into punctuation, so no word survives and most lines are marks (deterministic)."""
    marks = ".,;:'~^"
    return "".join(marks[i % len(marks)] if c.isalpha() and i % 3 else c for i, c in enumerate(text))


def _logprobs(content: str, fault: str | None) -> dict[str, Any]:
    """vLLM's `choices[0].logprobs` for `content`: one token per ~4 characters."""
    value = GARBLED_LOGPROB if fault == "garble" else GOOD_LOGPROB
    tokens = [content[i:i + _CHARS_PER_TOKEN] for i in range(0, len(content), _CHARS_PER_TOKEN)]
    return {"content": [{"token": t, "logprob": value, "bytes": list(t.encode()), "top_logprobs": []}
                        for t in tokens]}


def _header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


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

    def stats(self) -> dict[str, Any]:
        """Counts by outcome, running/waiting, max_running and the request log (``requests``)."""
        return self._call("GET", "/_stats").json()

    def requests(self) -> list[dict[str, Any]]:
        """The request log, oldest first."""
        return self.stats()["requests"]

    def configure(self, **changes: Any) -> dict[str, Any]:
        """Change config fields at runtime, e.g. ``faults={...}``; returns the new config."""
        return self._call("POST", "/_config", _jsonable(changes)).json()

    def config(self) -> dict[str, Any]:
        return self._call("GET", "/_config").json()

    def reset(self) -> None:
        """Forget counts, the request log and per-page fault budgets; keep the config."""
        self._call("POST", "/_reset")

    def metrics(self) -> str:
        return self._call("GET", "/metrics").text


def _jsonable(value: Any) -> Any:
    if isinstance(value, FaultRule):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
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
    args = parser.parse_args(argv)

    faults: dict[str, Any] = json.loads(args.faults)
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

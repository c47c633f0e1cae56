"""The fake vLLM server's configuration (what it answers, which faults it injects and when), the
parsing of the requests it receives, and its capacity (slots with a FIFO queue)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import dataclasses
import io
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image

from ..runfolder.record import JsonObject
from .pagecode import read_code

AnswerMode = Literal["pagecode", "ocr", "static", "script"]
ANSWER_MODES: tuple[str, ...] = ("pagecode", "ocr", "static", "script", "olmocr")
SERVER_KINDS: tuple[str, ...] = ("vllm", "sglang")

# Faults that replace the HTTP exchange, then faults that shape the generated text. At most one
# fault fires per request: the first in this order whose rule matches.
HTTP_FAULTS: tuple[str, ...] = ("drop", "timeout", "429", "500", "malformed", "400")
CONTENT_FAULTS: tuple[str, ...] = ("loop", "truncate", "repetition", "empty", "refuse", "garble")
FAULT_KINDS: tuple[str, ...] = HTTP_FAULTS + CONTENT_FAULTS

NOCODE = "NOCODE"
GOOD_LOGPROB = -0.02
GARBLED_LOGPROB = -2.5
REFUSAL_TEXT = "I'm sorry, but I can't help with that."
DEFAULT_LOOP_LINE = "1. . . . . . . . . . . . . . ."
# How many times the "repetition" fault repeats its line before vLLM's detector would stop it.
REPETITION_REPEATS = 8
# vLLM counts one token per 28x28 patch for Qwen-VL-style models; close enough for a size check.
PATCH = 28
CHARS_PER_TOKEN = 4
# Request keys that have their own column in the request log; every other key lands in "extra".
LOGGED_KEYS = frozenset(
    {"model", "messages", "max_tokens", "max_completion_tokens", "temperature"}
)
PROMPT_LOG_CHARS = 2000


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

    def to_json(self) -> JsonObject:
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
    # Which server it answers as where the two differ: vLLM's GET /version or SGLang's
    # GET /get_server_info (each 404 on the other's), and /v1/models' owned_by.
    server_kind: str = "vllm"
    # /v1/models' `root`: the model path the server was started with (default: the first name).
    model_root: str | None = None
    host: str = "127.0.0.1"
    port: int = 0
    # vLLM >= 0.31 (validate_request_mm_kwargs, vllm/entrypoints/generate/base/protocol.py) answers
    # 400 to per-request mm_processor_kwargs / media_io_kwargs unless the server was started with
    # --trust-request-mm-kwargs. False: behave so (the released default); True: accept them.
    trust_request_mm_kwargs: bool = True
    # How the context is enforced. "release": as vLLM 0.32 (vllm/renderers/params.py,
    # entrypoints/serve/utils/api_utils.get_max_tokens): max_tokens over max_model_len is refused,
    # a prompt alone over it is refused, and a prompt plus max_tokens over it is answered with
    # max_tokens shortened to what is left. "sum": as earlier releases (and SGLang), which refuse
    # a prompt plus max_tokens over the context, naming both counts.
    context_rule: Literal["release", "sum"] = "release"

    def __post_init__(self) -> None:
        if self.answer not in ANSWER_MODES:
            raise ValueError(f"answer must be one of {ANSWER_MODES}, got {self.answer!r}")
        if self.slots < 1:
            raise ValueError("slots must be >= 1")
        if self.server_kind not in SERVER_KINDS:
            raise ValueError(f"server_kind must be one of {SERVER_KINDS}, got {self.server_kind!r}")
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

    def to_json(self) -> JsonObject:
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
            math.ceil(im.width / PATCH) * math.ceil(im.height / PATCH) for im in self.images
        )
        return image_tokens + len(self.text) // CHARS_PER_TOKEN

    @property
    def page(self) -> int | None:
        """The request's page code: the first image that carries one."""
        return next((im.code for im in self.images if im.code is not None), None)


def decode_image(url: str, decode_code: bool) -> ReceivedImage:
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
                images.append(decode_image(url, decode_code))
            else:
                raise BadRequest(f"Unsupported content part type: {kind!r}.")
            parts.append(f"{role}:{kind}")
    return ParsedPrompt(text="\n".join(texts), parts=parts, images=images)


def completion_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN) if text else 0


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

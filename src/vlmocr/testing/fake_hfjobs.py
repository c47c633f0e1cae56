"""A stand-in for the Hugging Face Jobs HTTP API on 127.0.0.1: what ``huggingface_hub``'s
``HfApi.run_job`` / ``inspect_job`` / ``fetch_job_logs`` / ``cancel_job`` call, so that
``vlmocr serve --target hf-jobs`` is tested over real HTTP through the real client (point
``HF_ENDPOINT`` at ``handle.url``).

Routes (as huggingface_hub's hf_api.py calls them):

* ``GET /api/whoami-v2`` — the namespace jobs run in;
* ``POST /api/jobs/{namespace}`` — create a job from a job spec (dockerImage, command,
  environment, secrets, flavor, timeoutSeconds, expose …); answers the job;
* ``GET /api/jobs/{namespace}/{id}`` — the job, its ``status.stage`` and ``status.message``;
* ``GET /api/jobs/{namespace}/{id}/logs`` — server-sent events ``data: {"timestamp", "data"}``,
  replayed from the first line on every connection (the client skips what it has seen), kept
  open with keep-alive comments while the job runs and closed once it reaches a final stage;
* ``POST /api/jobs/{namespace}/{id}/cancel``.

Every route wants ``Authorization: Bearer TOKEN`` (401 otherwise). How a job plays out is a
:class:`JobScript`: its stages and log lines, each at a time after the job was created. A
cancelled job is CANCELED from then on. Nothing here runs a container: a test that reads pages
points vlmocr's endpoint template at a fake vLLM server instead."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from .app_thread import serve_app_in_thread

TERMINAL = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
KEEPALIVE_SECONDS = 0.5

#: A vLLM server coming up: the line vlmocr waits for is uvicorn's last.
VLLM_READY_LOGS = (
    (0.1, "INFO 06-28 10:00:01 [api_server.py:1] vLLM API server version 0.0.0-standin"),
    (0.2, "INFO 06-28 10:00:09 [loader.py:1] Loading weights took 4.20 seconds"),
    (0.3, "INFO:     Started server process [1]"),
    (0.3, "INFO:     Waiting for application startup."),
    (0.4, "INFO:     Application startup complete."),
)


@dataclass
class JobScript:
    """How every job the stand-in creates plays out: ``stages`` as (seconds after creation,
    stage, message), ``logs`` as (seconds after creation, line). The job is SCHEDULING until
    its first stage; the line ``===== Job started … =====`` the Hub writes comes when it turns
    RUNNING."""

    stages: tuple[tuple[float, str, str | None], ...] = ((0.2, "RUNNING", None),)
    logs: tuple[tuple[float, str], ...] = VLLM_READY_LOGS


@dataclass
class FakeJob:
    id: str
    namespace: str
    spec: dict[str, Any]
    script: JobScript
    created: float = field(default_factory=time.monotonic)
    created_at: str = field(default_factory=lambda: _stamp())
    cancelled: float | None = None

    def _elapsed(self) -> float:
        return time.monotonic() - self.created

    def stage(self) -> tuple[str, str | None]:
        stage, message = "SCHEDULING", None
        for at, name, text in self.script.stages:
            if self.cancelled is not None and at > self.cancelled - self.created:
                break
            if at <= self._elapsed():
                stage, message = name, text
                if name in TERMINAL:
                    return stage, message
        if self.cancelled is not None:
            return "CANCELED", None
        return stage, message

    def lines(self) -> list[str]:
        """The log lines written so far: none before the job runs, none after it ended."""
        started = next((at for at, name, _ in self.script.stages if name == "RUNNING"), None)
        ended = next((at for at, name, _ in self.script.stages if name in TERMINAL), None)
        end = self._elapsed()
        if self.cancelled is not None:
            end = min(end, self.cancelled - self.created)
        if ended is not None:
            end = min(end, ended)
        if started is None or started > end:
            return []
        return [f"===== Job started at {self.created_at} =====", *(line for at, line in self.script.logs if at <= end)]

    def info(self) -> dict[str, Any]:
        stage, message = self.stage()
        spec = self.spec
        return {
            "id": self.id, "createdAt": self.created_at, "dockerImage": spec.get("dockerImage"),
            "spaceId": spec.get("spaceId"), "command": spec.get("command"), "arguments": spec.get("arguments", []),
            "environment": spec.get("environment", {}),
            # the Hub answers with secret names, never their values
            "secrets": {name: None for name in spec.get("secrets", {})},
            "flavor": spec.get("flavor"), "labels": spec.get("labels"),
            "status": {"stage": stage, "message": message},
            "owner": {"id": "0" * 24, "name": self.namespace, "type": "user"},
            "expose": spec.get("expose"),
        }


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class FakeHfJobs:
    """State and routes of the stand-in. One event loop in one thread; tests read ``jobs``,
    ``cancels`` and ``requests`` from theirs (appends and dict writes only)."""

    def __init__(self, token: str, namespace: str = "standin-user", script: JobScript | None = None) -> None:
        self.token = token
        self.namespace = namespace
        self.script = script or JobScript()
        self.jobs: dict[str, FakeJob] = {}
        self.cancels: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self.unauthorized = 0

    # ------------------------------------------------------------------ helpers

    def _check(self, request: web.Request) -> web.Response | None:
        self.requests.append((request.method, request.path))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            self.unauthorized += 1
            return web.json_response({"error": "Invalid credentials in Authorization header"}, status=401)
        return None

    def _job(self, request: web.Request) -> FakeJob | web.Response:
        job = self.jobs.get(request.match_info["id"])
        if job is None or job.namespace != request.match_info["namespace"]:
            return web.json_response({"error": "Job not found"}, status=404)
        return job

    # ------------------------------------------------------------------ routes

    async def whoami(self, request: web.Request) -> web.Response:
        if (refused := self._check(request)) is not None:
            return refused
        return web.json_response({"type": "user", "id": "0" * 24, "name": self.namespace, "orgs": []})

    async def create(self, request: web.Request) -> web.Response:
        if (refused := self._check(request)) is not None:
            return refused
        if request.match_info["namespace"] != self.namespace:
            return web.json_response({"error": "You cannot run jobs in this namespace"}, status=403)
        spec = await request.json()
        missing = [k for k in ("command", "flavor") if k not in spec] + (
            [] if "dockerImage" in spec or "spaceId" in spec else ["dockerImage"])
        if missing:
            return web.json_response({"error": f"missing {', '.join(missing)}"}, status=400)
        job = FakeJob(id=uuid.uuid4().hex[:24], namespace=self.namespace, spec=spec, script=self.script)
        self.jobs[job.id] = job
        return web.json_response(job.info())

    async def inspect(self, request: web.Request) -> web.Response:
        if (refused := self._check(request)) is not None:
            return refused
        job = self._job(request)
        return job if isinstance(job, web.Response) else web.json_response(job.info())

    async def cancel(self, request: web.Request) -> web.Response:
        if (refused := self._check(request)) is not None:
            return refused
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        self.cancels.append(job.id)
        if job.stage()[0] not in TERMINAL:
            job.cancelled = time.monotonic()
        return web.json_response({})

    async def logs(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._check(request)) is not None:
            return refused
        job = self._job(request)
        if isinstance(job, web.Response):
            return job
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent, last_write = 0, time.monotonic()
        try:
            while True:
                lines = job.lines()
                for line in lines[sent:]:
                    event = json.dumps({"timestamp": _stamp(), "data": line})
                    await response.write(f"data: {event}\n\n".encode())
                    last_write = time.monotonic()
                sent = max(sent, len(lines))
                if job.stage()[0] in TERMINAL:
                    break
                if time.monotonic() - last_write >= KEEPALIVE_SECONDS:
                    await response.write(b": keep-alive\n\n")
                    last_write = time.monotonic()
                await asyncio.sleep(0.05)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass  # the client went away
        return response

    async def fallback(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path))
        return web.json_response({"error": f"the stand-in Jobs API does not serve {request.path}"}, status=404)

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/api/whoami-v2", self.whoami)
        r.add_post("/api/jobs/{namespace}", self.create)
        r.add_get("/api/jobs/{namespace}/{id}", self.inspect)
        r.add_get("/api/jobs/{namespace}/{id}/logs", self.logs)
        r.add_post("/api/jobs/{namespace}/{id}/cancel", self.cancel)
        r.add_route("*", "/{tail:.*}", self.fallback)
        return app


@dataclass
class HfJobsHandle:
    """The test's view of a running stand-in: its URL (for HF_ENDPOINT) and its state."""

    url: str
    state: FakeHfJobs

    def only_job(self) -> FakeJob:
        jobs = list(self.state.jobs.values())
        assert len(jobs) == 1, f"expected one job, the stand-in has {len(jobs)}"
        return jobs[0]

    def wait_for_cancel(self, timeout: float = 30) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.state.cancels:
                return True
            time.sleep(0.05)
        return False


@contextlib.contextmanager
def serve_hfjobs_in_thread(token: str, script: JobScript | None = None, *,
                           namespace: str = "standin-user") -> Iterator[HfJobsHandle]:
    """Run the stand-in on its own event loop in a thread of this process for the ``with``
    block (the code under test runs in a subprocess, or in this one through the real client)."""
    state = FakeHfJobs(token, namespace, script)
    with serve_app_in_thread(state.app(), "the stand-in Jobs API") as url:
        yield HfJobsHandle(url, state)

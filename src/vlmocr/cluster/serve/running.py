"""``running_server``: start a server, wait until it is healthy and ours, and stop it whatever
happens; ``serve_for_run``: the same for ``vlmocr run --serve PROFILE``."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...envvars import SERVE_ARGS, SERVE_HEALTH_TIMEOUT, SERVE_NO_P2P, env_args, env_flag, env_float
from ...exceptions import EndpointUnavailable, UsageError
from ...profiles import Profile, load_profile
from ...runfolder.record import JsonObject
from .gpus import gpu_memory, memory_line
from .plan import DEFAULT_HOST, SERVERS, free_port, plan_server, port_in_use
from .process import DEFAULT_HEALTH_TIMEOUT, DEFAULT_STOP_GRACE, ServerFailed, ServerProcess, say

if TYPE_CHECKING:
    from ...settings.config import Endpoint, RunConfig

# For `vlmocr run --serve`: RunConfig has no fields for these, so they come from the
# environment (as an sbatch script sets them).
ENV_SERVE_MODEL_PATH = "VLMOCR_SERVE_MODEL_PATH"
ENV_SERVE_REVISION = "VLMOCR_SERVE_REVISION"
ENV_SERVE_ARGS = SERVE_ARGS  # extra server flags, shell-split
ENV_SERVE_HEALTH_TIMEOUT = SERVE_HEALTH_TIMEOUT
ENV_SERVE_NO_P2P = SERVE_NO_P2P


class ServerInterrupted(KeyboardInterrupt):
    """SIGTERM arrived while vlmocr owned a server; raised so that the server is stopped on the
    way out (the default SIGTERM action would end vlmocr without running any cleanup)."""


@dataclass
class ServerInfo:
    """A healthy server: what a client needs, and where to look when it misbehaves."""

    url: str  # OpenAI base URL, http://127.0.0.1:PORT/v1
    model_name: str  # the served model name to put in requests
    pid: int
    log: Path
    server: str = "vllm"
    host: str = DEFAULT_HOST
    port: int = 0
    tensor_parallel: int = 1
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    version_source: str | None = None  # the path that told the version: /version, /get_server_info
    ready_seconds: float | None = None  # from the first start to healthy and ours
    gpus: list[dict[str, str]] | None = None  # nvidia-smi once ready: index, name, memory total/used
    # The --attention-backend chosen and why (plan.attention), None when left to the server.
    attention: dict[str, str] | None = None
    # The version told before the start, the recipe part chosen for it and what guards against
    # loops (cluster/serve/version.py); None when the profile's recipe names no versions.
    recipe: JsonObject | None = None
    process: ServerProcess | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def provenance(self) -> JsonObject:
        """What run.json keeps of a server vlmocr started (`Endpoint.provenance`): its version,
        the time it took to come up, the GPUs it came up on and the attention backend chosen."""
        return {"started_by_vlmocr": True, "version": self.versions.get(self.server),
                "version_source": self.version_source, "ready_seconds": self.ready_seconds, "gpus": self.gpus,
                "tensor_parallel": self.tensor_parallel, "log": str(self.log), "attention": self.attention,
                "recipe": self.recipe}


def _on_the_way_out(signum: int, frame: Any) -> None:
    """SIGTERM once ServerInterrupted is on its way: already stopping."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While a server is ours, SIGTERM raises ServerInterrupted (main thread only), so that
    the ``finally`` that stops the server runs. Code that installs its own handler meanwhile
    (the run's event loop: tasks.TaskRunner) takes over until it removes it, and puts this one
    back. It raises once: the way out is under way then, and a second raise could cut short
    the very ``finally`` that stops the server."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, _on_the_way_out)
        raise ServerInterrupted(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _address_in_use(lines: Sequence[str]) -> bool:
    text = "\n".join(lines).lower()
    return "address already in use" in text or "errno 98" in text


@contextlib.contextmanager
def running_server(
    profile: Profile | str,
    server: str = "vllm",
    model_path: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    extra_args: Sequence[str] = (),
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT,
    *,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    no_p2p: bool = False,
    served_name: str | None = None,
    log: str | os.PathLike[str] | None = None,
    stop_grace: float = DEFAULT_STOP_GRACE,
    environ: Mapping[str, str] | None = None,
    quiet: bool = False,
) -> Iterator[ServerInfo]:
    """Start a server for ``profile``, wait until it is healthy and ours, yield its ServerInfo,
    and stop it (SIGTERM to its process group, SIGKILL after ``stop_grace``) whatever happens:
    normal exit, an exception, SIGINT or SIGTERM.

    Raises ServerFailed (exit code 5) when the server exits or is not healthy within
    ``health_timeout`` seconds (its log tail is printed to stderr first), ForeignServer (5) when
    another process answers on its port, EndpointUnavailable (5) when a given ``port`` is taken."""
    note = (lambda _m: None) if quiet else say
    plan = plan_server(profile, server, model_path, revision, extra_args, host=host, port=port,
                       no_p2p=no_p2p, served_name=served_name, log=log, environ=environ)
    for warning in plan.warnings:
        note(f"warning: {warning}")
    if plan.attention is not None:
        note(f"{plan.server}: {plan.attention.sentence()}")
    if plan.recipe is not None:
        note(plan.recipe.sentence())
    if plan.port_given and port_in_use(plan.host, plan.port):
        raise EndpointUnavailable(f"port {plan.port} on {plan.host} is already in use by another process; "
                                  "choose another --port (or none: vlmocr asks the OS for a free one)")
    process: ServerProcess | None = None
    started = time.monotonic()  # the time to come up counts every attempt
    with _sigterm_raises():
        try:
            for attempt in range(3):
                note(f"starting {plan.server} for {plan.profile} ({plan.model}) on {plan.host}:{plan.port}, "
                    f"tensor parallel {plan.tensor_parallel}; log {plan.log}")
                process = ServerProcess(plan, environ)
                try:
                    process.wait_ready(health_timeout)
                    break
                except ServerFailed as exc:
                    # An auto-chosen port can be taken between our check and the server's bind
                    # (vLLM binds it only after loading the model): try again elsewhere.
                    retry = not plan.port_given and attempt < 2 and _address_in_use(exc.log_tail)
                    process.stop(stop_grace, cleanup=not retry)
                    if not retry:
                        raise
                    plan = plan.with_port(free_port(plan.host))
                    note(f"port taken meanwhile; retrying on port {plan.port}")
                except BaseException:
                    process.stop(stop_grace)
                    raise
            assert process is not None
            version, version_source = process.server_version()
            versions = {"vlmocr": __version__, plan.server: version}
            ready_seconds = round(time.monotonic() - started, 1)
            gpus = gpu_memory(environ)  # once, now: the memory the loaded model and its cache hold
            info = ServerInfo(
                url=plan.url, model_name=plan.served_name, pid=process.pid, log=plan.log, server=plan.server,
                host=plan.host, port=plan.port, tensor_parallel=plan.tensor_parallel, argv=list(plan.argv),
                env=dict(plan.env), versions=versions, process=process, version_source=version_source,
                ready_seconds=ready_seconds, gpus=[g.as_dict() for g in gpus] if gpus is not None else None,
                attention=plan.attention.as_dict() if plan.attention is not None else None,
                recipe=plan.recipe.as_dict() if plan.recipe is not None else None,
            )
            # The job log's two lines (seed 000: "server ready time, the nvidia-smi memory line").
            note(f"{plan.server} {version or '(version unknown)'} ready in {ready_seconds:.0f} s at {info.url} "
                 f"serving {info.model_name} (pid {info.pid}); vlmocr {__version__}")
            note(memory_line(gpus))
            yield info
        finally:
            if process is not None and not process.stopped:
                # A second SIGTERM while stopping must not cut the stop short.
                in_main = threading.current_thread() is threading.main_thread()
                previous = signal.signal(signal.SIGTERM, signal.SIG_IGN) if in_main else None
                try:
                    process.stop(stop_grace)
                finally:
                    if in_main:
                        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
                note(f"{plan.server} (pid {process.pid}) stopped")


def check_serve_options(cfg: RunConfig) -> None:
    """`run --serve` (here or as an HF job) starts its own server: no --endpoint beside it, and
    a run folder for the server's log."""
    if cfg.endpoint:
        raise UsageError("give --serve PROFILE or --endpoint URL, not both")
    if cfg.out is None:
        raise UsageError("--out RUN is required")


@contextlib.contextmanager
def serve_for_run(cfg: RunConfig, environ: Mapping[str, str] | None = None
                  ) -> Iterator[tuple[RunConfig, Endpoint | None]]:
    """For ``vlmocr run --serve P``: start the server, yield ``cfg`` pointed at it (endpoint,
    served model name, profile, server kind: RunConfig.served_by) and the Endpoint (its key and
    provenance, for the run's plan), stop it. Without ``cfg.serve`` it yields ``(cfg, None)``.

    The server kind is ``--server-kind`` when it is vllm or sglang, else vLLM; ``--model`` names
    the served model. Model path, revision, extra flags, health timeout and ``--no-p2p`` come
    from ``VLMOCR_SERVE_MODEL_PATH``, ``VLMOCR_SERVE_REVISION``, ``VLMOCR_SERVE_ARGS``
    (shell-split), ``VLMOCR_SERVE_HEALTH_TIMEOUT`` and ``VLMOCR_SERVE_NO_P2P=1``. The log goes to
    ``RUN/logs/server-<time>-<pid>.log``."""
    if not cfg.serve:
        yield cfg, None
        return
    check_serve_options(cfg)
    assert cfg.out is not None  # a run's settings always name its folder
    with start_server(cfg.serve, cfg.server_kind, cfg.model, Path(cfg.out), environ) as endpoint:
        yield cfg.served_by(endpoint), endpoint


@contextlib.contextmanager
def start_server(serve: str, server_kind: str, model: str | None, home: Path,
                 environ: Mapping[str, str] | None = None) -> Iterator[Endpoint]:
    """Start the server for profile ``serve`` (its log in ``home/logs``), yield the frozen
    Endpoint it serves at, stop it whatever happens: what `run --serve` and `describe --serve`
    hand their readers (RunConfig.served_by, DescribeOptions.served_by). ``server_kind``: vllm
    or sglang, else vLLM; ``model``: the served model name (None: the profile's)."""
    from ...settings.config import Endpoint  # here, not at the top: config imports the engines

    env = os.environ if environ is None else environ
    profile = load_profile(serve)
    kind = server_kind if server_kind in SERVERS else "vllm"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = Path(home) / "logs" / f"server-{stamp}-{os.getpid()}.log"
    timeout = env_float(ENV_SERVE_HEALTH_TIMEOUT, DEFAULT_HEALTH_TIMEOUT, minimum=0.0, environ=env)
    with running_server(
        profile, kind, env.get(ENV_SERVE_MODEL_PATH) or None, env.get(ENV_SERVE_REVISION) or None,
        env_args(ENV_SERVE_ARGS, env), timeout, no_p2p=env_flag(ENV_SERVE_NO_P2P, env),
        served_name=model, log=log, environ=env,
    ) as info:
        yield Endpoint(url=info.url, model=info.model_name, server_kind=kind, profile=serve,
                       provenance=info.provenance())

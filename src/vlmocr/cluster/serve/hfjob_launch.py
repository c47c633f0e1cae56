"""Start an ``HfJobPlan`` as a Hugging Face job through huggingface_hub's Jobs API (run, inspect,
follow the logs, cancel), wait until its server says it is ready, and cancel it whatever happens.

* **Token.** From ``HF_TOKEN`` in the environment, held in memory only: it authenticates the
  API calls, becomes the job's ``HF_TOKEN`` secret (the server downloads the model with it) and,
  for ``vlmocr run``, the API key of the requests (the ``*.hf.jobs`` proxy wants a token that can
  read the job's namespace). It is never in argv, run.json, a log or a message; a job log line
  that quotes it is written with ``***`` in its place.
* **Ready** when the job's log says so (seed 004: "ready at `The server is fired up` /
  `Application startup complete`"), within ``ready_timeout`` seconds; a job that ends first
  (ERROR, COMPLETED, CANCELED) is a ServerFailed (exit 5) naming its stage and message, with
  the last lines of its log on stderr; one never ready is cancelled, then the same.
* **Endpoint** ``https://<job_id>--<port>.hf.jobs/v1`` (``VLMOCR_HF_JOBS_ENDPOINT`` replaces the
  template: tests point it at a local stand-in server).
* **Cancelled** on every way out of ``running_hf_job`` (``vlmocr run --serve … --target
  hf-jobs``): normal end, an error, Ctrl-C, SIGTERM, and a stop asked for while it starts.
  ``vlmocr serve --target hf-jobs`` leaves a ready job running (until its ``--timeout`` or
  ``--stop JOB``) and cancels one that never got ready."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import stopsignal
from ...envvars import (
    HF_JOBS_FLAVOR_ENV,
    HF_JOBS_TIMEOUT_ENV,
    SERVE_ARGS,
    SERVE_HEALTH_TIMEOUT,
    SERVE_NO_P2P,
    env_args,
    env_flag,
    env_float,
    hf_jobs_endpoint,
)
from ...exceptions import EndpointUnavailable, UsageError, VlmocrError
from ...profiles import load_profile
from ...runfolder.record import JsonObject
from .hfjobs import HfJobPlan, check_timeout, hf_job_plan
from .plan import SERVERS
from .process import DEFAULT_HEALTH_TIMEOUT, ServerFailed, say
from .running import (
    ENV_SERVE_MODEL_PATH,
    ENV_SERVE_REVISION,
    ServerInterrupted,
    _sigterm_raises,
    check_serve_options,
)

if TYPE_CHECKING:
    from ...settings.config import Endpoint, RunConfig

TOKEN_ENV = "HF_TOKEN"
READY_LINES = ("The server is fired up", "Application startup complete")
TERMINAL_STAGES = ("COMPLETED", "CANCELED", "ERROR", "DELETED")
POLL_SECONDS = 5.0  # between stage checks while waiting (the Hub rate-limits; logs carry the news)
TAIL_LINES = 30
_ENDED = object()  # the log stream ended: the job reached a final stage


def hf_token(environ: Mapping[str, str] | None = None) -> str:
    token = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
    if not token:
        raise UsageError(f"{TOKEN_ENV} is not set: a Hugging Face job needs a token that can run Jobs "
                         "(vlmocr reads it from the environment and writes it nowhere)")
    return token


HUB_FLOOR = "1.24"  # pyproject's floor: the first release whose run_job takes name=


class JobsApi:
    """huggingface_hub's Jobs calls with the token in memory, the namespace asked once, and the
    Hub's errors as ours (a refused token: usage, exit 3; an unreachable or failing API: 5)."""

    def __init__(self, token: str) -> None:
        import huggingface_hub
        from huggingface_hub import HfApi, constants
        from packaging.version import Version

        # run_job(name=…) came in 1.24 (read from the released wheels): an older one fails at launch.
        if Version(huggingface_hub.__version__) < Version(HUB_FLOOR):
            raise UsageError(f"--target hf-jobs needs huggingface_hub >= {HUB_FLOOR} (installed "
                             f"{huggingface_hub.__version__}): pip install -U 'huggingface_hub>={HUB_FLOOR}'")
        self.endpoint = constants.ENDPOINT
        self.token = token
        self.api = HfApi(endpoint=self.endpoint, token=token, library_name="vlmocr")
        self._namespace: str | None = None

    def call(self, what: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except VlmocrError:
            raise
        except Exception as exc:  # the Hub's errors into ours; anything else is a bug
            raise self.translate(exc, what) from exc

    def translate(self, exc: Exception, what: str) -> Exception:
        from huggingface_hub.errors import HfHubHTTPError

        text = str(exc).replace(self.token, "***").splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, HfHubHTTPError):
            status = exc.response.status_code if exc.response is not None else None
            if status in (401, 403):
                return UsageError(f"{self.endpoint} refused {what} ({status}): HF_TOKEN must be a token that can "
                                  f"run Jobs in its namespace — {text}")
            if status == 404:
                return UsageError(f"{what}: not found at {self.endpoint} — {text}")
            return EndpointUnavailable(f"{self.endpoint} answered an error to {what}: {text}")
        if isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__module__.split(".")[0] in (
                "httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3"):
            return EndpointUnavailable(f"cannot reach the Jobs API at {self.endpoint} for {what}: "
                                       f"{type(exc).__name__}: {text}")
        return exc

    @property
    def namespace(self) -> str:
        if self._namespace is None:
            self._namespace = str(self.call("whoami", self.api.whoami)["name"])
        return self._namespace

    def run(self, plan: HfJobPlan) -> str:
        job = self.call(
            "starting a job", self.api.run_job, image=plan.image, command=plan.command, env=plan.env,
            secrets={TOKEN_ENV: self.token}, flavor=plan.flavor, timeout=plan.timeout, expose=[plan.port],
            name=f"vlmocr-{plan.profile}-{plan.server}", namespace=self.namespace)
        return str(job.id)

    def stage(self, job_id: str) -> tuple[str, str | None]:
        info = self.call(f"job {job_id}", self.api.inspect_job, job_id=job_id, namespace=self.namespace)
        return str(info.status.stage), info.status.message

    def cancel(self, job_id: str) -> None:
        self.call(f"cancelling job {job_id}", self.api.cancel_job, job_id=job_id, namespace=self.namespace)

    def logs(self, job_id: str) -> Iterator[str]:
        return iter(self.api.fetch_job_logs(job_id=job_id, namespace=self.namespace, follow=True))

    def job_url(self, job_id: str) -> str:
        return f"{self.endpoint}/jobs/{self.namespace}/{job_id}"


class LogFollower(threading.Thread):
    """Follows a job's log in a daemon thread: every line to the log file (if any) and the
    tail, and to ``events`` while someone waits for readiness; ``_ENDED`` once the job ended."""

    def __init__(self, jobs: JobsApi, job_id: str, log: Path | None) -> None:
        super().__init__(name=f"hf-job-logs-{job_id}", daemon=True)
        self.jobs, self.job_id, self.log = jobs, job_id, log
        self.events: queue.Queue[object] = queue.Queue()
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.forward = True
        self.stopped = threading.Event()

    def run(self) -> None:
        seen = 0  # every (re)connection replays the log from its first line
        out = self.log.open("a", encoding="utf-8") if self.log is not None else None
        try:
            while not self.stopped.is_set():
                try:
                    for n, line in enumerate(self.jobs.logs(self.job_id), 1):
                        if n <= seen:
                            continue
                        seen = n
                        line = line.rstrip("\n").replace(self.jobs.token, "***")
                        self.tail.append(line)
                        if out is not None:
                            out.write(line + "\n")
                            out.flush()
                        if self.forward:
                            self.events.put(line)
                        if self.stopped.is_set():
                            return
                    self.events.put(_ENDED)
                    return
                except Exception as exc:  # noqa: BLE001 - a dropped stream: say so to the waiter, follow again
                    self.events.put(self.jobs.translate(exc, f"the log of job {self.job_id}"))
                    self.stopped.wait(POLL_SECONDS)
        finally:
            if out is not None:
                out.close()


@dataclass
class HfJob:
    """A job whose server is ready: what a client needs, and how to stop it."""

    id: str
    namespace: str
    url: str  # the job's page on the Hub
    endpoint: str  # OpenAI base URL
    model_name: str
    server: str
    plan: HfJobPlan
    follower: LogFollower | None = None

    def details(self) -> JsonObject:
        return {"url": self.endpoint, "model": self.model_name, "job_id": self.id, "job_url": self.url,
                "namespace": self.namespace, "server": self.server, "image": self.plan.image,
                "flavor": self.plan.flavor, "timeout": self.plan.timeout,
                "attention": self.plan.attention.as_dict() if self.plan.attention else None}


def _failure(job_id: str, message: str, follower: LogFollower | None) -> ServerFailed:
    import sys

    tail = list(follower.tail) if follower is not None else []
    if tail:
        sys.stderr.write(f"----- last {len(tail)} lines of the log of HF job {job_id} -----\n")
        sys.stderr.write("".join(line + "\n" for line in tail))
        sys.stderr.write("-----\n")
        message += "; the last lines of its log are printed above"
    return ServerFailed(message, None, tail)


def _wait_ready(jobs: JobsApi, job_id: str, follower: LogFollower, timeout: float,
                note: Callable[[str], None]) -> None:
    deadline = time.monotonic() + timeout
    next_check, last_stage = 0.0, None
    while True:
        if stopsignal.pending() is not None:  # `vlmocr run` notes a stop asked for during start-up
            raise ServerInterrupted("stop asked for while the HF job started")
        now = time.monotonic()
        if now >= next_check:
            stage, message = jobs.stage(job_id)
            if stage != last_stage:
                note(f"HF job {job_id}: {stage}" + (f" ({message})" if message else ""))
                last_stage = stage
            if stage in TERMINAL_STAGES:
                raise _failure(job_id, f"HF job {job_id} ended {stage} before its server was ready"
                               + (f": {message}" if message else ""), follower)
            next_check = now + POLL_SECONDS
        if now >= deadline:
            raise _failure(job_id, f"HF job {job_id} was not ready within {timeout:g} s (no "
                           f"{' / '.join(repr(s) for s in READY_LINES)} in its log); cancelled it", follower)
        try:
            item = follower.events.get(timeout=max(0.01, min(0.25, deadline - now)))
        except queue.Empty:
            continue
        if isinstance(item, str) and any(marker in item for marker in READY_LINES):
            return
        if item is _ENDED:
            next_check = 0.0  # the job ended: its stage says how


def _cancel_quietly(jobs: JobsApi, job_id: str, note: Callable[[str], None]) -> None:
    """Cancel, with SIGINT/SIGTERM held off meanwhile (a second Ctrl-C must not leave it billing)."""
    in_main = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    try:
        if jobs.stage(job_id)[0] in TERMINAL_STAGES:
            return
        jobs.cancel(job_id)
        note(f"HF job {job_id} cancelled")
    except VlmocrError as exc:
        note(f"warning: could not cancel HF job {job_id} ({exc}): cancel it with `hf jobs cancel {job_id}`")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)


def launch_hf_job(plan: HfJobPlan, *, ready_timeout: float = DEFAULT_HEALTH_TIMEOUT, log: Path | None = None,
                  environ: Mapping[str, str] | None = None, quiet: bool = False,
                  jobs: JobsApi | None = None) -> tuple[HfJob, JobsApi]:
    """Start the job, follow its log until its server is ready; a job that is not (or a stop,
    an error meanwhile) is cancelled before the exception goes on."""
    note = (lambda _m: None) if quiet else say
    for warning in plan.warnings:
        note(f"warning: {warning}")
    if plan.attention is not None:
        note(f"{plan.server}: {plan.attention.sentence()}")
    jobs = jobs or JobsApi(hf_token(environ))
    with _sigterm_raises():
        job_id = jobs.run(plan)
        note(f"HF job {job_id} started: {plan.server} for {plan.profile} ({plan.model}) on {plan.flavor}, "
             f"image {plan.image}, timeout {plan.timeout}; {jobs.job_url(job_id)} — stop it with "
             f"`vlmocr serve --target hf-jobs --stop {job_id}`")
        if log is not None:
            log = log.with_name(log.name.replace("{job_id}", job_id))
            log.parent.mkdir(parents=True, exist_ok=True)
        follower = LogFollower(jobs, job_id, log)
        follower.start()
        try:
            _wait_ready(jobs, job_id, follower, ready_timeout, note)
        except BaseException:
            follower.stopped.set()
            _cancel_quietly(jobs, job_id, note)
            raise
        follower.forward = False
    endpoint = hf_jobs_endpoint(environ).format(job_id=job_id, port=plan.port)
    job = HfJob(id=job_id, namespace=jobs.namespace, url=jobs.job_url(job_id), endpoint=endpoint,
                model_name=plan.served_name, server=plan.server, plan=plan, follower=follower)
    note(f"{plan.server} ready in HF job {job_id} at {endpoint} serving {plan.served_name}")
    return job, jobs


def stop_hf_job(ref: str, environ: Mapping[str, str] | None = None) -> str:
    """``vlmocr serve --target hf-jobs --stop JOB`` (JOB or NAMESPACE/JOB, as `hf jobs` shows it)."""
    jobs = JobsApi(hf_token(environ))
    namespace, _, job_id = ref.strip().rpartition("/")
    if not job_id:
        raise UsageError(f"--stop {ref!r}: give a job id")
    if namespace:
        jobs._namespace = namespace
    stage, _ = jobs.stage(job_id)
    if stage in TERMINAL_STAGES:
        return f"HF job {job_id} had already ended ({stage})"
    jobs.cancel(job_id)
    return f"HF job {job_id} cancelled"


@contextlib.contextmanager
def running_hf_job(plan: HfJobPlan, *, ready_timeout: float = DEFAULT_HEALTH_TIMEOUT, log: Path | None = None,
                   environ: Mapping[str, str] | None = None, quiet: bool = False) -> Iterator[HfJob]:
    """Launch, wait until ready, yield, and cancel the job on every way out."""
    note = (lambda _m: None) if quiet else say
    job, jobs = launch_hf_job(plan, ready_timeout=ready_timeout, log=log, environ=environ, quiet=quiet)
    try:
        with _sigterm_raises():
            yield job
    finally:
        if job.follower is not None:
            job.follower.stopped.set()
        _cancel_quietly(jobs, job.id, note)


@contextlib.contextmanager
def serve_hf_job_for_run(cfg: RunConfig, environ: Mapping[str, str] | None = None
                         ) -> Iterator[tuple[RunConfig, Endpoint | None]]:
    """For ``vlmocr run --serve P --target hf-jobs``: launch the job, yield ``cfg`` pointed at it
    (endpoint, served model, profile, server kind: RunConfig.served_by) and the Endpoint (the HF
    token as the requests' API key), cancel it. Without ``cfg.serve`` it yields ``(cfg, None)``.

    As for a local ``--serve``: the model path, revision, extra flags and readiness timeout come
    from ``VLMOCR_SERVE_MODEL_PATH``, ``VLMOCR_SERVE_REVISION``, ``VLMOCR_SERVE_ARGS`` and
    ``VLMOCR_SERVE_HEALTH_TIMEOUT``; the flavor and the job's timeout from
    ``VLMOCR_HF_JOBS_FLAVOR`` and ``VLMOCR_HF_JOBS_TIMEOUT`` (default: the profile's flavor, 30m).
    The job's log goes to ``RUN/logs/hf-job-<id>.log``."""
    if not cfg.serve:
        yield cfg, None
        return
    env = os.environ if environ is None else environ
    check_serve_options(cfg)
    token = hf_token(env)
    kind = cfg.server_kind if cfg.server_kind in SERVERS else "vllm"
    timeout = env.get(HF_JOBS_TIMEOUT_ENV, "").strip() or None
    if timeout:
        check_timeout(timeout, f"environment variable {HF_JOBS_TIMEOUT_ENV}")
    plan = hf_job_plan(load_profile(cfg.serve), kind, env.get(ENV_SERVE_MODEL_PATH) or None,
                       env.get(ENV_SERVE_REVISION) or None, env_args(SERVE_ARGS, env),
                       flavor=env.get(HF_JOBS_FLAVOR_ENV, "").strip() or None, timeout=timeout,
                       no_p2p=env_flag(SERVE_NO_P2P, env), served_name=cfg.model)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    assert cfg.out is not None  # a run's settings always name its folder
    log = Path(cfg.out) / "logs" / f"hf-job-{stamp}-{{job_id}}.log"
    ready_timeout = env_float(SERVE_HEALTH_TIMEOUT, DEFAULT_HEALTH_TIMEOUT, minimum=0.0, environ=env)
    with running_hf_job(plan, ready_timeout=ready_timeout, log=log, environ=env) as job:
        from ...settings.config import Endpoint  # here: config imports the engines

        # The *.hf.jobs proxy takes the HF token as the bearer token: the endpoint carries it to
        # the client (never into the environment, where a child process would inherit it).
        endpoint = Endpoint(url=job.endpoint, model=job.model_name, server_kind=kind, profile=cfg.serve,
                            api_key=token)
        yield cfg.served_by(endpoint), endpoint


__all__ = ["READY_LINES", "HfJob", "JobsApi", "hf_token", "launch_hf_job", "running_hf_job",
           "serve_hf_job_for_run", "stop_hf_job"]

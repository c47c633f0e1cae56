"""A started server: its process group, its log, whether the server answering on the port is
ours, and stopping it (SIGTERM, then SIGKILL, then its private caches)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import __version__
from ...exceptions import EndpointUnavailable
from ...reading.served import VERSION_PATHS, version_from
from . import modelinfo
from .plan import ENV_SGLANG_BIN, ENV_VLLM_BIN, ServePlan

DEFAULT_HEALTH_TIMEOUT = 1200.0  # model loads from network storage take many minutes
DEFAULT_STOP_GRACE = 30.0
LOG_TAIL_LINES = 50


class ServerFailed(EndpointUnavailable):
    """The server exited or never became healthy. ``log_tail`` holds the last lines of its log
    (already printed to stderr, raw, so that brackets in log lines are never taken for markup)."""

    def __init__(self, message: str, log: Path | None = None, log_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log = log
        self.log_tail = list(log_tail)


class ForeignServer(EndpointUnavailable):
    """Something other than the server we started answers on its port."""


# --------------------------------------------------------------------------------------------
# Process ownership (Linux /proc): is the socket on the port held by our server?
# --------------------------------------------------------------------------------------------


def _listening_inodes(port: int) -> set[str] | None:
    """Inodes of TCP sockets listening on ``port`` (None when /proc/net is not readable)."""
    inodes: set[str] = set()
    readable = False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":  # 0A = LISTEN
                continue
            try:
                if int(parts[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(parts[9])
            except ValueError:
                continue
    return inodes if readable else None


def _group_pids(pgid: int) -> list[int]:
    """Processes in process group ``pgid`` (our server and every worker it started)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[2] == str(pgid):
            pids.append(int(entry))
    return pids


def _socket_inodes_of(pids: Sequence[int]) -> set[str]:
    found: set[str] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


def port_owned_by_group(port: int, pgid: int) -> bool | None:
    """True if a socket listening on ``port`` belongs to process group ``pgid``, False if
    sockets listen there but none is ours, None if this cannot be known (no /proc)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    ours = _socket_inodes_of(_group_pids(pgid))
    return bool(inodes & ours)


# --------------------------------------------------------------------------------------------
# Starting, watching and stopping it
# --------------------------------------------------------------------------------------------


def _die_with_parent() -> Any:
    """A preexec function asking the kernel to SIGTERM the server when the thread that started
    it dies (Linux), so even ``kill -9`` of vlmocr does not leave a GPU server behind."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    term = int(signal.SIGTERM)

    def preexec() -> None:
        prctl(pr_set_pdeathsig, term, 0, 0, 0)

    return preexec


def _tail(path: Path, lines: int = LOG_TAIL_LINES, offset: int = 0) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", errors="replace").splitlines()[-lines:]


def say(message: str) -> None:
    from ...progress import console

    console.print(message, markup=False, highlight=False)


def _print_tail(log: Path, tail: Sequence[str]) -> None:
    """The log tail on stderr, raw (log lines are full of brackets rich would parse)."""
    sys.stderr.write(f"----- last {len(tail)} lines of {log} -----\n")
    for line in tail:
        sys.stderr.write(line + "\n")
    sys.stderr.write("----- end of log -----\n")
    sys.stderr.flush()


class ServerProcess:
    """A started server: its process (leader of its own process group) and plan."""

    def __init__(self, plan: ServePlan, environ: Mapping[str, str] | None = None) -> None:
        self.plan = plan
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        plan.cache_root.mkdir(parents=True, exist_ok=True)
        # The kept directory is found from the inherited environment: the server's own moves
        # XDG_CACHE_HOME into its private cache.
        self._environ = environ
        self._modelinfos = Path(plan.env["VLLM_CACHE_ROOT"]) if plan.server == "vllm" and plan.env.get(
            "VLLM_CACHE_ROOT") else None
        if self._modelinfos is not None:
            modelinfo.seed(self._modelinfos, environ)
        with open(plan.log, "ab") as fh:
            self.log_offset = fh.tell()
            fh.write(f"=== vlmocr {__version__}: {plan.command_line()}\n".encode())
            fh.flush()
            try:
                # preexec_fn only calls prctl (prepared beforehand); vlmocr has no other threads
                # when it starts a server from the CLI.
                self.proc = subprocess.Popen(  # noqa: PLW1509
                    plan.argv, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                    env=plan.full_env(environ), start_new_session=True, preexec_fn=_die_with_parent(),
                    cwd=plan.workdir,
                )
            except OSError as exc:
                raise EndpointUnavailable(f"cannot start {plan.server} ({plan.argv[0]}): {exc}; install it "
                                          f"or point {ENV_VLLM_BIN if plan.server == 'vllm' else ENV_SGLANG_BIN} "
                                          "at it") from None
        self.started = time.monotonic()
        self.stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        return _tail(self.plan.log, lines, self.log_offset)

    def failure(self, message: str) -> ServerFailed:
        tail = self.log_tail()
        _print_tail(self.plan.log, tail)
        return ServerFailed(f"{message}; the last {len(tail)} lines of its log {self.plan.log} are printed above",
                            self.plan.log, tail)

    def _check_ours(self, client: Any) -> None:
        plan = self.plan
        if self.proc.poll() is not None:
            return  # the caller reports the exit
        owned = port_owned_by_group(plan.port, self.pid) if sys.platform.startswith("linux") else None
        if owned is False:
            raise ForeignServer(
                f"port {plan.port} answers, but not from the {plan.server} server vlmocr started (pid {self.pid}): "
                "another process listens there. Stop it or choose another --port")
        try:
            ids = [str(m.get("id")) for m in client.get(f"{plan.base_url}/v1/models").json().get("data", [])]
        except Exception as exc:  # noqa: BLE001 - any answer but a model list is not our server
            raise ForeignServer(f"port {plan.port}: /v1/models does not answer like {plan.server} ({exc})") from None
        if plan.served_name not in ids:
            raise ForeignServer(
                f"port {plan.port} serves {', '.join(ids) or 'no model'}, not {plan.served_name!r}: "
                "another server answers there. Stop it or choose another --port")

    def wait_ready(self, timeout: float = DEFAULT_HEALTH_TIMEOUT, *, progress_every: float = 60.0) -> None:
        """Poll ``GET /health`` until 200 from our own server; raise ServerFailed if it exits or
        the time runs out, ForeignServer if another process answers on the port."""
        import httpx2 as httpx

        plan = self.plan
        deadline = self.started + timeout
        next_note = self.started + progress_every
        interval = 0.2
        # trust_env=False: an http_proxy set for the cluster must not capture loopback requests.
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    raise self.failure(
                        f"{plan.server} exited with code {rc} before it was ready "
                        f"({time.monotonic() - self.started:.0f} s after start)")
                try:
                    healthy = client.get(f"{plan.base_url}/health").status_code == 200
                except httpx.HTTPError:
                    healthy = False
                if healthy:
                    self._check_ours(client)
                    if self.proc.poll() is None:
                        self.keep_modelinfos()
                        return
                    continue  # it exited meanwhile: reported at the top of the loop
                now = time.monotonic()
                if now >= deadline:
                    raise self.failure(f"{plan.server} did not become healthy within {timeout:.0f} s "
                                       "(--health-timeout)")
                if now >= next_note:
                    say(f"still waiting for {plan.server} to load {plan.model} "
                         f"({now - self.started:.0f} s; log {plan.log})")
                    next_note = now + progress_every
                time.sleep(min(interval, max(0.0, deadline - now)))
                interval = min(interval * 1.5, 2.0)

    def keep_modelinfos(self) -> None:
        """vLLM's model-info entries kept for the next start (modelinfo.py)."""
        if self._modelinfos is not None:
            modelinfo.keep(self._modelinfos, self._environ)

    def server_version(self) -> tuple[str | None, str | None]:
        """(version, the path that told it) as the server says it: vLLM ``GET /version``,
        SGLang ``GET /get_server_info``; (None, None) when it does not."""
        import httpx2 as httpx

        paths = VERSION_PATHS.get(self.plan.server, VERSION_PATHS["openai"])
        # Informative only: no answer, or one that is not JSON, is an unknown version.
        with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=5.0, trust_env=False) as client:
            for path in paths:
                r = client.get(f"{self.plan.base_url}{path}")
                with contextlib.suppress(ValueError):
                    version = version_from(r.json()) if r.status_code == 200 else None
                    if version:
                        return version, path
        return None, None

    def versions(self) -> dict[str, str | None]:
        return {"vlmocr": __version__, self.plan.server: self.server_version()[0]}

    def stop(self, grace: float = DEFAULT_STOP_GRACE, cleanup: bool = True) -> int | None:
        """SIGTERM the server, then its whole process group, SIGKILL what is left after ``grace`` s,
        then remove the private caches (``cleanup``). Idempotent."""
        if self.stopped:
            return self.proc.returncode
        self.stopped = True
        pgid = self.pid
        deadline = time.monotonic() + grace
        # The API server first, alone: it stops its engine processes itself. SIGTERM to the whole
        # group at once reaches the engine core together with it, killed beside its server rather
        # than shut down by it (vLLM 0.32's own abort mode may still log `EngineDeadError`:
        # docs/servers.md). The group gets it once the server has exited, or half the grace has passed.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pgid, signal.SIGTERM)
        leader_deadline = time.monotonic() + grace / 2
        while time.monotonic() < leader_deadline and self.proc.poll() is None:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        while time.monotonic() < deadline:
            self.proc.poll()
            if not _group_alive(pgid):
                break
            time.sleep(0.1)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        end = time.monotonic() + 5
        while _group_alive(pgid) and time.monotonic() < end:  # workers re-parented to init
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            time.sleep(0.05)
        plan = self.plan
        self.keep_modelinfos()  # a server stopped before it was healthy may have inspected its model
        if not cleanup:
            return self.proc.returncode
        # The caches go; the log stays (and with it its directory, if the log lives there).
        if plan.owns_workdir and not plan.log.resolve().is_relative_to(plan.workdir.resolve()):
            shutil.rmtree(plan.workdir, ignore_errors=True)
        else:
            shutil.rmtree(plan.cache_root, ignore_errors=True)
        return self.proc.returncode


def _group_alive(pgid: int) -> bool:
    """Does any process (other than a zombie) remain in group ``pgid``?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if os.path.isdir("/proc"):
        for pid in _group_pids(pgid):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if state != "Z":
                return True
        return False
    return True

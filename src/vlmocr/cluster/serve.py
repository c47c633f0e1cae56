"""Start vLLM or SGLang for a model profile, wait until it is healthy, and always stop it.

Everything model-specific comes from the profile (`[serve.vllm]` / `[serve.sglang]`: flags,
environment, JSON-valued flags); everything cluster-specific is decided here, once:

* **Offline.** ``HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1``: compute nodes have no internet, and a
  server that tries to reach the Hub hangs or fails late. Fetch models beforehand.
* **Private caches.** vLLM, Triton, Inductor, FlashInfer, torch extensions, the CUDA JIT cache,
  ``XDG_CACHE_HOME`` and the Transformers remote-code modules all go to a fresh directory under
  ``$TMPDIR`` for this one server, so a cache left in a shared home by another job, user or
  version cannot break start-up, and two servers on one node never race on one cache. The cache
  directory is removed when the server stops. ``HF_HOME`` is pinned to where it was before
  (moving ``XDG_CACHE_HOME`` would otherwise move the model cache too).
* **No FlashInfer sampler** (``VLLM_USE_FLASHINFER_SAMPLER=0``): it JIT-compiles with ``nvcc``
  at start-up, and nodes without a CUDA toolkit crash there.
* **JSON-valued flags** (profile ``json_args``, e.g. ``--limit-mm-per-prompt``) are written to a
  YAML args file passed with ``--config FILE`` (both vLLM and SGLang read one), each value a
  JSON string — never shell-quoted, and read the same way by vLLM versions that pass nested
  YAML mappings through ``json.dumps`` and older ones that pass values through ``str``.
* **Port.** Asked from the OS (bind port 0) unless ``--port``; a given port that is taken is an
  error before anything starts. After ``/health`` answers, the answering server must be ours:
  the listening socket belongs to our server's process group (Linux ``/proc``), the process is
  alive, and ``/v1/models`` lists the name we gave it.
* **Tensor parallelism** = the number of entries in ``CUDA_VISIBLE_DEVICES`` (what SLURM gave
  this job), not what ``nvidia-smi`` lists (every GPU of the node; every MIG slice).
* **Stopping.** The server runs in its own session (process group); it is stopped with SIGTERM
  to the whole group, then SIGKILL after a grace period — on normal exit, on an exception, on
  SIGTERM/SIGINT of vlmocr, and (Linux) by the kernel if vlmocr itself is killed outright.

The executable is ``vllm serve`` when ``vllm`` is on PATH, else ``python -m
vllm.entrypoints.openai.api_server --model …`` when this interpreter can import vllm; SGLang is
``python -m sglang.launch_server``. ``VLMOCR_VLLM_BIN`` / ``VLMOCR_SGLANG_BIN`` (a command line,
shell-split) replace them; an override of the vLLM binary is called like the ``vllm`` CLI
(``BIN serve MODEL …``).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .. import __version__
from ..exceptions import EndpointUnavailable, UsageError
from ..profiles import Profile, has_control_characters, load_profile

if TYPE_CHECKING:
    from ..config import RunConfig

ServerName = Literal["vllm", "sglang"]
SERVERS: tuple[str, ...] = ("vllm", "sglang")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_HEALTH_TIMEOUT = 1200.0  # model loads from network storage take many minutes
DEFAULT_STOP_GRACE = 30.0
LOG_TAIL_LINES = 50
ENV_VLLM_BIN = "VLMOCR_VLLM_BIN"
ENV_SGLANG_BIN = "VLMOCR_SGLANG_BIN"

# For `vlmocr run --serve`: RunConfig has no fields for these, so they come from the
# environment (as an sbatch script sets them).
ENV_SERVE_MODEL_PATH = "VLMOCR_SERVE_MODEL_PATH"
ENV_SERVE_REVISION = "VLMOCR_SERVE_REVISION"
ENV_SERVE_ARGS = "VLMOCR_SERVE_ARGS"  # extra server flags, shell-split
ENV_SERVE_HEALTH_TIMEOUT = "VLMOCR_SERVE_HEALTH_TIMEOUT"
ENV_SERVE_NO_P2P = "VLMOCR_SERVE_NO_P2P"

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
VLLM_ENV = {"VLLM_USE_FLASHINFER_SAMPLER": "0", "VLLM_NO_USAGE_STATS": "1"}
# Cache variable -> sub-directory of the server's private cache directory.
CACHE_DIRS: dict[str, str] = {
    "VLLM_CACHE_ROOT": "vllm",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "CUDA_CACHE_PATH": "cuda",
    "HF_MODULES_CACHE": "hf_modules",
    "XDG_CACHE_HOME": "xdg",
}
VLLM_ONLY_CACHE_VARS = frozenset({"VLLM_CACHE_ROOT"})

# Flags vlmocr sets itself; passing them through would break the health and identity checks.
_OWNED_FLAGS = {
    "vllm": ("--host", "--port", "--served-model-name", "--model"),
    "sglang": ("--host", "--port", "--served-model-name", "--model-path", "--model"),
}
_TP_FLAGS = {
    "vllm": ("--tensor-parallel-size", "-tp"),
    "sglang": ("--tp", "--tp-size", "--tensor-parallel-size"),
}
HF_JOBS_IMAGES = {"vllm": "vllm/vllm-openai:latest", "sglang": "lmsysorg/sglang:latest"}
HF_JOBS_FLAVOR = "a10g-large"
HF_JOBS_TIMEOUT = "2h"
HF_JOBS_PORT = 8000


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class ServerFailed(EndpointUnavailable):
    """The server exited or never became healthy. ``log_tail`` holds the last lines of its log
    (already printed to stderr, raw, so that brackets in log lines are never taken for markup)."""

    def __init__(self, message: str, log: Path | None = None, log_tail: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.log = log
        self.log_tail = list(log_tail)


class ForeignServer(EndpointUnavailable):
    """Something other than the server we started answers on its port."""


class ServerInterrupted(KeyboardInterrupt):
    """SIGTERM arrived while vlmocr owned a server; raised so that the server is stopped on the
    way out (the default SIGTERM action would end vlmocr without running any cleanup)."""


# --------------------------------------------------------------------------------------------
# Pieces of the plan
# --------------------------------------------------------------------------------------------


def tensor_parallel_size(environ: Mapping[str, str] | None = None) -> tuple[int, list[str]]:
    """Tensor parallel size from ``CUDA_VISIBLE_DEVICES`` and the warnings it deserves.

    The variable lists what this job may use (SLURM sets it from ``--gpus``); ``nvidia-smi``
    lists every GPU of the node, and on MIG nodes every slice, so it over-counts."""
    env = os.environ if environ is None else environ
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return 1, [("CUDA_VISIBLE_DEVICES is not set: tensor parallel size 1 (set it, as SLURM does "
                    "for --gpus, to use several GPUs)")]
    entries = [e.strip() for e in raw.split(",") if e.strip()]
    if not entries or entries[0] in ("-1", "NoDevFiles"):
        return 1, [f"no GPU is visible (CUDA_VISIBLE_DEVICES={raw!r}): the server will not find a GPU"]
    mig = [e for e in entries if e.upper().startswith("MIG-")]
    if mig:
        return 1, [("CUDA_VISIBLE_DEVICES names MIG slices: a CUDA process sees only one MIG slice, "
                    "so tensor parallel size is 1; some vLLM versions fail to parse MIG UUIDs "
                    "(see docs/troubleshooting.md)")]
    return len(entries), []


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port the OS says is free now (bind to port 0)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _connect_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host``."""
    if host in ("0.0.0.0", "", "*"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def port_in_use(host: str, port: int) -> bool:
    """Is something listening on (or holding) ``host:port``? Checked by binding (as the server
    will) and by connecting (a server on 0.0.0.0 also answers on 127.0.0.1)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: TIME_WAIT is fine
        try:
            s.bind((host, port))
        except OSError:
            return True
    target = _connect_host(host)
    with socket.socket(socket.AF_INET6 if ":" in target else socket.AF_INET, socket.SOCK_STREAM) as c:
        c.settimeout(1.0)
        return c.connect_ex((target, port)) == 0


def server_command(server: str, environ: Mapping[str, str] | None = None) -> tuple[list[str], str, list[str]]:
    """The executable part of the command line, its style and warnings.

    Style ``cli``: ``BIN serve MODEL …`` (vLLM CLI); ``api_server``: ``BIN --model MODEL …``
    (``python -m vllm.entrypoints.openai.api_server``); ``sglang``: ``BIN --model-path MODEL …``."""
    env = os.environ if environ is None else environ
    if server == "vllm":
        override = env.get(ENV_VLLM_BIN, "").strip()
        if override:
            return shlex.split(override), "cli", []
        if shutil.which("vllm", path=env.get("PATH")):
            return ["vllm"], "cli", []
        if importlib.util.find_spec("vllm") is not None:
            return [sys.executable, "-m", "vllm.entrypoints.openai.api_server"], "api_server", []
        return ["vllm"], "cli", [("vLLM is not installed here (no `vllm` on PATH, not importable): "
                                  f"install it or set {ENV_VLLM_BIN}")]
    if server == "sglang":
        override = env.get(ENV_SGLANG_BIN, "").strip()
        if override:
            return shlex.split(override), "sglang", []
        if importlib.util.find_spec("sglang") is not None:
            return [sys.executable, "-m", "sglang.launch_server"], "sglang", []
        return ["python3", "-m", "sglang.launch_server"], "sglang", [
            f"SGLang is not importable here: install it or set {ENV_SGLANG_BIN}"]
    raise UsageError(f"unknown server {server!r}; use one of {', '.join(SERVERS)}")


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _check_extra_args(server: str, extra: Sequence[str], uses_config: bool) -> None:
    owned = set(_OWNED_FLAGS[server]) | ({"--config"} if uses_config else set())
    for arg in extra:
        if _flag_name(arg) in owned:
            raise UsageError(f"{_flag_name(arg)} is set by vlmocr serve itself; use its own option "
                             "(--host, --port, --served-model-name, --model-path) instead")


def _tp_from_extra(server: str, extra: Sequence[str]) -> int | None:
    flags = _TP_FLAGS[server]
    for i, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        if name in flags:
            text = value if eq else (extra[i + 1] if i + 1 < len(extra) else "")
            try:
                return int(text)
            except ValueError:
                return None
    return None


def args_file_text(json_args: Mapping[str, Any]) -> str:
    """The YAML args file for ``--config``: one ``flag: 'JSON'`` line per JSON-valued flag.

    Values are JSON *strings* in single-quoted YAML scalars (ASCII only, ``'`` doubled), so the
    file means the same to every YAML reader and to both vLLM and SGLang."""
    import json

    lines = ["# Written by vlmocr serve: the profile's JSON-valued flags (json_args)."]
    for flag, value in json_args.items():
        key = flag.lstrip("-")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", key):
            raise UsageError(f"json_args key {flag!r} is not a flag name")
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=True)
        lines.append(f"{key}: '{text.replace(chr(39), chr(39) * 2)}'")
    return "\n".join(lines) + "\n"


def server_environment(server: str, cache_root: Path, environ: Mapping[str, str] | None = None,
                       profile_env: Mapping[str, str] | None = None, no_p2p: bool = False) -> dict[str, str]:
    """The variables vlmocr sets for the server (on top of the inherited environment)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = dict(OFFLINE_ENV)
    if server == "vllm":
        out.update(VLLM_ENV)
    if "HF_HOME" not in env:
        # XDG_CACHE_HOME moves below; the model cache must stay where the models are.
        base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
        out["HF_HOME"] = str(Path(base) / "huggingface")
    for var, sub in CACHE_DIRS.items():
        if var in VLLM_ONLY_CACHE_VARS and server != "vllm":
            continue
        out[var] = str(cache_root / sub)
    out.update({str(k): str(v) for k, v in (profile_env or {}).items()})
    if no_p2p:
        out["NCCL_P2P_DISABLE"] = "1"
    return out


# --------------------------------------------------------------------------------------------
# The plan: exactly what will run
# --------------------------------------------------------------------------------------------


@dataclass
class ServePlan:
    """The command, environment and files for one server start. ``env`` holds only what vlmocr
    sets; the server inherits everything else."""

    server: str
    profile: str
    model: str
    served_name: str
    revision: str | None
    host: str
    port: int
    port_given: bool
    argv: list[str]
    env: dict[str, str]
    workdir: Path
    cache_root: Path
    args_file: Path | None
    args_text: str | None
    log: Path
    tensor_parallel: int
    warnings: list[str] = field(default_factory=list)
    owns_workdir: bool = False  # created by plan_server, so removed when the server stops

    @property
    def base_url(self) -> str:
        return f"http://{_url_host(_connect_host(self.host))}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/v1"

    def command_line(self) -> str:
        """The command, shell-quoted, on one line."""
        return shlex.join(self.argv)

    def shell_script(self) -> str:
        """What ``--print`` shows: the environment as ``export`` lines, then the command.
        Someone may pipe it to a shell, so every value is quoted, in the comments too."""
        q = shlex.quote
        comments = [(f"vlmocr serve {q(self.profile)}: {self.server}, model {q(self.model)}, "
                     f"tensor parallel {self.tensor_parallel}, url {q(self.url)}")]
        if self.args_file is not None and self.args_text is not None:
            comments.append(f"args file {q(str(self.args_file))}:")
            comments += [f"  {line}" for line in self.args_text.splitlines() if not line.startswith("#")]
        lines = [_comment(text) for text in comments]
        lines += [f"export {k}={q(v)}" for k, v in self.env.items()]
        lines.append(self.command_line())
        return "\n".join(lines) + "\n"

    def full_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        base = dict(os.environ if environ is None else environ)
        base.update(self.env)
        return base

    def with_port(self, port: int) -> ServePlan:
        """The same plan on another port (after an auto-chosen port was taken)."""
        argv = list(self.argv)
        i = argv.index("--port")
        argv[i + 1] = str(port)
        plan = ServePlan(**{**self.__dict__, "argv": argv, "port": port})
        return plan


def _comment(text: str) -> str:
    """A shell comment line: a control character shown escaped, so no value can end the
    comment and put a command on a line of its own."""
    return "# " + "".join(c.encode("unicode_escape").decode("ascii") if has_control_characters(c) else c
                          for c in text)


def _refuse_control_characters(named: Mapping[str, object]) -> None:
    """Names and paths go into command lines, logs and the ``--print`` script: one with a
    newline or another control character is refused (exit 3) before anything is written."""
    for what, value in named.items():
        if value is None:
            continue
        text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        if has_control_characters(text):
            raise UsageError(f"{what} {text!r}: control characters are not allowed in names and paths")


def _served_name_default(profile: Profile, model: str) -> str:
    return profile.model or model


def plan_server(
    profile: Profile | str,
    server: str = "vllm",
    model_path: str | os.PathLike[str] | None = None,
    revision: str | None = None,
    extra_args: Sequence[str] = (),
    *,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    no_p2p: bool = False,
    served_name: str | None = None,
    log: str | os.PathLike[str] | None = None,
    workdir: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServePlan:
    """Decide the command line and environment for ``server`` and write the args file.

    ``model_path`` (a local directory or a repo id) defaults to the profile's ``model``;
    ``revision`` to the profile's. The server answers to ``served_name``, by default the profile's
    repo id, so records read through ``--serve`` name the same model as records read through an
    endpoint someone started with the repo id. Creates ``workdir`` (default: a new directory
    under ``$TMPDIR``) holding the args file, the log (unless ``log``) and the private caches."""
    if server not in SERVERS:
        raise UsageError(f"unknown server {server!r}; use one of {', '.join(SERVERS)}")
    prof = load_profile(profile) if isinstance(profile, str) else profile
    env = os.environ if environ is None else environ
    model = os.fspath(model_path) if model_path else prof.model
    if not model:
        raise UsageError(f"profile {prof.name} names no model: give --model-path DIR_OR_REPO")
    rev = revision or prof.revision or None
    name = served_name or _served_name_default(prof, model)
    _refuse_control_characters({"--model-path" if model_path else f"profile {prof.name}: model": model,
                                "--revision": rev, "--served-model-name": name, "--host": host,
                                "--log": log, "workdir": workdir})
    if rev and os.path.isdir(model):
        # A local model directory must be the pinned commit it claims (vlmocr models fetch).
        from ..models import check_model_dir

        check_model_dir(model, rev)
    spec = prof.serve.get(server)  # type: ignore[call-overload]
    spec_args = list(spec.args) if spec else []
    json_args = dict(spec.json_args) if spec else {}
    extra = [str(a) for a in extra_args]
    _check_extra_args(server, extra, uses_config=bool(json_args))

    warnings: list[str] = []
    tp, tp_warnings = tensor_parallel_size(env)
    tp_given = _tp_from_extra(server, extra)
    if tp_given is not None:
        tp = tp_given
    else:
        warnings += tp_warnings
    if port is None:
        chosen, port_given = free_port(host), False
    else:
        chosen, port_given = int(port), True
        if not 0 < chosen < 65536:
            raise UsageError(f"--port {port}: not a port number")

    if workdir is None:
        owns_workdir = True
        tmpdir = env.get("TMPDIR")  # the job's scratch (SLURM sets a per-job TMPDIR on many sites)
        wd = Path(tempfile.mkdtemp(prefix="vlmocr-serve-", dir=tmpdir if tmpdir and os.path.isdir(tmpdir) else None))
    else:
        wd, owns_workdir = Path(workdir), False
        wd.mkdir(parents=True, exist_ok=True)
    cache_root = wd / "cache"
    args_file = args_text = None
    if json_args:
        args_text = args_file_text(json_args)
        args_file = wd / f"{server}-args.yaml"
        args_file.write_text(args_text, encoding="utf-8")

    exe, style, exe_warnings = server_command(server, env)
    warnings += exe_warnings
    if style == "cli":
        argv = [*exe, "serve", model]
    elif style == "api_server":
        argv = [*exe, "--model", model]
    else:
        argv = [*exe, "--model-path", model]
    if rev:
        argv += ["--revision", rev]
    argv += ["--host", host, "--port", str(chosen), "--served-model-name", name]
    argv += spec_args
    if args_file is not None:
        argv += ["--config", str(args_file)]
    if tp > 1 and tp_given is None:
        argv += ["--tensor-parallel-size" if server == "vllm" else "--tp", str(tp)]
    if no_p2p:
        argv.append("--disable-custom-all-reduce")
    argv += extra

    server_env = server_environment(server, cache_root, env, spec.env if spec else None, no_p2p)
    log_path = Path(log) if log else wd / "server.log"
    return ServePlan(
        server=server, profile=prof.name, model=model, served_name=name, revision=rev, host=host,
        port=chosen, port_given=port_given, argv=argv, env=server_env, workdir=wd, cache_root=cache_root,
        args_file=args_file, args_text=args_text, log=log_path, tensor_parallel=tp, warnings=warnings,
        owns_workdir=owns_workdir,
    )


def hf_jobs_command(
    profile: Profile | str,
    server: str = "vllm",
    model_path: str | None = None,
    revision: str | None = None,
    extra_args: Sequence[str] = (),
    *,
    port: int | None = None,
    flavor: str = HF_JOBS_FLAVOR,
    timeout: str = HF_JOBS_TIMEOUT,
    image: str | None = None,
    no_p2p: bool = False,
    served_name: str | None = None,
) -> list[str]:
    """``hf jobs run --detach --expose PORT --flavor … --timeout … IMAGE -- <server command>``.

    The job runs in a fresh container with internet access, so it is online (it downloads the
    model, authenticated by the forwarded ``HF_TOKEN`` secret), listens on 0.0.0.0, and its JSON
    flags are inline (a local args file does not exist there). Tensor parallelism comes from the
    flavor's ``xN`` suffix (``a10g-largex2`` → 2)."""
    import json

    if server not in SERVERS:
        raise UsageError(f"unknown server {server!r}; use one of {', '.join(SERVERS)}")
    prof = load_profile(profile) if isinstance(profile, str) else profile
    model = str(model_path) if model_path else prof.model
    if not model:
        raise UsageError(f"profile {prof.name} names no model: give --model-path REPO_ID")
    if Path(model).expanduser().exists():
        raise UsageError(f"{model} is a local path; a Hugging Face job needs a repo id (--model-path ORG/NAME)")
    rev = revision or prof.revision or None
    name = served_name or _served_name_default(prof, model)
    _refuse_control_characters({"--model-path" if model_path else f"profile {prof.name}: model": model,
                                "--revision": rev, "--served-model-name": name, "--image": image,
                                "--flavor": flavor, "--timeout": timeout})
    the_port = port or HF_JOBS_PORT
    extra = [str(a) for a in extra_args]
    _check_extra_args(server, extra, uses_config=False)
    spec = prof.serve.get(server)  # type: ignore[call-overload]
    match = re.search(r"x(\d+)$", flavor)
    tp = int(match.group(1)) if match else 1
    if server == "vllm":
        cmd = ["vllm", "serve", model]
    else:
        cmd = ["python3", "-m", "sglang.launch_server", "--model-path", model]
    if rev:
        cmd += ["--revision", rev]
    cmd += ["--host", "0.0.0.0", "--port", str(the_port), "--served-model-name", name]
    if spec:
        cmd += list(spec.args)
        for flag, value in spec.json_args.items():
            cmd += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
    if tp > 1 and _tp_from_extra(server, extra) is None:
        cmd += ["--tensor-parallel-size" if server == "vllm" else "--tp", str(tp)]
    if no_p2p:
        cmd.append("--disable-custom-all-reduce")
    cmd += extra

    env: dict[str, str] = dict(VLLM_ENV) if server == "vllm" else {}
    env.update({str(k): str(v) for k, v in (spec.env if spec else {}).items()})
    if no_p2p:
        env["NCCL_P2P_DISABLE"] = "1"
    hf = ["hf", "jobs", "run", "--detach", "--expose", str(the_port), "--flavor", flavor, "--timeout", timeout]
    for k, v in env.items():
        hf += ["-e", f"{k}={v}"]
    hf += ["-s", "HF_TOKEN", image or HF_JOBS_IMAGES[server], "--", *cmd]
    return hf


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
# Running it
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


def _say(message: str) -> None:
    from ..progress import console

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
                        return
                    continue  # it exited meanwhile: reported at the top of the loop
                now = time.monotonic()
                if now >= deadline:
                    raise self.failure(f"{plan.server} did not become healthy within {timeout:.0f} s "
                                       "(--health-timeout)")
                if now >= next_note:
                    _say(f"still waiting for {plan.server} to load {plan.model} "
                         f"({now - self.started:.0f} s; log {plan.log})")
                    next_note = now + progress_every
                time.sleep(min(interval, max(0.0, deadline - now)))
                interval = min(interval * 1.5, 2.0)

    def versions(self) -> dict[str, str | None]:
        import httpx2 as httpx

        server_version = None
        try:
            with httpx.Client(timeout=5.0, trust_env=False) as client:
                for path in ("/version", "/get_server_info"):
                    r = client.get(f"{self.plan.base_url}{path}")
                    if r.status_code == 200:
                        server_version = str(r.json().get("version") or "") or None
                        if server_version:
                            break
        except Exception:  # noqa: BLE001 - the version is informative only
            pass
        return {"vlmocr": __version__, self.plan.server: server_version}

    def stop(self, grace: float = DEFAULT_STOP_GRACE, cleanup: bool = True) -> int | None:
        """SIGTERM the whole process group, SIGKILL what is left after ``grace`` s, then remove the
        private caches (``cleanup``). Idempotent."""
        if self.stopped:
            return self.proc.returncode
        self.stopped = True
        pgid = self.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
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
    process: ServerProcess | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While a server is ours, SIGTERM raises ServerInterrupted (main thread only), so that
    the ``finally`` that stops the server runs. Code that installs its own handler meanwhile
    (the run's event loop) takes over until it removes it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
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
    say = (lambda _m: None) if quiet else _say
    plan = plan_server(profile, server, model_path, revision, extra_args, host=host, port=port,
                       no_p2p=no_p2p, served_name=served_name, log=log, environ=environ)
    for warning in plan.warnings:
        say(f"warning: {warning}")
    if plan.port_given and port_in_use(plan.host, plan.port):
        raise EndpointUnavailable(f"port {plan.port} on {plan.host} is already in use by another process; "
                                  "choose another --port (or none: vlmocr asks the OS for a free one)")
    process: ServerProcess | None = None
    with _sigterm_raises():
        try:
            for attempt in range(3):
                say(f"starting {plan.server} for {plan.profile} ({plan.model}) on {plan.host}:{plan.port}, "
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
                    say(f"port taken meanwhile; retrying on port {plan.port}")
                except BaseException:
                    process.stop(stop_grace)
                    raise
            assert process is not None
            versions = process.versions()
            info = ServerInfo(
                url=plan.url, model_name=plan.served_name, pid=process.pid, log=plan.log, server=plan.server,
                host=plan.host, port=plan.port, tensor_parallel=plan.tensor_parallel, argv=list(plan.argv),
                env=dict(plan.env), versions=versions, process=process,
            )
            say(f"{plan.server} {versions.get(plan.server) or '(version unknown)'} ready at {info.url} "
                f"serving {info.model_name} (pid {info.pid}); vlmocr {__version__}")
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
                say(f"{plan.server} (pid {process.pid}) stopped")


# --------------------------------------------------------------------------------------------
# `vlmocr run --serve PROFILE`
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def serve_for_run(cfg: RunConfig, environ: Mapping[str, str] | None = None) -> Iterator[ServerInfo | None]:
    """For ``vlmocr run --serve P``: start the server, point ``cfg`` at it (endpoint, served model
    name, profile, server kind), yield, stop it. A no-op without ``cfg.serve``.

    The server kind is ``--server-kind`` when it is vllm or sglang, else vLLM; ``--model`` names
    the served model. Model path, revision, extra flags, health timeout and ``--no-p2p`` come
    from ``VLMOCR_SERVE_MODEL_PATH``, ``VLMOCR_SERVE_REVISION``, ``VLMOCR_SERVE_ARGS``
    (shell-split), ``VLMOCR_SERVE_HEALTH_TIMEOUT`` and ``VLMOCR_SERVE_NO_P2P=1``. The log goes to
    ``RUN/logs/server-<time>-<pid>.log``."""
    if not cfg.serve:
        yield None
        return
    env = os.environ if environ is None else environ
    if cfg.endpoint:
        raise UsageError("give --serve PROFILE or --endpoint URL, not both")
    if cfg.out is None:
        raise UsageError("--out RUN is required")
    profile = load_profile(cfg.serve)
    kind = cfg.server_kind if cfg.server_kind in SERVERS else "vllm"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = Path(cfg.out) / "logs" / f"server-{stamp}-{os.getpid()}.log"
    try:
        timeout = float(env.get(ENV_SERVE_HEALTH_TIMEOUT) or DEFAULT_HEALTH_TIMEOUT)
    except ValueError:
        raise UsageError(f"{ENV_SERVE_HEALTH_TIMEOUT} must be a number of seconds") from None
    with running_server(
        profile, kind, env.get(ENV_SERVE_MODEL_PATH) or None, env.get(ENV_SERVE_REVISION) or None,
        shlex.split(env.get(ENV_SERVE_ARGS, "")), timeout, no_p2p=env.get(ENV_SERVE_NO_P2P) == "1",
        served_name=cfg.model, log=log, environ=env,
    ) as info:
        cfg.endpoint = info.url
        cfg.model = info.model_name
        cfg.server_kind = kind
        if not cfg.profile:
            cfg.profile = cfg.serve
        yield info


__all__ = [
    "DEFAULT_HEALTH_TIMEOUT",
    "ForeignServer",
    "ServePlan",
    "ServerFailed",
    "ServerInfo",
    "ServerInterrupted",
    "ServerProcess",
    "args_file_text",
    "free_port",
    "hf_jobs_command",
    "plan_server",
    "port_in_use",
    "port_owned_by_group",
    "running_server",
    "serve_for_run",
    "server_command",
    "server_environment",
    "tensor_parallel_size",
]

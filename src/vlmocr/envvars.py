"""The VLMOCR_* environment variables that are not run settings, and the one way to read one:
a value that cannot be used is a usage error (exit 3) naming the variable, its value and what
it takes — never silently replaced by a default, never a traceback.

The run settings (VLMOCR_WORKERS, VLMOCR_DPI, … one per `vlmocr run` option) are read by
config.load_config, whose errors name the variable too. Variables holding a path or a free
string (VLMOCR_API_KEY, VLMOCR_PROFILE_PATH, VLMOCR_STOP_FILE, VLMOCR_SERVE_MODEL_PATH,
VLMOCR_SERVE_REVISION, VLMOCR_MEMINFO) cannot be malformed and are read where they are used."""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from .exceptions import UsageError

MAX_DOC_PAGES = "VLMOCR_MAX_DOC_PAGES"  # pages a document may have (render.max_doc_pages)
SERVE_HEALTH_TIMEOUT = "VLMOCR_SERVE_HEALTH_TIMEOUT"  # seconds `run --serve` waits for /health
SERVE_NO_P2P = "VLMOCR_SERVE_NO_P2P"  # `run --serve` on GPUs without peer-to-peer
SERVE_ARGS = "VLMOCR_SERVE_ARGS"  # extra server flags for `run --serve`, shell-split
VLLM_BIN = "VLMOCR_VLLM_BIN"  # the vLLM command line, shell-split
SGLANG_BIN = "VLMOCR_SGLANG_BIN"  # the SGLang command line, shell-split
# `run --serve P --target hf-jobs`: the job's flavor and maximum duration (default: the profile's
# flavor, 30m; the duration is checked where it is used), and the OpenAI base URL of a job's
# server as a template with {job_id} and {port} (tests point it at a local stand-in).
HF_JOBS_FLAVOR_ENV = "VLMOCR_HF_JOBS_FLAVOR"
HF_JOBS_TIMEOUT_ENV = "VLMOCR_HF_JOBS_TIMEOUT"
HF_JOBS_ENDPOINT = "VLMOCR_HF_JOBS_ENDPOINT"
HF_JOBS_ENDPOINT_DEFAULT = "https://{job_id}--{port}.hf.jobs/v1"
PROGRESS_EVERY = "VLMOCR_PROGRESS_EVERY"  # seconds between progress lines when stderr is no terminal
# A truth set (a CSV, a folder) may name files outside its own folder: off by default, since
# truth sets come from others and what they name ends up in reports that are shared.
TRUTH_OUTSIDE = "VLMOCR_TRUTH_OUTSIDE"
# For tests: a file in /proc/meminfo's format read instead of /proc/meminfo and the cgroup limits,
# as the memory the default --workers is sized by (machine.py). A path: read where used.
MEMINFO = "VLMOCR_MEMINFO"
# vlmocr's own cache (a path, read where used): what is kept between runs — vLLM's model-info
# entries (cluster/serve/modelinfo.py). Default ${XDG_CACHE_HOME:-~/.cache}/vlmocr.
CACHE_DIR = "VLMOCR_CACHE_DIR"

def cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """The user's cache directory: ${XDG_CACHE_HOME:-$HOME/.cache}."""
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_CACHE_HOME") or Path(env.get("HOME") or Path.home()) / ".cache")


FLAG_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _raw(name: str, environ: Mapping[str, str] | None) -> str:
    return (os.environ if environ is None else environ).get(name, "").strip()


def _refuse(name: str, raw: str, takes: str) -> UsageError:
    return UsageError(f"environment variable {name}={raw!r}: {takes}")


def env_int(name: str, default: int, *, minimum: int | None = None, environ: Mapping[str, str] | None = None) -> int:
    raw = _raw(name, environ)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _refuse(name, raw, "expected a whole number") from None
    if minimum is not None and value < minimum:
        raise _refuse(name, raw, f"expected a whole number of at least {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None,
              environ: Mapping[str, str] | None = None) -> float:
    raw = _raw(name, environ)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise _refuse(name, raw, "expected a number") from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        raise _refuse(name, raw, f"expected a number of at least {minimum:g}" if minimum is not None
                      else "expected a finite number")
    return value


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool:
    raw = _raw(name, environ)
    if not raw:
        return False
    try:
        return FLAG_VALUES[raw.lower()]
    except KeyError:
        raise _refuse(name, raw, "expected 1 or 0 (true/false, yes/no, on/off)") from None


def env_args(name: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """A command line or a list of flags, split as a POSIX shell would."""
    raw = _raw(name, environ)
    try:
        return shlex.split(raw)
    except ValueError as exc:  # an unclosed quote
        raise _refuse(name, raw, f"cannot split it as a shell would ({exc})") from None


def hf_jobs_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The endpoint template of a Hugging Face job's server: fields {job_id} and {port} only."""
    raw = _raw(HF_JOBS_ENDPOINT, environ)
    if not raw:
        return HF_JOBS_ENDPOINT_DEFAULT
    try:
        raw.format(job_id="j", port=1)
    except (KeyError, IndexError, ValueError):
        raise _refuse(HF_JOBS_ENDPOINT, raw, "expected a URL with no fields but {job_id} and {port}") from None
    if not raw.startswith(("http://", "https://")):
        raise _refuse(HF_JOBS_ENDPOINT, raw, "expected an http:// or https:// URL")
    return raw


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Read every variable above once: a command refuses a broken environment at its start,
    not in a worker process an hour later."""
    env_int(MAX_DOC_PAGES, 1, minimum=1, environ=environ)
    env_float(SERVE_HEALTH_TIMEOUT, 0.0, minimum=0.0, environ=environ)
    env_flag(SERVE_NO_P2P, environ)
    env_flag(TRUTH_OUTSIDE, environ)
    env_float(PROGRESS_EVERY, 10.0, minimum=0.0, environ=environ)
    for name in (SERVE_ARGS, VLLM_BIN, SGLANG_BIN):
        env_args(name, environ)
    hf_jobs_endpoint(environ)

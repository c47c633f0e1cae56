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
out = {}
base = dict(os.environ)
for name, plan in json.loads(sys.stdin.read()).items():
    os.environ.clear()
    os.environ.update({**base, **plan["env"]})
    try:
        args = make_arg_parser(FlexibleArgumentParser()).parse_args(plan["argv"])
        validate_parsed_serve_args(args)
        engine = AsyncEngineArgs.from_cli_args(args)
        for ref in engine.logits_processors or ():
            module, _, attr = str(ref).partition(":")
            getattr(importlib.import_module(module), attr)
    except BaseException as exc:  # argparse exits: SystemExit
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    out[name] = {"model": engine.model, "max_model_len": engine.max_model_len,
                 "mm_processor_kwargs": engine.mm_processor_kwargs,
                 "logits_processors": [str(r) for r in engine.logits_processors or ()]}
print(json.dumps(out))
"""


def names() -> list[str]:
    return sorted(p.name for p in list_profiles())


# Two plans the check must refuse (a check that cannot fail checks nothing): a misspelt flag, and a
# logits processor the release does not ship. Their names cannot be a profile's.
BAD = {"~typo": {"argv": ["m", "--max-modle-len", "10"], "env": {}},
       "~gone": {"argv": ["m", "--logits-processors", "vllm.model_executor.models.deepseek_ocr:NoSuchProcessor"],
                 "env": {}}}


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> tuple[dict, dict, str]:
    """Every profile's plan, what the release made of it, and what it said on stderr (one vLLM
    import for all, the two bad plans with them)."""
    python = the_lane()
    env = server_environ(python)
    plans = {name: plan_server(name, "vllm", str(model_dir("qwen2_5_vl")), None, [],
                               workdir=tmp_path_factory.mktemp(name), environ=env) for name in names()}
    asked = {**{n: {"argv": p.argv[3:], "env": p.env} for n, p in plans.items()}, **BAD}
    done = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=600, env=env,
                          input=json.dumps(asked))
    assert done.returncode == 0, done.stderr[-3000:]
    return plans, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize("profile", names())
def test_the_release_takes_the_profiles_serving_recipe(parsed, profile):
    plans, engines, _ = parsed
    plan, engine = plans[profile], engines[profile]
    assert plan.argv[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    if plan.recipe is not None:  # a by-version recipe: the part for the release that will run
        assert plan.recipe.version.version == "0.32.0"
    assert "error" not in engine, engine
    assert engine["model"] == str(model_dir("qwen2_5_vl"))
    if "--max-model-len" in plan.argv:
        assert engine["max_model_len"] == int(plan.argv[plan.argv.index("--max-model-len") + 1])
    if plan.args_text and "mm-processor-kwargs" in plan.args_text:
        assert engine["mm_processor_kwargs"], plan.args_text  # the args file's JSON reached the engine


def test_a_misspelt_flag_or_a_processor_the_release_lacks_is_refused(parsed):
    # The check itself can fail: what it would say of a recipe with a typo, or a class gone.
    _, out, stderr = parsed
    assert out["~typo"]["error"].startswith("SystemExit") and "unrecognized arguments" in stderr
    assert "NoSuchProcessor" in out["~gone"]["error"]

"""`vlmocr serve PROFILE`: start vLLM/SGLang for a profile; the logic lives in vlmocr.cluster.serve."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import List, Optional

import typer

from ..cluster.serve.hfjobs import HF_JOBS_FLAVOR, HF_JOBS_TIMEOUT, hf_job_plan
from ..cluster.serve.plan import DEFAULT_HOST, SERVERS, plan_server
from ..cluster.serve.process import DEFAULT_HEALTH_TIMEOUT
from ..cluster.serve.running import running_server
from ..exceptions import UsageError
from ..progress import console
from . import app


@app.command("serve")
def serve_command(
    profile: Optional[str] = typer.Argument(None, help="Model profile (name or .toml path); none with --stop."),
    extra: List[str] = typer.Argument(None, help="Extra server flags, after `--` (e.g. -- --max-num-seqs 64)."),
    server: str = typer.Option("vllm", "--server", help="vllm|sglang"),
    model_path: Optional[str] = typer.Option(None, "--model-path", help="Local model directory or repo id "
                                             "(default: the profile's model)."),
    revision: Optional[str] = typer.Option(None, help="Pinned model revision (default: the profile's)."),
    port: Optional[int] = typer.Option(None, help="Port (default: a free one from the OS)."),
    host: str = typer.Option(DEFAULT_HOST, help="Address to listen on."),
    print_only: bool = typer.Option(False, "--print", help="Print the environment and command; run nothing."),
    target: str = typer.Option("local", help="local|hf-jobs (a Hugging Face job: launched, followed until "
                               "ready, its endpoint printed; with --print the `hf jobs run` command)."),
    flavor: Optional[str] = typer.Option(None, help="hf-jobs: hardware flavor, xN suffix = N GPUs (default: the "
                                         f"profile's, else {HF_JOBS_FLAVOR})."),
    timeout: Optional[str] = typer.Option(None, help=f"hf-jobs: maximum job duration (default {HF_JOBS_TIMEOUT})."),
    image: Optional[str] = typer.Option(None, help="hf-jobs: container image (default: the profile's pin)."),
    stop: Optional[str] = typer.Option(None, "--stop", metavar="JOB", help="hf-jobs: cancel this job."),
    no_p2p: bool = typer.Option(False, "--no-p2p", help="GPUs without working peer-to-peer: "
                                "NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce."),
    health_timeout: float = typer.Option(DEFAULT_HEALTH_TIMEOUT, help="Seconds to wait for /health (hf-jobs: "
                                         "for the ready line in the job's log)."),
    log: Optional[Path] = typer.Option(None, help="Server log file (default: in its $TMPDIR work directory)."),
    served_model_name: Optional[str] = typer.Option(None, help="Name clients use (default: the profile's repo id)."),
    json_out: bool = typer.Option(False, "--json", help="Print the server's details as JSON on stdout."),
) -> int:
    """Start vLLM or SGLang for a profile, wait until healthy, serve until SIGINT/SIGTERM."""
    if server not in SERVERS:
        raise UsageError(f"--server {server!r}: use one of {', '.join(SERVERS)}")
    extra_args = list(extra or [])
    if stop is not None and target != "hf-jobs":
        raise UsageError("--stop JOB cancels a Hugging Face job: give --target hf-jobs")
    if profile is None and stop is None:
        raise UsageError("give a PROFILE (see `vlmocr profiles list`)")
    if target == "hf-jobs":
        # huggingface_hub: imported only now
        from ..cluster.serve.hfjob_launch import launch_hf_job, stop_hf_job

        if stop is not None:
            console.print(stop_hf_job(stop), markup=False)
            return 0
        assert profile is not None  # checked above: only --stop goes without one
        job_plan = hf_job_plan(profile, server, model_path, revision, extra_args, port=port, flavor=flavor,
                               timeout=timeout, image=image, no_p2p=no_p2p, served_name=served_model_name)
        if print_only:
            for warning in job_plan.warnings:
                console.print(f"warning: {warning}", markup=False)
            if job_plan.attention is not None:
                console.print(f"{job_plan.server}: {job_plan.attention.sentence()}", markup=False)
            print(shlex.join(job_plan.hf_command()), flush=True)
            console.print(f"Then: vlmocr run … --endpoint https://JOB_ID--{job_plan.port}.hf.jobs/v1 with your "
                          "HF token as the API key (VLMOCR_API_KEY).", markup=False)
            return 0
        job, _ = launch_hf_job(job_plan, ready_timeout=health_timeout, log=log)
        if json_out:
            print(json.dumps(job.details()), flush=True)
        else:
            print(f"Serving {job.model_name} at {job.endpoint} (HF job {job.id})", flush=True)
        console.print(f"Use it with: vlmocr run … --endpoint {job.endpoint} --model {job.model_name} and "
                      f"VLMOCR_API_KEY=$HF_TOKEN; it runs until its --timeout {job_plan.timeout} or "
                      f"`vlmocr serve --target hf-jobs --stop {job.id}`.", markup=False)
        return 0
    if target != "local":
        raise UsageError(f"--target {target!r}: use local or hf-jobs")
    assert profile is not None  # checked above: only --stop goes without one

    if print_only:
        plan = plan_server(profile, server, model_path, revision, extra_args, host=host, port=port,
                           no_p2p=no_p2p, served_name=served_model_name, log=log, write=False)
        for warning in plan.warnings:
            console.print(f"warning: {warning}", markup=False)
        if plan.attention is not None:
            console.print(f"{plan.server}: {plan.attention.sentence()}", markup=False)
        if plan.recipe is not None:
            console.print(plan.recipe.sentence(), markup=False)
        print(plan.shell_script(), end="", flush=True)
        return 0

    ready = False
    try:
        with running_server(profile, server, model_path, revision, extra_args, health_timeout, host=host,
                            port=port, no_p2p=no_p2p, served_name=served_model_name, log=log) as info:
            ready = True
            details = {"url": info.url, "model": info.model_name, "pid": info.pid, "log": str(info.log),
                       "server": info.server, "tensor_parallel": info.tensor_parallel, "versions": info.versions,
                       "attention": info.attention, "recipe": info.recipe}
            if json_out:
                print(json.dumps(details), flush=True)
            else:
                print(f"Serving {info.model_name} at {info.url} (pid {info.pid}, log {info.log})", flush=True)
            while info.alive():
                time.sleep(0.5)
            assert info.process is not None
            raise info.process.failure(f"{info.server} exited with code {info.process.poll()} while serving")
    except KeyboardInterrupt:
        if not ready:
            raise
        console.print("stopped on request")
        return 0

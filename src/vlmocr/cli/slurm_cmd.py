"""`vlmocr slurm submit | gate | release | status` and `vlmocr merge`; logic in vlmocr.cluster.

Every `vlmocr run` option passes through: give it to `vlmocr slurm submit` as you would to
`vlmocr run` (``--profile P --serve P --dpi 150 …``), optionally after ``--``. The options are
validated here with `vlmocr run`'s own parser before anything is submitted, and written into
the batch script shell-quoted. `--out`, `--manifest` and `--shard` belong to the slurm command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, List, Optional

import typer

from ..cluster.slurm.layout import SLURM_DIR
from ..cluster.slurm.script import default_stop_grace
from ..cluster.slurm.status import format_status, status
from ..cluster.slurm.submit import compress_ranges, submit, submit_grid
from ..exceptions import ExitCode, UsageError
from ..files import check_output_path
from ..progress import console
from ..reading.preflight import check_inputs
from ..runfolder.rundir import SHARDS
from . import (
    app,
    plain_typer,
    run_cmd,  # noqa: F401  (submit checks run options with run's own parser)
)
from .slurm_options import ARRAY, CPU_JOB, GATE, JOB, SlurmRequest, slurm_options

slurm_app = plain_typer(help="Run across a SLURM cluster: submit shards, gate them on quality, watch them.")
app.add_typer(slurm_app, name="slurm")

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}
_OWN = {"out": "--out", "manifest": "--manifest", "shard": "--shard"}


def _warn(msg: str) -> None:
    console.print(msg, markup=False)


def split_run_args(tokens: List[str]) -> tuple[list[str], list[str]]:
    """Paths and `vlmocr run` options from the tokens the slurm command did not know."""
    params, args = command_args("run", tokens, {
        name: f"{opt} is set by `vlmocr slurm` itself" + (" (each array task reads its own shard)"
                                                          if name == "shard" else "")
        for name, opt in _OWN.items()})
    from .run_cmd import check_job_options

    check_job_options(params)  # before anything is staged: the job would refuse it hours later
    return [str(p) for p in (params.get("paths") or [])], args


def command_args(command: str, tokens: List[str], own: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(the parsed parameters, the options) of `vlmocr COMMAND` from the tokens a slurm command
    passes on to it.

    Parsed with the command itself (an unknown or malformed option fails now, on the login
    node, not hours later in the queue), then written back from the parsed values: only options
    given on the command line, paths made absolute. An option named in ``own`` (parameter name →
    why) is refused."""
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    try:
        ctx = cmd.make_context(f"vlmocr {command}", list(tokens))
    except Exception as exc:  # click's UsageError / BadParameter
        msg = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        raise UsageError(f"in the options passed to `vlmocr {command}`: {msg}") from None
    args: list[str] = []
    for param in cmd.params:
        name = param.name or ""
        if getattr(param, "param_type_name", "") != "option":
            continue
        source = ctx.get_parameter_source(name)
        if source is None or source.name != "COMMANDLINE":
            continue
        if name in own:
            raise UsageError(own[name])
        value = ctx.params[name]
        opts = list(param.opts)
        if getattr(param, "is_flag", False):
            if value:
                args.append(opts[0])
            elif param.secondary_opts:  # type: ignore[attr-defined]
                args.append(param.secondary_opts[0])  # type: ignore[attr-defined]
            continue
        values = value if getattr(param, "multiple", False) else [value]
        for v in values:
            if v is None:
                continue
            if isinstance(v, Path):
                v = os.path.abspath(v)
            items = list(v) if isinstance(v, (tuple, list)) else [v]
            args.append(opts[0])
            args.extend(str(i) for i in items)
    return dict(ctx.params), args


def _with_stop_grace(run_args: list[str], signal_lead: int) -> list[str]:
    if "--stop-grace" in run_args:
        return run_args
    return [*run_args, "--stop-grace", f"{default_stop_grace(signal_lead):g}"]


@slurm_app.command("grid", context_settings=PASS_THROUGH)
@slurm_options(JOB)
def grid_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (the grid goes to RUN/grid)."),
    *,
    slurm: SlurmRequest,
) -> int:
    """One job reading a prompt × dpi grid against one server it starts (the model loads once).

    vlmocr slurm grid --out RUN [SLURM OPTIONS] -- --truth T --serve P --profile A,B --dpi 150,200 …

    Everything after the SLURM options is given to `vlmocr grid` on the node; results in RUN/grid.
    """
    result = submit_grid(out, [a for a in ctx.args if a != "--"], options=slurm.options, dry_run=slurm.dry_run,
                         python=slurm.python)
    if slurm.json:
        print(json.dumps(result))
    else:
        print(f"grid job {result['job_id'] or '(dry run)'}: {result['script']}")
    return int(ExitCode.ok)


@slurm_app.command("fetch")
@slurm_options(CPU_JOB)
def fetch_command(
    target: str = typer.Argument(..., metavar="REPO|PROFILE", help="Repo id (ORG/NAME), or a profile: its model "
                                 "and pinned revision."),
    to: Path = typer.Option(..., "--to", help="Directory to download into (new, empty, or an earlier fetch of it)."),
    revision: Optional[str] = typer.Option(None, "--revision", help="The commit to pin: a full 40-hex sha "
                                           "(default: the profile's pinned revision)."),
    include: Optional[List[str]] = typer.Option(None, "--include", help="Only files matching this glob (repeatable)."),
    allow_branch: bool = typer.Option(False, "--allow-branch", help="Accept a branch or tag: the job resolves it "
                                      "and records the commit."),
    endpoint: Optional[str] = typer.Option(None, help="Hub URL (default: $HF_ENDPOINT or https://huggingface.co)."),
    *,
    slurm: SlurmRequest,
) -> int:
    """Download a model at a pinned commit in a CPU job, not on the login node.

    vlmocr slurm fetch REPO|PROFILE --to DIR [--revision SHA] --partition cpu-short

    Checked here without a network call; the job runs `vlmocr models fetch` (script and log in
    DIR's parent/slurm, HF_HOME beside DIR unless set). Then serve DIR offline.
    """
    from ..cluster.slurm.fetch_job import submit_fetch

    job = submit_fetch(target, to, revision=revision, endpoint=endpoint, include=list(include or []),
                       allow_branch=allow_branch, options=slurm.options, python=slurm.python,
                       dry_run=slurm.dry_run, argv=sys.argv[1:])
    if slurm.json:
        print(json.dumps(job.as_dict()), flush=True)
        return ExitCode.ok
    if job.job_id:
        print(f"Submitted fetch job {job.job_id}: {job.repo}@{job.revision} -> {job.dest}; log {job.log}",
              flush=True)
    else:
        print(f"dry run: wrote {job.script}; nothing submitted (would run, in {job.script.parent}: "
              f"{' '.join(job.submission)})", flush=True)
    print("When it has ended:", flush=True)
    for line in job.follow_up():
        print(f"  {line}", flush=True)
    return ExitCode.ok


@slurm_app.command("submit", context_settings=PASS_THROUGH)
@slurm_options(ARRAY)
def submit_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (shards go to RUN/shards/K)."),
    shards: int = typer.Option(..., help="Number of array tasks; task K reads --shard K/N."),
    manifest: Optional[Path] = typer.Option(None, help="CSV or JSONL: doc_id,path[,pages,dpi,language]."),
    part: Optional[str] = typer.Option(None, "--part", help="Submit these documents as part NAME of RUN: one more "
                                       "bulk job beside the others (own shards RUN/shards/NAME-K, partition, "
                                       "options), live at the same time. A document is in one part only."),
    *,
    slurm: SlurmRequest,
    hold: bool = typer.Option(False, "--hold", help="Submit held: start with `scontrol release JOB`."),
    dependency: Optional[str] = typer.Option(None, help="SLURM dependency, e.g. afterok:123."),
    all_shards: bool = typer.Option(False, "--all-shards", help="Submit every shard, also those already complete."),
) -> int:
    """Stage inputs, write an sbatch array script under RUN/slurm, submit it.

    vlmocr slurm submit [PATHS]... | --manifest M  --out RUN --shards N [SLURM OPTIONS] [RUN OPTIONS]

    Every `vlmocr run` option passes through (--profile P --endpoint URL, --serve P, --dpi …),
    also after `--`. Run the same command again to resume (complete shards are skipped).
    With --part NAME, several bulk jobs share one RUN (e.g. one per partition); resubmitting a
    part resumes that part only, also on another --partition; `merge` and `status` see them all.
    """
    paths, run_args = split_run_args(list(ctx.args))
    if not paths and manifest is None:
        raise UsageError("give files, folders or --manifest")
    check_inputs(paths)  # before anything is staged under RUN
    check_output_path(out, "--out", folder=True)
    run_args = _with_stop_grace(run_args, slurm.options.signal_lead)
    sub = submit(out, paths=paths, manifest=manifest, shards=shards, run_args=run_args, options=slurm.options,
                 hold=hold, dependency=dependency, dry_run=slurm.dry_run, all_shards=all_shards,
                 python=slurm.python, argv=sys.argv[1:], warn=_warn, part=part)
    run_dir = Path(out).resolve()
    result: dict[str, Any] = {"run_dir": str(run_dir), "part": part, "script": str(sub.script), "job_id": sub.job_id,
                              "array": sub.array, "skipped_shards": sub.skipped_shards, "held": hold,
                              "sbatch": sub.command,
                              "run_args": run_args, "note": sub.note}
    if slurm.json:
        print(json.dumps(result), flush=True)
        return ExitCode.ok
    if sub.skipped_shards and sub.job_id:
        _warn(f"shard(s) {compress_ranges(sub.skipped_shards)} owe nothing under this command (last outcome 0; "
              "9: unreadable inputs listed in their bad_inputs.csv; or 2 from a CPU reading): not resubmitted")
    if sub.job_id:
        what = f"part {part} as bulk job" if part else "bulk job"
        where = f"{part}-K" if part else "K"
        print(f"Submitted {what} {sub.job_id} (array {sub.array}{', held' if hold else ''}): "
              f"shards -> {run_dir / SHARDS}/{where}, logs {run_dir / SLURM_DIR / 'logs'}/{sub.job_id}_K.out", flush=True)
    else:
        print(f"{sub.note}. Script: {sub.script}", flush=True)
        if slurm.dry_run:
            print("would run (in " + str(sub.script.parent) + "): " + " ".join(sub.command), flush=True)
    return ExitCode.ok


def _truth_said(res: dict[str, Any]) -> str:
    return f"{res['truth_pages']} truth pages matched" if res["truth_pages"] else "no truth: its --require gates decide"


@slurm_app.command("gate", context_settings=PASS_THROUGH)
@slurm_options(GATE)
def gate_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--out", "-o", help="Run directory (gate run in RUN/gate, bulk in RUN/shards/K)."),
    shards: int = typer.Option(..., help="Array tasks of the bulk job."),
    truth: Optional[Path] = typer.Option(None, help="Truth: a folder (name.txt beside name.png; name.pN.txt for "
                                                   "page N) or a CSV (doc_id|image,page,truth_path|text). Without it, "
                                                   "--require gates that need no truth decide alone."),
    max_cer: Optional[float] = typer.Option(None, help="With --truth: release the bulk only if the gate's CER is at "
                                                       "most this."),
    manifest: Optional[Path] = typer.Option(None, help="Gate documents: a manifest (doc_id,path[,pages,dpi])."),
    gate: Optional[List[str]] = typer.Option(None, help="Gate documents: a file or folder (repeatable)."),
    bulk_manifest: Optional[Path] = typer.Option(None, help="Bulk documents (plus any PATHS given)."),
    require: Optional[List[str]] = typer.Option(None, help="Another gate in `vlmocr evaluate --gate` syntax, "
                                                      "e.g. 'cer_hi<=0.05', or without truth 'unknown_words<=0.08' "
                                                      "(the share of words not in their language's word list) "
                                                      "(repeatable)."),
    after_gate: bool = typer.Option(False, "--after-gate", help="Also make the bulk depend on the gate (afterany)."),
    release_by_hand: bool = typer.Option(False, "--release-by-hand",
                                         help="Submit no release job: decide with `vlmocr slurm release RUN`."),
    *,
    slurm: SlurmRequest,
) -> int:
    """Submit a gate run and the bulk array held.

    vlmocr slurm gate --manifest gate.csv --truth T --max-cer X | --require 'unknown_words<=0.08'
    [PATHS]... | --bulk-manifest M --out RUN --shards N

    A small release job, queued after the gate (afterany), then scores the gate and releases or
    cancels the bulk: nothing waits on the login node. `vlmocr slurm release RUN` does the same
    by hand (with --release-by-hand, or before the job). `vlmocr run`
    options pass through to both jobs (the gate tests exactly the bulk's settings).
    """
    paths, run_args = split_run_args(list(ctx.args))
    if manifest is None and not gate:
        raise UsageError("give the gate documents with --manifest or --gate PATH")
    if not paths and bulk_manifest is None:
        raise UsageError("give the bulk documents as PATHS or --bulk-manifest")
    run_args = _with_stop_grace(run_args, slurm.options.signal_lead)
    from ..cluster.slurm.gate import submit_gate

    res = submit_gate(out, gate_paths=list(gate or []), gate_manifest=manifest, truth=truth, max_cer=max_cer,
                      bulk_paths=paths, bulk_manifest=bulk_manifest, shards=shards, run_args=run_args,
                      options=slurm.options, after_gate=after_gate, dry_run=slurm.dry_run, python=slurm.python,
                      argv=sys.argv[1:], checks=list(require or []), warn=_warn,
                      release_job=not release_by_hand)
    if slurm.json:
        print(json.dumps(res), flush=True)
    elif slurm.dry_run:
        print(f"dry run: wrote {res['gate_script']} and {res['bulk_script']}; nothing submitted "
              f"({_truth_said(res)})", flush=True)
    else:
        then = (f"release job {res['release_job']} releases or cancels it when the gate has ended"
                if res.get("release_job") else f"when the gate has ended: vlmocr slurm release {Path(out)}")
        print(f"Submitted gate job {res['gate_job']} ({_truth_said(res)}) and bulk job "
              f"{res['bulk_job']} (array {res['bulk_array']}, held); {then}", flush=True)
    return ExitCode.ok


@slurm_app.command("release")
def release_command(
    run: Path = typer.Argument(..., help="Run directory of `vlmocr slurm gate`."),
    max_cer: Optional[float] = typer.Option(None, help="Override the threshold given at submission."),
    wait: float = typer.Option(0.0, help="Wait up to this many seconds for the gate job to end."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Score and say what would happen; touch no job."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable decision on stdout."),
) -> int:
    """Score the gate run; release the held bulk jobs, or cancel them (exit 4), saying why."""
    from ..cluster.slurm.gate import release

    decision = release(run, max_cer=max_cer, wait=wait, dry_run=dry_run)
    if json_out:
        print(json.dumps(decision.as_dict()), flush=True)
    else:
        for p in decision.score.worst:
            if p["cer"] > 0:
                _warn(f"  {p['doc_id']} page {p['page']}: CER {p['cer']:.3f} ({p['status']})")
        print(decision.message, flush=True)
    return ExitCode.ok if decision.passed else ExitCode.gate_failed


@slurm_app.command("status")
def status_command(
    run: Path = typer.Argument(..., help="Run directory of `vlmocr slurm submit` or `gate`."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable status on stdout."),
) -> int:
    """Jobs (squeue; sacct or sacct -c) and per shard: pages final / total, review, failed."""
    st = status(run)
    if json_out:
        print(json.dumps(st), flush=True)
    else:
        print(format_status(st), flush=True)
    return ExitCode.ok


@slurm_app.command("describe", context_settings=PASS_THROUGH)
@slurm_options(JOB)
def describe_command(
    ctx: typer.Context,
    serve: str = typer.Option(..., "--serve", help="Profile of the describing model: the job starts its server."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where the job's slurm/ folder goes "
                                       "(default: RUN, or LIB)."),
    *,
    slurm: SlurmRequest,
) -> int:
    """One job describing figures against a server it starts for --serve PROFILE.

    vlmocr slurm describe RUN | --library LIB --serve P [--out DIR] [SLURM OPTIONS] [DESCRIBE OPTIONS]

    Every other `vlmocr describe` option passes through (--profile, --dpi, --max-figures …, also
    after --), checked here first. The script and its log go to HOME/slurm (HOME: --out, else
    RUN, else LIB); with no figure owed the job starts no server.
    """
    from ..cluster.slurm.describe_job import submit_describe
    from .describe_cmd import describe_options  # also registers `describe`, whose parser checks the options

    params, args = command_args("describe", [a for a in ctx.args if a != "--"], {
        "endpoint": "give --serve PROFILE or --endpoint URL, not both (the job serves its own model)"})
    run_dir, library = params.get("run_dir"), params.get("library")
    if out is not None:
        check_output_path(out, "--out", folder=True)
    if library is not None and run_dir is None:
        from ..library.catalog import Catalog

        with Catalog(Path(library), readonly=True):  # a usage error when LIB holds no catalog
            pass
    result = submit_describe(run_dir, library, describe_options(params), serve, args, out=out,
                             options=slurm.options, dry_run=slurm.dry_run, python=slurm.python)
    if slurm.json:
        print(json.dumps(result), flush=True)
    elif result["job_id"]:
        print(f"Submitted describe job {result['job_id']}: log {Path(str(result['home'])) / SLURM_DIR / 'logs'}/"
              f"describe_{result['job_id']}.out", flush=True)
    else:
        argv = result["sbatch"] if isinstance(result["sbatch"], list) else []
        print(f"dry run: wrote {result['script']}; nothing submitted (would run, in "
              f"{Path(str(result['script'])).parent}: {' '.join(map(str, argv))})", flush=True)
    return ExitCode.ok


@app.command("merge")
def merge_command(
    run: Path = typer.Argument(..., help="Run directory holding shards/*/ (from `vlmocr slurm submit`)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write (default RUN/merged)."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable result on stdout."),
) -> int:
    """Combine the shard run directories into one (RUN/merged: pages.jsonl, docs/, run.json)."""
    from ..cluster.merge import merge

    result = merge(run, out, warn=_warn)
    print(json.dumps(result.as_dict()) if json_out else result.line(), flush=True)
    return ExitCode.ok

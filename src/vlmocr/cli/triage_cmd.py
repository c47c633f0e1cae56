"""`vlmocr triage`, `vlmocr plan`, `vlmocr manifest`: know the corpus, estimate, order it.
The logic lives in vlmocr.corpus.triage, .plan, .partitions, .placement and .manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..corpus.plan import DEFAULT_CORES, DEFAULT_CORES_PER_TASK
from ..corpus.triage import DEFAULT_CHECK_PAGES
from ..exceptions import ExitCode, UsageError
from ..progress import console
from . import app
from .output import emit


@app.command("triage")
def triage_command(
    paths: List[str] = typer.Argument(None, help="Files or folders (recursive), as for `vlmocr run`."),
    manifest: Optional[Path] = typer.Option(None, help="CSV or JSONL: doc_id,path[,pages,dpi,language]."),
    out: Path = typer.Option(..., "--out", "-o", help="The triage CSV to write."),
    sheets: Optional[Path] = typer.Option(None, "--sheets", help="Write contact sheets (PNG) into this folder."),
    sheet_block: int = typer.Option(24, min=1, help="Pages per contact sheet."),
    check_pages: int = typer.Option(DEFAULT_CHECK_PAGES, min=0, help="Pages per document whose text layer and images are "
                                    "checked, spread evenly (0 = all; --sheets checks all)."),
    workers: Optional[int] = typer.Option(None, min=1, help="Worker processes (default: all cores; 1 for small corpora)."),
    osd: int = typer.Option(0, "--osd", min=0, help="Scanned pages per document whose script Tesseract detects "
                            "(Fraktur, Greek…; ~1-2.5 s a page; 0: a scan's script stays unknown)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out if it exists (never inside a run or library folder)."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> int:
    """One CSV row per document: pages, text layer, scans, sizes, resolution, duplicates, language,
    script and the --lang to read it with."""
    from ..corpus.triage import TriageOptions, triage
    from ..files import check_new_output

    check_new_output(out, "--out", overwrite=overwrite)
    if sheets is not None:
        check_new_output(sheets, "--sheets", folder=True)
    opts = TriageOptions(check_pages=check_pages, sheets_dir=str(sheets) if sheets else None, sheet_block=sheet_block,
                         osd_pages=osd)
    summary = triage(list(paths or []), out, manifest=manifest, opts=opts, workers=workers, progress=True)
    if summary.unreadable:
        bad = ", ".join(f"{k}={v}" for k, v in sorted(summary.statuses.items()) if k != "ok")
        console.print(f"[yellow]{summary.unreadable} unreadable document(s): {bad} (see the status and reason columns)")
    emit(summary.as_dict(), summary.line(), json_out)
    return int(ExitCode.ok)


@app.command("plan")
def plan_command(  # noqa: PLR0915 (long: to be split)
    triage_csv: Path = typer.Option(..., "--triage", help="A CSV written by `vlmocr triage`."),
    pages_per_hour: Optional[float] = typer.Option(None, "--pages-per-hour", "--rate",
                                                   help="OCR pages per hour on one GPU."),
    measure: bool = typer.Option(False, "--measure", help="Measure the rate now on a sample of the corpus: "
                                 "against --endpoint (pages/h per GPU), or with a CPU --engine (pages/h per core)."),
    endpoint: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL to measure against."),
    engine: Optional[str] = typer.Option(None, "--engine", help="With --measure and no --endpoint: the CPU engine to "
                                         "measure (auto, tesseract, rapidocr…; as for `run`)."),
    workers: int = typer.Option(1, "--workers", min=1, help="Worker processes for a CPU --measure (the rate per "
                                "core is their rate ÷ this)."),
    lang: Optional[str] = typer.Option(None, "--lang", help="Languages for a CPU --measure (default: triage's "
                                       "suggestion per document, else as for `run`)."),
    cores: str = typer.Option(",".join(map(str, DEFAULT_CORES)), "--cores", help="Core counts to estimate for (CPU)."),
    cores_per_task: int = typer.Option(DEFAULT_CORES_PER_TASK, "--cores-per-task", min=1,
                                       help="CPUs of one SLURM task in the proposed CPU array."),
    profile: Optional[List[str]] = typer.Option(None, help="Model profile for --measure; with --partitions, the "
                                                "profiles to place (repeatable; default all)."),
    model: Optional[str] = typer.Option(None, help="Model name served by the endpoint."),
    sample: int = typer.Option(20, min=1, help="Pages to read for --measure."),
    concurrency: Optional[int] = typer.Option(None, min=1, help="Requests in flight for --measure."),
    endpoint_gpus: int = typer.Option(1, min=1, help="GPUs behind the measured endpoint (the rate is divided by it)."),
    gpus: str = typer.Option("1,2,4,8", help="GPU counts to estimate for."),
    overnight_hours: float = typer.Option(12.0, help="What one night on a local machine is, in hours."),
    retry_overhead: float = typer.Option(0.30, min=0.0, help="Extra share of time for retries."),
    partitions: Optional[Path] = typer.Option(None, "--partitions", help="Where models fit: a partitions TOML, or "
                                              "the output of `sinfo -h -o \"%P|%G|%l|%D|%c|%m\"` (- = stdin)."),
    manifest: Optional[Path] = typer.Option(None, help="With --partitions: the documents to split, in priority order "
                                            "(default: the triage CSV's)."),
    split_out: Optional[Path] = typer.Option(None, "--split-out", help="With --partitions: write one manifest per "
                                             "partition here."),
    run: str = typer.Option("RUN", "--run", help="With --partitions: the run directory in the proposed commands."),
    pilot: Optional[Path] = typer.Option(None, "--pilot", help="A pilot run over a sample of the corpus, read with "
                                         "the tiers the corpus will be (`run --engine tesseract,rapidocr --vlm-tier`): "
                                         "the share of pages per tier and its engine time, as core-hours and GPU-hours "
                                         "(at --pages-per-hour on one GPU) for the whole corpus."),
    cpu_price: Optional[float] = typer.Option(None, "--cpu-price", min=0.0, help="With --pilot: the price of a "
                                              "core-hour (any currency): each tier's cost per 1,000 pages."),
    gpu_price: Optional[float] = typer.Option(None, "--gpu-price", min=0.0, help="With --pilot: the price of a GPU-hour."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable plan on stdout."),
) -> int:  # noqa: PLR0915 (long: to be split)
    """Pages to OCR vs served by the text layer, hours on 1…N GPUs, and where to run it; with
    --partitions, which partitions hold each profile's model and how to split the pages; with
    --pilot, each tier's share of the pages, hours and cost."""
    from ..corpus.plan import Plan, load_corpus, make_cpu_plan, make_plan, parse_gpus, render_plan
    from ..engines.registry import HTTP_ENGINE
    from ..machine import available_cores
    from ..trials.rate import measure as measure_rate

    profiles = list(profile or [])
    if split_out is not None:
        from ..files import check_new_output

        check_new_output(split_out, "--split-out", folder=True)
    if (manifest or split_out) and partitions is None:
        raise UsageError("--manifest and --split-out go with --partitions FILE")
    counts = parse_gpus(gpus)
    parts = None
    if partitions is not None:
        import sys

        from ..corpus.partitions import load_partitions

        parts = load_partitions(partitions, sys.stdin.read() if str(partitions) == "-" else None)
    corpus = load_corpus(triage_csv)
    if pilot is not None:
        if measure or parts is not None:
            raise UsageError("--pilot plans from a finished pilot run: leave out --measure and --partitions")
        from ..corpus.tiers import make_tier_plan, render_tier_plan

        tier_plan = make_tier_plan(corpus, pilot, pages_per_hour, cpu_price, gpu_price)
        if json_out:
            print(json.dumps(tier_plan.as_dict()), flush=True)
        else:
            print(render_tier_plan(tier_plan), end="", flush=True)
        return int(ExitCode.ok)
    if cpu_price is not None or gpu_price is not None:
        raise UsageError("--cpu-price and --gpu-price go with --pilot RUN")
    measurement = None
    rate: Optional[float] = None
    if measure and engine is not None and engine != HTTP_ENGINE:
        if endpoint:
            raise UsageError(f"--engine {engine} reads on this machine's CPU: leave out --endpoint")
        if pages_per_hour is not None:
            raise UsageError("give --pages-per-hour or --measure, not both")
        if parts is not None:
            raise UsageError("--partitions places GPU models: leave it out when measuring a CPU --engine")
        measurement = measure_rate(triage_csv, engine=engine, workers=workers, lang=lang, sample=sample,
                                   progress=True)
        cpu_plan = make_cpu_plan(corpus, measurement, parse_gpus(cores, "--cores"), local_cores=available_cores(),
                             cores_per_task=cores_per_task, retry_overhead=retry_overhead,
                             overnight_hours=overnight_hours, manifest=str(manifest) if manifest else "MANIFEST",
                             run=run)
        if json_out:
            print(json.dumps(cpu_plan.as_dict()), flush=True)
        else:
            print(render_plan(cpu_plan), end="", flush=True)
        return int(ExitCode.ok)
    if engine is not None and not measure:
        raise UsageError("--engine goes with --measure")
    if measure:
        if not endpoint:
            raise UsageError("--measure needs --endpoint URL (a VLM endpoint), or --engine ENGINE to measure a CPU "
                             "engine on this machine")
        if pages_per_hour is not None:
            raise UsageError("give --pages-per-hour or --measure, not both")
        if len(profiles) > 1:
            raise UsageError("--measure reads with one --profile")
        measurement = measure_rate(triage_csv, endpoint, profile=profiles[0] if profiles else None, model=model,
                                   sample=sample, concurrency=concurrency, progress=True)
        rate = measurement.pages_per_hour / endpoint_gpus
        source = (f"measured now: {measurement.pages} pages in {measurement.seconds:.1f} s against {endpoint}, "
                  f"profile {measurement.profile}" + (f", ÷{endpoint_gpus} GPUs" if endpoint_gpus > 1 else ""))
    elif pages_per_hour is not None:
        rate, source = pages_per_hour, "given with --pages-per-hour"
    elif parts is None:
        raise UsageError("give a rate: --pages-per-hour N, or --measure --endpoint URL [--profile P]")
    plan: Plan | None = None
    if rate is not None:
        plan = make_plan(corpus, rate, counts, rate_source=source, retry_overhead=retry_overhead,
                         overnight_hours=overnight_hours, measurement=measurement)
    placed = None
    if parts is not None:
        from ..corpus.placement import plan_partitions
        from ..profiles import list_profiles, load_profile

        chosen = [load_profile(name) for name in profiles] if profiles else list_profiles()
        placed = plan_partitions(parts, [(p.name, p.memory.min_gpu_gb if p.memory else None) for p in chosen],
                                 triage_csv, corpus.ocr_pages, rate, retry_overhead, manifest=manifest,
                                 split_out=split_out, run=run,
                                 fp8=frozenset(p.name for p in chosen if p.memory and p.memory.dtype.startswith("fp8")))
    if json_out:
        data = plan.as_dict() if plan is not None else {}
        if placed is not None:
            data["partitions"] = placed.as_dict()
        print(json.dumps(data), flush=True)
        return int(ExitCode.ok)
    if plan is not None:
        print(render_plan(plan), end="", flush=True)
    if placed is not None:
        from ..corpus.placement import render_partition_plan

        print(("\n" if plan is not None else "") + render_partition_plan(placed), end="", flush=True)
    return int(ExitCode.ok)


@app.command("manifest")
def manifest_command(
    triage_csv: Path = typer.Option(..., "--triage", help="A CSV written by `vlmocr triage`."),
    out: Path = typer.Option(..., "--out", "-o", help="The manifest CSV to write (for `vlmocr run --manifest`)."),
    priority_file: Optional[Path] = typer.Option(None, help="Doc ids or paths, one a line, most important first."),
    priority_column: Optional[str] = typer.Option(None, help="A numeric column added to the triage CSV (1 first)."),
    order: str = typer.Option("fewest-pages", help="Then: fewest-pages | most-pages | path | triage."),
    stage: Optional[Path] = typer.Option(None, "--stage", help="Make ASCII-named symlinks here and point the manifest at them."),
    skipped: Optional[Path] = typer.Option(None, "--skipped", help="Also write the skipped documents to this CSV."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --out and --skipped if it exists "
                                   "(never inside a run or library folder)."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable report on stdout."),
) -> int:
    """A run manifest in priority order, without duplicates and unreadable files."""
    from ..corpus.manifest import build_manifest
    from ..files import check_new_output

    check_new_output(out, "--out", overwrite=overwrite)
    if skipped is not None:
        check_new_output(skipped, "--skipped", overwrite=overwrite)
    if stage is not None:
        check_new_output(stage, "--stage", folder=True)
    report = build_manifest(triage_csv, out, priority_file=priority_file, priority_column=priority_column,
                            order=order, stage=stage, skipped_out=skipped)
    shown = 20
    for why in ("duplicate", "unreadable"):
        items = [s for s in report.skipped if (s["why"] == "duplicate") == (why == "duplicate")]
        for s in items[:shown]:
            console.print(f"skipped {s['doc_id']}: {s['why']} ({s['detail']})")
        if len(items) > shown:
            console.print(f"… and {len(items) - shown} more {why} documents" + ("" if skipped else " (--skipped F lists all)"))
    if report.priority_not_found:
        console.print(f"[yellow]{len(report.priority_not_found)} priority entries match no readable, unique "
                      f"document: {', '.join(report.priority_not_found[:10])}")
    if report.originals:
        console.print(f"original paths: {report.originals}")
    emit(report.as_dict(), report.line(), json_out)
    return int(ExitCode.ok)

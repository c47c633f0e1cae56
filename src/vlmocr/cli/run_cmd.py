"""`vlmocr run`: read every page owed; the logic lives in vlmocr.reading.scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, ContextManager, List, Optional

import typer

from ..engines.choice import AUTO_RULE
from ..engines.registry import ENGINE_CHOICES, ocr_engine_names
from ..exceptions import UsageError
from ..progress import RunProgress, console
from ..reading.preflight import check_run
from ..reading.scheduler import DocumentFilter
from ..reading.scheduler import run as run_pages
from ..settings.config import Endpoint, RunConfig, load_config
from . import app


@app.command("run")
def run_command(
    paths: List[str] = typer.Argument(None, help="Files or folders (recursive)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory."),
    manifest: Optional[Path] = typer.Option(None, help="CSV or JSONL: doc_id,path[,pages,dpi,language]."),
    engine: Optional[str] = typer.Option(None, help="|".join(ENGINE_CHOICES)),
    ocr_engine: Optional[str] = typer.Option(
        None, help=f"What `auto` reads scans with: auto ({AUTO_RULE}) | {ocr_engine_names()}."),
    rotate_pages: Optional[str] = typer.Option(
        None, "--rotate-pages", help="auto: a scan that reads badly is checked for a page on its side or upside "
        "down (Tesseract's OSD) and read again turned (the record says so) | always: and every page is asked of "
        "OSD before it is read or sent to a VLM (0.3-2.5 s of CPU a page: for a box of scans fed every which "
        "way, read by a VLM) | off: read pages as they lie."),
    deskew: Optional[str] = typer.Option(
        None, "--deskew", help="auto: a page askew by up to 15 degrees is straightened before a CPU engine reads "
        "it (the record's `skew` says by how much) | on: and before it is sent to a VLM (costs the client "
        "~10 % of its feed rate) | off: read pages as they lie."),
    clean: bool = typer.Option(
        False, "--clean", help="Clean each scan before it is read or sent: paper shade flattened, Sauvola "
        "binarisation, specks removed (the page's flags say so). Off by default: measure it on a few pages "
        "with truth first (it is the scan, not the text: for the text see `vlmocr clean`)."),
    repair: Optional[str] = typer.Option(
        None, "--repair", help="auto: a scan covered in specks is despeckled before a CPU engine reads it; one "
        "whose reading fails its signal is measured for a lighter layer of strokes (the verso bleeding through) "
        "and for lines too small, repaired, and read once more; the better reading is kept and the page's flags "
        "say so (repaired:despeckle, repaired:layers+enlarge) | off: read as scanned."),
    align_with: Optional[str] = typer.Option(
        None, "--align-with", help="tesseract | rapidocr: a VLM's answer gets word positions (for ALTO, hOCR, "
        "PAGE-XML and a searchable PDF): each page is also read by this CPU engine and the answer's words are "
        "placed on its word boxes (the record's positions.aligned: the share placed). Costs that engine's "
        "time a page on the client's CPU."),
    vlm_tier: bool = typer.Option(
        False, "--vlm-tier", help="A VLM as the last tier: the CPU engine (--engine) reads every page, and the "
        "pages whose reading fails its signal are sent to the VLM (--endpoint, --profile) too; the better "
        "reading by the signal is kept (the record's `tiers` lists each)."),
    cpu_tiers_from: Optional[str] = typer.Option(
        None, "--cpu-tiers-from", metavar="RUN", help="With --vlm-tier: the VLM tier as a pass of its own (a GPU "
        "job after a CPU one): each page's CPU reading is taken from RUN, an earlier run with the same --engine "
        "and settings, so only the pages RUN left for review are read, by the VLM. Pages RUN has no reading of "
        "with these settings are read by the CPU engine here."),
    endpoint: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1"),
    model: Optional[str] = typer.Option(None, help="Model name served by the endpoint."),
    profile: Optional[str] = typer.Option(None, help="Model profile (see `vlmocr profiles list`)."),
    dpi: Optional[float] = typer.Option(None, help="Render PDFs at this resolution (default 200)."),
    longest_side: Optional[int] = typer.Option(None, help="Scale pages so the longest side has this many px."),
    max_pixels: Optional[int] = typer.Option(None, help="Pixel cap per page image (bigger pages are downscaled)."),
    lang: Optional[str] = typer.Option(None, help="Tesseract languages, e.g. deu+eng."),
    workers: Optional[int] = typer.Option(None, help="CPU worker processes (default: all cores, or fewer "
                                                     "when memory holds fewer of the engine's workers)."),
    concurrency: Optional[int] = typer.Option(None, help="Requests in flight for an HTTP engine."),
    shard: Optional[str] = typer.Option(None, help="K/N: read only this stable share of the documents."),
    force: bool = typer.Option(False, "--force", help="Re-read pages that already have a final record."),
    force_bad: bool = typer.Option(False, "--force-bad", help="Read bad_input pages again (after fixing the files "
                                   "RUN/bad_inputs.csv lists)."),
    reread: bool = typer.Option(False, "--reread", help="Make these settings the run folder's reading when it holds "
                                "another (engine, model, prompt, dpi …): pages are read again with them (records "
                                "already made with them are kept), and docs/, evaluate, report, export follow."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
    serve: Optional[str] = typer.Option(None, help="Start a server for this profile, run, stop it."),
    target: str = typer.Option("local", help="--serve's server: local|hf-jobs (a Hugging Face job, cancelled "
                               "when the run ends; HF_TOKEN from the environment)."),
    stop_grace: Optional[float] = typer.Option(None, help="Seconds pages in flight may finish after SIGTERM."),
    server_kind: Optional[str] = typer.Option(None, help="vllm|sglang|openai (default: detected from /v1/models)."),
    request_timeout: Optional[float] = typer.Option(None, help="Seconds per HTTP request."),
    max_retries: Optional[int] = typer.Option(None, help="HTTP retries per request."),
    no_retry: bool = typer.Option(False, "--no-retry", help="First pass only; review pages wait for --retry-only."),
    retry_only: bool = typer.Option(False, "--retry-only", help="Only the retry ladder over review pages."),
    max_fallback: Optional[float] = typer.Option(None, help="Mark documents with a larger share of fallback pages."),
    library: Optional[Path] = typer.Option(None, help="Skip documents this library already holds."),
    pages_per_request: Optional[int] = typer.Option(None, help="Pages per request (profiles that support it)."),
    adaptive: Optional[bool] = typer.Option(None, "--adaptive/--fixed-concurrency",
                                            help="Size concurrency from the server's /metrics (default on)."),
    config: Optional[Path] = typer.Option(None, "--config", help="TOML file with settings."),
) -> int:
    """Read every page of every document; resumable, one record per finished page."""
    cfg = load_config(run_settings(locals()), config)
    check_run(cfg)  # inputs, --out, --profile: refused before a folder is made or a server started
    if target not in ("local", "hf-jobs"):
        raise UsageError(f"--target {target!r}: use local or hf-jobs")
    if target == "hf-jobs" and not cfg.serve:
        raise UsageError("--target hf-jobs is where --serve starts its server: give --serve PROFILE")
    serve_for_run: Callable[[RunConfig], ContextManager[tuple[RunConfig, Endpoint | None]]]
    if target == "hf-jobs":  # only now: these are heavy and rarely needed
        from ..cluster.serve.hfjob_launch import serve_hf_job_for_run as serve_for_run
    else:
        from ..cluster.serve.running import serve_for_run
    from ..reading.settled import owes_nothing  # here: it imports the VLM reader

    settled = owes_nothing(cfg)  # before the endpoint is asked or a server started
    if settled is not None:
        console.print("nothing owed: every page has a final record under these settings "
                      f"({'no server started' if cfg.serve else 'the endpoint is not asked'})", highlight=False)
        summary = run_pages(cfg, RunProgress(enabled=True), skip=_held_by(cfg.library), reader_factory=settled)
    else:
        with serve_for_run(cfg) as (served, started):  # --serve: start the server, read from it, always stop it
            summary = run_pages(served, RunProgress(enabled=True), skip=_held_by(cfg.library), endpoint=started)
    if summary.fallback_docs:
        shown = ", ".join(summary.fallback_docs[:10]) + (" …" if len(summary.fallback_docs) > 10 else "")
        console.print(f"[yellow]{len(summary.fallback_docs)} document(s) over --max-fallback "
                      f"{cfg.max_fallback:.0%} fallback pages: {shown}")
    if summary.read_now == 0 and not summary.interrupted and not summary.missing:
        console.print("Nothing to do: every page already has a final record.")
    if cfg.json_summary:
        print(json.dumps(summary.as_dict()), flush=True)
        console.print(summary.done_line())
    else:
        print(summary.done_line(), flush=True)
    return int(summary.exit_code())


def _held_by(library: Path | None) -> DocumentFilter | None:
    """GPU jobs never redo published work: skip what the library holds (same bytes)."""
    if library is None:
        return None

    def skip(docs: list) -> tuple[list, str]:
        from ..library import skip_held

        kept, held = skip_held(Path(library), docs)
        return kept, f"{len(held)} document(s) already in library {library}: skipped" if held else ""

    return skip


def run_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The settings `run`'s parsed options give (None: not given, so the config file, the
    environment or the default decides): what `vlmocr run` loads, and what `vlmocr slurm` checks on
    the login node before it stages anything."""
    p = params.get
    return dict(
        inputs=list(p("paths") or []) or None, out=p("out"), manifest=p("manifest"), engine=p("engine"),
        ocr_engine=p("ocr_engine"), rotate_pages=p("rotate_pages"), deskew=p("deskew"), clean_scans=p("clean") or None,
        repair=p("repair"),
        align_with=p("align_with"), vlm_tier=p("vlm_tier") or None, cpu_tiers_from=p("cpu_tiers_from"),
        endpoint=p("endpoint"), model=p("model"), profile=p("profile"), dpi=p("dpi"),
        longest_side=p("longest_side"), max_pixels=p("max_pixels"), lang=p("lang"), workers=p("workers"),
        concurrency=p("concurrency"), shard=p("shard"), force=p("force") or None, force_bad=p("force_bad") or None,
        json_summary=p("json_out") or None, serve=p("serve"), stop_grace=p("stop_grace"), reread=p("reread") or None,
        server_kind=p("server_kind"), request_timeout=p("request_timeout"), max_retries=p("max_retries"),
        no_retry=p("no_retry") or None, retry_only=p("retry_only") or None, max_fallback=p("max_fallback"),
        adaptive=p("adaptive"), pages_per_request=p("pages_per_request"), library=p("library"),
    )


def check_job_options(params: dict[str, Any]) -> None:
    """What a SLURM job's `vlmocr run` would refuse, refused on the login node before anything is
    staged or written (an unknown --serve profile used to die on the node): the settings
    as `run` loads them, the profiles named, --serve beside --endpoint."""
    from ..cluster.serve.running import check_serve_options
    from ..profiles import load_profile

    cfg = load_config({**run_settings(params), "out": Path("RUN")}, params.get("config"))
    for name in dict.fromkeys(n for n in (cfg.profile, cfg.serve) if n):
        load_profile(name)
    if cfg.serve:
        check_serve_options(cfg)
    if cfg.cpu_tiers_from:
        # Its records found now, not by every shard on the nodes (a path that names no run).
        from ..reading.cascade import earlier_readings

        earlier_readings(cfg, out=None)

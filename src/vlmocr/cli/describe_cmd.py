"""`vlmocr describe RUN`: describe the figures of a run with a VLM; the logic lives in
vlmocr.reading.describe (a run), vlmocr.library.describe (a library) and
vlmocr.cluster.serve.describing (--serve)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, List, Optional

import typer
from pydantic import ValidationError

from ..exceptions import UsageError
from ..progress import console
from ..reading.describe import describe_run
from ..settings.figures import DEFAULT_DPI, DEFAULT_MARGIN, DEFAULT_MIN_AREA, DescribeOptions
from . import app
from .output import emit


@app.command("describe")
def describe_command(
    run_dir: Optional[Path] = typer.Argument(None, help="Run directory (its pages.jsonl has grounded blocks)."),
    library: Optional[Path] = typer.Option(None, "--library", help="Instead of RUN: every document published in "
                                           "this library whose figures lack descriptions (in the runs they "
                                           "came from), then published again."),
    endpoint: Optional[str] = typer.Option(None, help="OpenAI-compatible base URL of the describing model."),
    serve: Optional[str] = typer.Option(None, "--serve", help="Instead of --endpoint: start a server for this "
                                        "profile on this node (as `run --serve`), describe, stop it; none is "
                                        "started when no figure is owed."),
    profile: Optional[str] = typer.Option(None, help="Model profile: sampling, extra body, retries (and the "
                                          "prompt, for a profile of your own)."),
    model: Optional[str] = typer.Option(None, help="Model name served by the endpoint."),
    prompt: Optional[str] = typer.Option(None, help="Describing prompt (default: a built-in one)."),
    dpi: float = typer.Option(DEFAULT_DPI, help="Resolution the page is rendered at before cropping."),
    margin: float = typer.Option(DEFAULT_MARGIN, help="Margin around each box, a share of the page's longer side."),
    max_figures: Optional[int] = typer.Option(None, "--max-figures", help="Describe at most this many figures now."),
    min_area: float = typer.Option(DEFAULT_MIN_AREA, "--min-area",
                                   help="Skip figures smaller than this share of the page area (icons)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Output budget per description "
                                             "(default: the profile's, at most 1024)."),
    concurrency: Optional[int] = typer.Option(None, help="Requests in flight (default: the profile's)."),
    workers: Optional[int] = typer.Option(None, help="Processes rendering and cropping pages (default: all cores)."),
    request_timeout: float = typer.Option(300.0, help="Seconds per HTTP request."),
    max_retries: int = typer.Option(6, help="HTTP retries per request."),
    server_kind: str = typer.Option("auto", help="vllm|sglang|openai (default: detected from /v1/models)."),
    no_retry: bool = typer.Option(False, "--no-retry", help="No retry ladder for loop/truncated/empty/refused."),
    source_root: Optional[List[Path]] = typer.Option(
        None, "--source-root", help="Where relative source paths are found (repeatable)."),
    no_markdown: bool = typer.Option(False, "--no-markdown", help="Do not re-assemble docs/*.md afterwards."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count figures and estimate tokens; send nothing."),
    force: bool = typer.Option(False, "--force", help="Describe figures that already have a final record."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> int:
    """Crop the figures that grounded models found and describe each with a VLM (RUN/figures.jsonl)."""
    opts = describe_options(locals())
    if (run_dir is None) == (library is None):
        raise UsageError("give a run directory or --library LIB (one of them)")
    note = lambda msg: console.print(f"[dim][describe] {msg}")  # noqa: E731
    if library is not None:
        from ..library.describe import describe_library

        if serve:
            result = _describe_library_served(library, opts, serve, note)
        else:
            result = describe_library(library, opts, progress=note, handle_signals=True)
        emit(result.as_dict(), result.line(), json_out)
        return int(result.exit_code())
    assert run_dir is not None  # one of run_dir and --library, checked above
    if serve:
        from ..cluster.serve.describing import describe_run_served

        summary = describe_run_served(run_dir, opts, serve, progress=note, handle_signals=True)
    else:
        summary = describe_run(run_dir, opts, progress=note, handle_signals=True)
    if summary.figures == 0:
        console.print("No figure blocks in the final page records (a grounded profile such as deepseek-ocr, "
                      "dots-ocr or chandra produces them).")
    elif not dry_run and summary.described_now == 0 and not summary.interrupted:
        console.print("Nothing to do: every figure already has a final description.")
    emit(summary.as_dict(), summary.done_line(), json_out)
    return int(summary.exit_code())


def _describe_library_served(library: Path, opts: DescribeOptions, serve: str, note: Callable[[str], None]) -> Any:
    """`describe --library LIB --serve PROFILE`: one server for every run the library's documents
    came from, started only when one of them owes a figure (its log in LIB/logs). The library
    knows no server and the server no library: they meet here."""
    from ..cluster.serve.describing import NOTHING_OWED, describe_server, served_options
    from ..library.describe import describe_library, describe_library_settled, library_owes

    opts = served_options(opts, serve)
    if opts.dry_run:
        return describe_library(library, opts, progress=note, handle_signals=True)
    if not library_owes(library, opts):
        note(NOTHING_OWED)
        return describe_library_settled(library, opts, progress=note, handle_signals=True)
    with describe_server(opts, serve, Path(library)) as served:
        return describe_library(library, served, progress=note, handle_signals=True)


def describe_options(params: dict[str, Any]) -> DescribeOptions:
    """The command's parameters (as typer or click parsed them) as DescribeOptions; `slurm describe`
    checks the options it passes on with it. A value out of range is a usage error naming it."""
    try:
        return _options(params)
    except ValidationError as exc:
        bad = "; ".join(f"--{'-'.join(str(p) for p in e['loc']).replace('_', '-')}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"invalid option: {bad}") from None


def _options(params: dict[str, Any]) -> DescribeOptions:
    return DescribeOptions(
        endpoint=params.get("endpoint"), profile=params.get("profile"), model=params.get("model"),
        prompt=params.get("prompt"), dpi=params["dpi"], margin=params["margin"], min_area=params["min_area"],
        max_figures=params.get("max_figures"), concurrency=params.get("concurrency"),
        workers=params.get("workers"), max_tokens=params.get("max_tokens"),
        request_timeout=params["request_timeout"], max_retries=params["max_retries"],
        server_kind=params["server_kind"], no_retry=bool(params.get("no_retry")), force=bool(params.get("force")),
        dry_run=bool(params.get("dry_run")), source_roots=list(params.get("source_root") or []),
        markdown=not params.get("no_markdown"),
    )

"""`vlmocr report RUN --out DIR`: a static HTML report; the logic lives in vlmocr.report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..progress import console
from ..report.build import build_report
from ..report.gather import ReportOptions
from . import app, say_reading
from .output import TRUTH_HELP


@app.command("report")
def report_command(
    run_dir: Path = typer.Argument(..., help="Run directory (has pages.jsonl)."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for the report (index.html and its files)."),
    truth: Optional[Path] = typer.Option(None, "--truth", help=TRUTH_HELP),
    thumb_size: int = typer.Option(800, "--thumb-size", help="Longest side of the page thumbnails, px."),
    max_thumbs: int = typer.Option(2000, "--max-thumbs", help="Render at most this many thumbnails (flagged pages only)."),
    cer_threshold: float = typer.Option(0.10, "--cer-threshold", help="Flag pages whose CER is above this (with --truth)."),
    source_root: Optional[List[Path]] = typer.Option(
        None, "--source-root", help="Where relative source paths are found (repeatable; default: here, the run's parent)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes rendering thumbnails."),
    title: Optional[str] = typer.Option(None, "--title", help="Title of the report."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> int:
    """Write a self-contained HTML report: summary, charts, documents, and a review of flagged pages."""
    opts = ReportOptions(run_dir=run_dir, out=out, truth=truth, thumb_size=thumb_size, max_thumbs=max_thumbs,
                         cer_threshold=cer_threshold, source_roots=list(source_root or []), workers=workers,
                         title=title)
    result = build_report(opts, log=lambda msg: console.print(f"[dim][report] {msg}"))
    say_reading(run_dir)
    for note in result.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    if json_out:
        print(json.dumps(result.as_dict()), flush=True)
    else:
        cer = f" cer={result.cer * 100:.2f}%" if result.cer is not None else ""
        print(f"Report: {result.index} ({result.pages} pages in {result.documents} docs, flagged={result.flagged}, "
              f"thumbs={result.thumbs}{cer}, {result.seconds:.1f} s)", flush=True)
    return 0

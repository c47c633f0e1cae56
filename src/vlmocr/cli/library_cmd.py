"""`vlmocr dedup | publish | search | export | identify`: the library; the logic lives in
vlmocr.library."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from ..exceptions import ExitCode, UsageError
from ..progress import console
from ..runfolder.safe import json_shown, shown
from . import app, say_reading


def _note(message: str) -> None:
    console.print(escape(message), highlight=False)


def _dump(data: object) -> None:
    # Pages' text and names reach the terminal: controls and bidi controls as JSON escapes (runfolder/safe.py).
    print(json_shown(json.dumps(data, ensure_ascii=False, default=str)), flush=True)


@app.command("dedup")
def dedup_command(
    paths: List[str] = typer.Argument(None, help="Files or folders (recursive)."),
    manifest: Optional[Path] = typer.Option(None, "--manifest", help="CSV or JSONL: doc_id,path[,pages,dpi,language]."),
    library: Optional[Path] = typer.Option(None, "--library", help="Also skip what this library already holds."),
    manifest_out: Path = typer.Option(..., "--manifest-out", help="Write the new documents here (a run manifest: .jsonl or .csv)."),
    report: Optional[Path] = typer.Option(None, "--report", help="Write one row per input here (CSV, or .json)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes hashing and reading text layers."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace --manifest-out and --report if it exists "
                                   "(never inside a run or library folder)."),
    json_out: bool = typer.Option(False, "--json", help="Print the full result as JSON on stdout."),
) -> int:
    """Byte-identical and same-text documents, within the inputs and against a library; a manifest of what is new."""
    from ..files import check_new_output
    from ..library.dedup import dedup, manifest_format, write_manifest, write_report

    manifest_format(manifest_out)  # before hashing a corpus
    check_new_output(manifest_out, "--manifest-out", overwrite=overwrite)
    if report is not None:
        check_new_output(report, "--report", overwrite=overwrite)
    result = dedup(paths or [], manifest, library, workers)
    result.manifest = write_manifest(result.new, manifest_out)
    if report is not None:
        result.report = write_report(result, report)
    for row in result.rows:
        if row.status == "duplicate":
            _note(f"duplicate ({row.match}) {row.doc.doc_id} = {row.duplicate_of} ({row.where})")
        elif row.status == "unreadable":
            _note(f"unreadable {row.doc.doc_id}: {row.detail}")
    if json_out:
        _dump(result.as_dict())
    else:
        print(result.line(), flush=True)
    return int(ExitCode.ok)


@app.command("publish")
def publish_command(
    runs: List[Path] = typer.Argument(..., help="Run directories (a SLURM run: its shards/* are read)."),
    library: Path = typer.Option(..., "--library", help="The library (created when missing)."),
    layer: str = typer.Option("raw", "--layer", help="raw | clean (the cleaned layer, RUN/clean or cleaned now)."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML) for --layer clean."),
    replace: bool = typer.Option(False, "--replace", help="Replace what the library holds even by a version no better."),
    lookup: bool = typer.Option(False, "--lookup", help="Look identifiers up at Crossref (cached on disk)."),
    crossref: str = typer.Option("https://api.crossref.org", "--crossref", help="Crossref API base URL."),
    mailto: Optional[str] = typer.Option(None, "--mailto", help="Contact address for Crossref's polite pool."),
    delay: float = typer.Option(1.0, "--lookup-delay", help="Seconds between Crossref requests (at least)."),
    source_root: Optional[List[Path]] = typer.Option(
        None, "--source-root", help="Where relative source paths are found (repeatable; default: here, the run's parent)."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Exit 6 instead of waiting when another publisher is at work."),
    json_out: bool = typer.Option(False, "--json", help="Print the full result as JSON on stdout."),
) -> int:
    """Publish every complete document of the runs into a library (atomic per document, idempotent)."""
    from ..library.catalog import CACHE
    from ..library.identify import Crossref
    from ..library.publish import publish

    if layer not in ("raw", "clean"):
        raise UsageError(f"--layer {layer!r}: expected raw or clean")
    client = Crossref(crossref, Path(library) / CACHE / "crossref", delay=delay, mailto=mailto) if lookup else None
    try:
        result = publish(runs, library, layer=layer, replace=replace, crossref=client, source_roots=source_root or [],
                         clean_rules=rules, wait=not no_wait, log=lambda m: _note(f"[publish] {m}"))
    finally:
        if client is not None:
            client.close()
    for o in result.outcomes:
        if o.action in ("incomplete", "unreadable"):
            _note(f"{o.action}: {o.doc_id}: {o.detail}")
        elif o.action in ("duplicate", "kept", "held"):
            _note(f"{o.action}: {o.doc_id}: {o.detail}")
    if json_out:
        _dump(result.as_dict())
    else:
        print(result.line(), flush=True)
    return int(result.exit_code())


@app.command("search")
def search_command(
    library: Path = typer.Argument(..., help="The library."),
    query: str = typer.Argument(..., help="SQLite FTS5 query: words, \"a phrase\", AND/OR/NOT, prefix*."),
    limit: int = typer.Option(20, "--limit", help="At most this many pages."),
    json_out: bool = typer.Option(False, "--json", help="Print the hits as JSON on stdout."),
) -> int:
    """Full-text search over the library's pages (best first): document, page, snippet, and where
    on the page the words lie (x0,y0,x1,y1 in the scan's pixels, when the page has word positions).
    A word broken at a line end (Haupts- / mann) is found whole (Hauptsmann)."""
    from ..library.catalog import Catalog
    from ..library.regions import with_regions

    with Catalog(library, readonly=True) as cat:
        hits = with_regions(library, cat.search(query, limit), query)
    if json_out:
        _dump([h.as_dict() for h in hits])
    else:
        for h in hits:
            box = h.region.get("box") if h.region else None
            where = "\t@" + ",".join(str(v) for v in box) if isinstance(box, list) else ""
            # A document's text on a terminal: its controls shown, never obeyed (runfolder/safe.py).
            print(shown(f"{h.doc_id}\tp.{h.page}\t{' '.join(h.snippet.split())}{where}"), flush=True)
        console.print(f"{len(hits)} hit(s)")
    return int(ExitCode.ok)


@app.command("export")
def export_command(
    source: List[Path] = typer.Argument(..., help="A library, or run directories."),
    fmt: str = typer.Option(..., "--format", help="md | txt | jsonl | parquet | hf | alto | hocr | pagexml | pdf "
                            "(ALTO 4.2, hOCR, PAGE-XML 2019, a searchable PDF: the words where they lie)"),
    out: Path = typer.Option(..., "--out", "-o", help="A new or empty folder, or an earlier export (replaced whole); "
                             "a .jsonl file for --format jsonl."),
    layer: Optional[str] = typer.Option(None, "--layer", help="raw | clean (default: raw for runs, as published for a library)."),
    rules: Optional[Path] = typer.Option(None, "--rules", help="Cleaning rules (TOML) for --layer clean."),
    include_incomplete: bool = typer.Option(False, "--include-incomplete", help="From runs: also documents with pages missing."),
    source_root: Optional[List[Path]] = typer.Option(None, "--source-root", help="Where relative source paths are found."),
    json_out: bool = typer.Option(False, "--json", help="Print a machine-readable summary on stdout."),
) -> int:
    """Export documents with page markers (md, txt), page spans (jsonl), Parquet tables, a HF dataset folder,
    or the library formats with word positions (alto, hocr, pagexml, pdf)."""
    from ..library.export import export
    from ..runfolder.rundir import RunDir

    result = export(source, fmt, out, layer, include_incomplete=include_incomplete,
                    source_roots=source_root or [], clean_rules=rules)
    for path in source:
        if RunDir(path).pages.is_file():
            say_reading(path)
    for note in result.notes:
        _note(f"note: {note}")
    if json_out:
        _dump(result.as_dict())
    else:
        print(result.line(), flush=True)
    return int(ExitCode.ok)


@app.command("identify")
def identify_command(
    sources: List[Path] = typer.Argument(..., help="PDFs (their text layer), run directories, or a library."),
    pages: int = typer.Option(5, "--pages", help="Read identifiers on this many first pages."),
    lookup: bool = typer.Option(False, "--lookup", help="Look identifiers up at Crossref (cached on disk)."),
    crossref: str = typer.Option("https://api.crossref.org", "--crossref", help="Crossref API base URL."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Lookup cache folder (default: LIB/cache/crossref or ./.vlmocr-cache)."),
    mailto: Optional[str] = typer.Option(None, "--mailto", help="Contact address for Crossref's polite pool."),
    delay: float = typer.Option(1.0, "--lookup-delay", help="Seconds between Crossref requests (at least)."),
) -> int:
    """DOI, arXiv id and ISBN of each document, from its first pages (not its reference list), as JSON lines."""
    from ..library.catalog import CACHE, Catalog, is_library
    from ..library.identify import Crossref, LookupError_, find_identifiers, identify_records
    from ..library.runs import read_run, run_dirs

    items: list[tuple[str, list]] = []
    cache_dir = cache
    for src in sources:
        if is_library(src):
            cache_dir = cache_dir or Path(src) / CACHE / "crossref"
            with Catalog(src, readonly=True) as cat:
                for row in cat.documents():
                    items.append((row["lib_id"], [{**i, "match": ""} for i in cat.identifiers(row["lib_id"])]))
        elif src.is_dir():
            for d in run_dirs([src]):
                _info, docs = read_run(d)
                for doc_id, doc in sorted(docs.items()):
                    items.append((doc_id, [i.as_dict() for i in identify_records(doc.records, pages)]))
        else:
            from ..exceptions import BadInput
            from ..inputs.render import count_pages, text_layer

            try:
                n = min(count_pages(src), pages)
                texts = [(p, text_layer(src, p)) for p in range(1, n + 1)]
            except BadInput as exc:
                _note(f"{src}: {exc.reason}")
                continue
            items.append((str(src), [i.as_dict() for i in find_identifiers(texts, pages)]))
    client = None
    if lookup:
        client = Crossref(crossref, cache_dir or Path(".vlmocr-cache") / "crossref", delay=delay, mailto=mailto)
    try:
        for name, idents in items:
            line: dict = {"document": name, "identifiers": idents}
            if client is not None and idents:
                try:
                    line["metadata"] = client.lookup(idents)
                except LookupError_ as exc:
                    line["lookup_error"] = str(exc)
            _dump(line)
    finally:
        if client is not None:
            client.close()
    return int(ExitCode.ok)

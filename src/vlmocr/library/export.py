"""`vlmocr export RUN|LIB --format md|txt|jsonl|parquet|hf|alto|hocr|pagexml|pdf --out O [--layer raw|clean]`.

One document text everywhere: the pages' texts exactly as recorded, in page order, joined by a
form feed on a line of its own (``"\\n\\f\\n"``, the plain-text page break); a page's character
span ``[start, end)`` indexes that text, so ``text[start:end]`` is the page's record text.

- ``md``: O/<doc>.md, the assembled Markdown with ``<!-- page N | status | engine -->`` markers;
- ``txt``: O/<doc>.txt, the document text (pages separated by form feeds);
- ``jsonl``: one line per document (O itself when it ends in .jsonl, else O/documents.jsonl) with
  its text, ``page_spans`` [{page, start, end, status, engine}], identifiers and provenance;
- ``parquet``: O/documents.parquet (one row per document) and O/pages.parquet (one row per page);
- ``hf``: a Hugging Face dataset folder: O/documents/*.parquet, O/pages/*.parquet and a
  README.md whose YAML names the two configs, so ``datasets.load_dataset(O)`` opens the documents,
  ``load_dataset(O, "pages")`` the pages and ``load_dataset("parquet", data_dir=O/"pages")`` too;
- ``alto``, ``hocr``, ``pagexml``, ``pdf``: the formats a digital library ingests, with each word
  where it lies on the page (formats/): O/<doc>.alto.xml, O/<doc>.hocr,
  O/<doc>/p0001.xml (a PAGE-XML file a page), O/<doc>.pdf (the input's pages untouched with an
  invisible text layer). From the raw layer only.

From a run (or a SLURM run's shards) the complete documents are exported (`--include-incomplete`
adds the rest); from a library, every document it holds, in the layer it was published with —
``--layer clean`` cleans a raw one in memory; a cleaned one has no raw layer to give."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from ..exceptions import UsageError
from ..figures.placement import add_figures
from ..files import OutputBuild, check_output_path, kill_point
from ..formats import FORMATS as LIBRARY_FORMATS
from ..formats import write_document
from ..formats.layout import laid_pages
from ..runfolder.assemble import assemble_markdown
from ..runfolder.record import JsonObject, Row
from ..runfolder.safe import made_safe_count, needs_making_safe, record_made_safe
from .catalog import DOC_PAGES, DOCS, Catalog, is_library
from .identify import identify_records
from .runs import DocRecords, document_text, original_name, resolve_source, run_dirs, run_documents

FORMATS = ("md", "txt", "jsonl", "parquet", "hf", *LIBRARY_FORMATS)
EXPORT = "export"  # what the marker of a folder `export` made says (store.OUTPUT_MARKER)
ROWS_PER_FILE = 50_000  # pages per Parquet file in an hf export (documents: the same count of rows)


@dataclass
class ExportDoc:
    doc_id: str
    records: list[Row]
    layer: str
    info: dict[str, Any] = field(default_factory=dict)  # lib_id, source, sha256, identifiers, provenance…
    name: str = ""  # file stem in md/txt exports

    def text_and_spans(self) -> tuple[str, list[tuple[int, int, int]]]:
        return document_text(self.records)


@dataclass
class ExportResult:
    out: Path
    format: str
    documents: int = 0
    pages: int = 0
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> JsonObject:
        return {"out": str(self.out), "format": self.format, "documents": self.documents, "pages": self.pages,
                "files": self.files, "notes": self.notes}

    def line(self) -> str:
        return f"Exported {self.documents} documents, {self.pages} pages ({self.format}) → {self.out}"


# ------------------------------------------------------------------------------ sources


def _from_runs(paths: list[Path], layer: str, include_incomplete: bool, source_roots: Iterable[Path],
               clean_rules: Path | None, notes: list[str]) -> Iterator[ExportDoc]:
    # Each document is read when its turn comes (one document's text in memory at a time); one
    # held by several runs is read from each, and the most complete reading goes out.
    holders: dict[str, list[Callable[[], DocRecords]]] = {}
    for d in run_dirs(paths):
        _info, docs = run_documents(d, layer, source_roots, clean_rules)
        for doc_id, load in docs.items():
            holders.setdefault(doc_id, []).append(load)
    skipped = 0
    for doc_id in sorted(holders):
        doc = None
        for load in holders[doc_id]:
            candidate = load()
            if candidate.records and (doc is None or (candidate.complete, len(candidate.records), candidate.finished_at)
                                      > (doc.complete, len(doc.records), doc.finished_at)):
                doc = candidate
        if doc is None:
            continue
        if not doc.complete and not include_incomplete:
            skipped += 1
            continue
        info = {
            "lib_id": None, "source": doc.source, "original_name": original_name(doc.source, doc.run), "sha256": None,
            "doc_pages": doc.doc_pages, "complete": doc.complete, "run": str(doc.run.path),
            "identifiers": [i.as_dict() for i in identify_records(doc.records)],
            "metadata": None, "file": resolve_source(doc.source, doc.run),
        }
        # Figure descriptions (vlmocr describe) travel with the text, as alt text in place.
        records = add_figures(doc.run.path, doc.records, link_prefix="")
        yield ExportDoc(doc_id, records, layer, info)
    if skipped:
        notes.append(f"{skipped} incomplete document(s) left out (--include-incomplete to add them)")


def _from_library(lib: Path, layer: str | None, clean_rules: Path | None, notes: list[str]) -> Iterator[ExportDoc]:
    with Catalog(lib, readonly=True) as cat:
        rows = list(cat.documents())
        idents = {r["lib_id"]: cat.identifiers(r["lib_id"]) for r in rows}
    rules = None
    for row in rows:
        path = lib / row["path"] / DOC_PAGES
        if not path.is_file():
            path = lib / DOCS / row["lib_id"] / DOC_PAGES
        records = [Row.of(orjson.loads(line)) for line in path.read_bytes().splitlines() if line.strip()]
        have = row["layer"]
        if layer is not None and layer != have:
            if layer == "raw":
                raise UsageError(f"{row['lib_id']} was published from the cleaned layer; it has no raw layer "
                                 "(export without --layer, or republish with --layer raw)")
            from ..text.clean import clean_records, load_rules

            rules = rules or load_rules(clean_rules)
            records = clean_records(records, rules)
            have = "clean"
        info = {
            "lib_id": row["lib_id"], "source": row["source"], "original_name": row["original_name"],
            "sha256": row["sha256"], "doc_pages": row["doc_pages"], "complete": True, "run": row["run"],
            "identifiers": [{**i, "match": ""} for i in idents[row["lib_id"]]], "metadata": row.get("metadata"),
            "file": Path(row["source"]) if row["source"] and Path(row["source"]).is_file() else None,
        }
        yield ExportDoc(row["doc_id"], records, have, info)


def export_documents(source: list[Path], layer: str | None = None, include_incomplete: bool = False,
                     source_roots: Iterable[Path] = (), clean_rules: Path | None = None,
                     notes: list[str] | None = None) -> Iterator[ExportDoc]:
    """The documents of a library (one path) or of runs, in doc_id order."""
    notes = notes if notes is not None else []
    if layer not in (None, "raw", "clean"):
        raise UsageError(f"--layer {layer!r}: expected raw or clean")
    libs = [p for p in source if is_library(p)]
    if libs:
        if len(source) != 1:
            raise UsageError("export one library, or one or more runs — not both")
        return _made_safe(_from_library(Path(source[0]), layer, clean_rules, notes), notes)
    return _made_safe(_from_runs([Path(p) for p in source], layer or "raw", include_incomplete, source_roots,
                                 clean_rules, notes), notes)


def _made_safe(docs: Iterator[ExportDoc], notes: list[str]) -> Iterator[ExportDoc]:
    """The documents with every page's text as its record makes it safe (runfolder/safe.py): records
    written before that rule are made safe here, so that one control character in one page cannot
    stop an export; the pages it touched are counted in a note."""
    pages = 0
    for doc in docs:
        records = []
        for row in doc.records:
            if needs_making_safe(row.data):
                row = Row.of(record_made_safe(copy.deepcopy(dict(row.data))))
            pages += made_safe_count(row.flags) > 0
            records.append(row)
        doc.records = records
        yield doc
    if pages:
        notes.append(f"{pages} page(s) held characters XML and a terminal cannot take (control characters, "
                     "U+FFFE/U+FFFF, lone surrogates): a form feed made a line break, other controls left out, "
                     "the rest U+FFFD (their records' flag chars_made_safe)")


# ------------------------------------------------------------------------------ rows


def _provenance(doc: ExportDoc) -> dict[str, Any]:
    def common(values: list[str | None]) -> str | None:
        given = [v for v in values if v]
        return max(set(given), key=given.count) if given else None

    recs = doc.records
    return {"run": doc.info.get("run"), "settings_key": common([r.key for r in recs]),
            "engines": sorted({r.engine for r in recs if r.engine}),
            "model": common([r.model for r in recs]), "revision": common([r.revision for r in recs]),
            "prompt_id": common([r.prompt_id for r in recs])}


def document_row(doc: ExportDoc) -> dict[str, Any]:
    text, spans = doc.text_and_spans()
    statuses: dict[str, int] = {}
    for r in doc.records:
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
    by_page = {r.page: r for r in doc.records}
    return {
        "doc_id": doc.doc_id, "lib_id": doc.info.get("lib_id"), "source": doc.info.get("source"),
        "original_name": doc.info.get("original_name"), "sha256": doc.info.get("sha256"), "layer": doc.layer,
        "pages": len(doc.records), "doc_pages": doc.info.get("doc_pages"), "complete": bool(doc.info.get("complete")),
        "text": text,
        "page_spans": [{"page": p, "start": s, "end": e, "status": by_page[p].status.value,
                        "engine": by_page[p].engine} for p, s, e in spans],
        "statuses": json.dumps(dict(sorted(statuses.items()))),
        "identifiers": [{"type": i["type"], "value": i["value"], "page": int(i["page"]), "snippet": i["snippet"]}
                        for i in doc.info.get("identifiers") or []],
        **_provenance(doc),
        "metadata": json.dumps(doc.info["metadata"], ensure_ascii=False) if doc.info.get("metadata") else None,
    }


def page_rows(doc: ExportDoc) -> list[dict[str, Any]]:
    _text, spans = doc.text_and_spans()
    out = []
    for rec, (page, start, end) in zip(sorted(doc.records, key=lambda r: r.page), spans):
        out.append({
            "doc_id": doc.doc_id, "lib_id": doc.info.get("lib_id"), "page": page, "text": rec.text,
            "status": rec.status.value, "engine": rec.engine, "model": rec.model,
            "revision": rec.revision, "prompt_id": rec.prompt_id, "key": rec.key,
            "layer": doc.layer, "start": start, "end": end, "chars": end - start,
            "flags": [str(f) for f in rec.flags], "finished_at": rec.finished_at,
        })
    return out


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    span = pa.struct([("page", pa.int32()), ("start", pa.int64()), ("end", pa.int64()), ("status", pa.string()),
                      ("engine", pa.string())])
    ident = pa.struct([("type", pa.string()), ("value", pa.string()), ("page", pa.int32()), ("snippet", pa.string())])
    documents = pa.schema([
        ("doc_id", pa.string()), ("lib_id", pa.string()), ("source", pa.string()), ("original_name", pa.string()),
        ("sha256", pa.string()), ("layer", pa.string()), ("pages", pa.int32()), ("doc_pages", pa.int32()),
        ("complete", pa.bool_()), ("text", pa.large_string()), ("page_spans", pa.list_(span)),
        ("statuses", pa.string()), ("identifiers", pa.list_(ident)), ("run", pa.string()),
        ("settings_key", pa.string()), ("engines", pa.list_(pa.string())), ("model", pa.string()),
        ("revision", pa.string()), ("prompt_id", pa.string()), ("metadata", pa.string()),
    ])
    pages = pa.schema([
        ("doc_id", pa.string()), ("lib_id", pa.string()), ("page", pa.int32()), ("text", pa.string()),
        ("status", pa.string()), ("engine", pa.string()), ("model", pa.string()), ("revision", pa.string()),
        ("prompt_id", pa.string()), ("key", pa.string()), ("layer", pa.string()), ("start", pa.int64()),
        ("end", pa.int64()), ("chars", pa.int64()), ("flags", pa.list_(pa.string())), ("finished_at", pa.string()),
    ])
    return documents, pages


class _ParquetSink:
    """Rows → Parquet files, written in batches; with `rows_per_file`, rolls over to numbered
    files (renamed to ``train-0000K-of-0000N.parquet`` when done)."""

    def __init__(self, folder: Path, schema: Any, name: str | None, rows_per_file: int | None = None) -> None:
        self.folder = folder
        self.schema = schema
        self.name = name  # a single file name, or None for the hf train-K-of-N files
        self.rows_per_file = rows_per_file
        self.batch: list[dict[str, Any]] = []
        self.writer: Any = None
        self.in_file = 0
        self.paths: list[Path] = []
        self.rows = 0
        self.pending_chars = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.batch += rows
        self.pending_chars += sum(len(r.get("text") or "") for r in rows)
        if len(self.batch) >= 2000 or self.pending_chars > 32_000_000:  # bounded memory on big corpora
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pending_chars = 0
        while self.batch:
            if self.writer is None:
                path = self.folder / (self.name or f".part-{len(self.paths):05d}.parquet")
                self.paths.append(path)
                self.writer = pq.ParquetWriter(path, self.schema, compression="zstd")
                self.in_file = 0
            room = len(self.batch) if self.rows_per_file is None else self.rows_per_file - self.in_file
            chunk, self.batch = self.batch[:room], self.batch[room:]
            self.writer.write_table(pa.Table.from_pylist(chunk, schema=self.schema))
            self.in_file += len(chunk)
            self.rows += len(chunk)
            if self.rows_per_file is not None and self.in_file >= self.rows_per_file:
                self.writer.close()
                self.writer = None

    def close(self) -> list[Path]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.flush()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if not self.paths:  # no rows: still a valid, empty table
            path = self.folder / (self.name or ".part-00000.parquet")
            pq.write_table(pa.Table.from_pylist([], schema=self.schema), path, compression="zstd")
            self.paths.append(path)
        if self.name is None:
            n = len(self.paths)
            final = []
            for k, p in enumerate(self.paths):
                dest = self.folder / f"train-{k:05d}-of-{n:05d}.parquet"
                os.replace(p, dest)
                final.append(dest)
            self.paths = final
        return self.paths


_HF_README = """---
configs:
- config_name: documents
  data_files:
  - split: train
    path: documents/*.parquet
  default: true
- config_name: pages
  data_files:
  - split: train
    path: pages/*.parquet
---

# {title}

Text of {documents} documents ({pages} pages), exported by vlmocr (`{layer}` layer).

- `documents`: one row per document — `text` (pages joined by a form feed on a line of its own),
  `page_spans` (each page's `[start, end)` character span in `text`, with its status and engine),
  identifiers found in the text (DOI, arXiv, ISBN, with evidence), provenance (run, settings key,
  engines, model, revision, prompt).
- `pages`: one row per page — `text`, `status` (ok, fallback, loop, truncated, empty, refused,
  error, bad_input), `engine`, `model`, and the page's span in its document's text.

```python
import datasets
docs = datasets.load_dataset("path/to/this/folder")             # documents
pages = datasets.load_dataset("path/to/this/folder", "pages")   # pages
```
"""


# ------------------------------------------------------------------------------ writers


def _unique_names(docs: list[ExportDoc]) -> None:
    counts: dict[str, int] = {}
    for d in docs:
        counts[d.doc_id] = counts.get(d.doc_id, 0) + 1
    for d in docs:
        d.name = d.doc_id if counts[d.doc_id] == 1 else (d.info.get("lib_id") or d.doc_id)


def export(source: list[Path] | Path, fmt: str, out: Path, layer: str | None = None, *,
           include_incomplete: bool = False, source_roots: Iterable[Path] = (), clean_rules: Path | None = None,
           rows_per_file: int = ROWS_PER_FILE) -> ExportResult:
    """Write the export into a hidden folder beside `out` and swap it in whole (`OutputBuild`):
    only a new or empty `out`, or an earlier export, is ever replaced."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    sources = [Path(source)] if isinstance(source, (str, Path)) else [Path(p) for p in source]
    out = Path(out)
    result = ExportResult(out=out, format=fmt)
    docs = export_documents(sources, layer, include_incomplete, source_roots, clean_rules, result.notes)
    one_file = fmt == "jsonl" and out.suffix.lower() in (".jsonl", ".ndjson")
    with (_FileBuild if one_file else OutputBuild)(out, EXPORT) as build:
        written = _write(docs, fmt, build.path, out.name if one_file else None, layer, sources, rows_per_file, result)
        kill_point("export-written")
        build.commit()
    result.files = [str(out) if one_file else str(out / p.relative_to(build.path)) for p in written]
    return result


class _FileBuild(OutputBuild):
    """``--format jsonl --out X.jsonl``: the file is written in a hidden folder beside it and
    renamed over X.jsonl, which must be new, empty or an earlier export (`_check_export_file`)."""

    def check(self) -> None:
        _check_export_file(self.out)

    def commit(self) -> None:
        self.check()
        os.replace(self.path / self.out.name, self.out)  # the folder itself is left to __exit__


def _check_export_file(path: Path) -> None:
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise UsageError(f"--out {path} exists and is not a file; give a new .jsonl file name")
    check_output_path(path, "--out", folder=False)  # a parent that is a file, no permission
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        first = fh.readline(1 << 24)
    try:
        row = orjson.loads(first)
    except orjson.JSONDecodeError:
        row = None
    if not (isinstance(row, dict) and "doc_id" in row and "page_spans" in row):
        raise UsageError(f"--out {path}: not replacing a file that is not an earlier export; give a new file name")


def _write(docs: Iterable[ExportDoc], fmt: str, folder: Path, file_name: str | None, layer: str | None,
           sources: list[Path], rows_per_file: int, result: ExportResult) -> list[Path]:
    """Write every format into `folder` (a fresh one); returns the files written."""
    if fmt in LIBRARY_FORMATS:
        listed = list(docs)
        _unique_names(listed)
        files = []
        unplaced = rendered_only = 0
        for d in listed:
            file = d.info.get("file")
            pages = laid_pages(d.records, d.layer, file if fmt != "pdf" else None)
            unplaced += sum(1 for p in pages if not p.positioned)
            rendered_only += sum(1 for p in pages if p.positioned and p.master is None)
            source_name = str(d.info.get("original_name") or d.info.get("source") or d.doc_id)
            files += write_document(fmt, d.name, pages, source_name, file, folder, result.notes)
            result.documents += 1
            result.pages += len(pages)
        if unplaced:
            result.notes.append(f"{unplaced} page(s) had no word positions (a VLM's answer, a text layer): "
                                "their text is written without coordinates")
        if rendered_only and fmt != "pdf":
            result.notes.append(f"{rendered_only} page(s) have no one image of their own (a born-digital or "
                                "composite PDF page) or their input was not found here: their coordinates are "
                                "in the pixels of the page as rendered, at the resolution each page states")
        return files
    if fmt in ("md", "txt"):
        listed = list(docs)
        _unique_names(listed)
        files = []
        for d in listed:
            path = folder / f"{d.name}.{fmt}"
            path.write_text(assemble_markdown(d.records) if fmt == "md" else d.text_and_spans()[0], encoding="utf-8")
            files.append(path)
            result.documents += 1
            result.pages += len(d.records)
        return files
    if fmt == "jsonl":
        path = folder / (file_name or "documents.jsonl")
        with path.open("wb") as fh:
            for d in docs:
                fh.write(orjson.dumps(document_row(d)) + b"\n")
                result.documents += 1
                result.pages += len(d.records)
        return [path]
    doc_schema, page_schema = _schemas()
    if fmt == "parquet":
        sink_docs = _ParquetSink(folder, doc_schema, "documents.parquet")
        sink_pages = _ParquetSink(folder, page_schema, "pages.parquet")
        _fill(docs, sink_docs, sink_pages, result)
        return sink_docs.close() + sink_pages.close()
    # hf: a dataset folder.
    (folder / "documents").mkdir()
    (folder / "pages").mkdir()
    sink_docs = _ParquetSink(folder / "documents", doc_schema, None, rows_per_file)
    sink_pages = _ParquetSink(folder / "pages", page_schema, None, rows_per_file)
    _fill(docs, sink_docs, sink_pages, result)
    files = sink_docs.close() + sink_pages.close()
    layer_name = layer or ("as published" if any(is_library(s) for s in sources) else "raw")
    readme = folder / "README.md"
    readme.write_text(_HF_README.format(title=Path(os.path.abspath(result.out)).name, documents=result.documents, pages=result.pages,
                                        layer=layer_name), encoding="utf-8")
    return files + [readme]


def _fill(docs: Iterable[ExportDoc], sink_docs: _ParquetSink, sink_pages: _ParquetSink, result: ExportResult) -> None:
    for d in docs:
        sink_docs.add([document_row(d)])
        sink_pages.add(page_rows(d))
        result.documents += 1
        result.pages += len(d.records)

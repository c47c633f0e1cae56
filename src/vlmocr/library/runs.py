"""Reading finished documents out of run directories (plain runs, `--shard` runs, and a SLURM
run's RUN/shards/K), for `publish` and `export`.

A document is **complete** in a run when every selected page has a final record under the run's
current settings keys (run.json `keys`) and none of them is owed another try (`error` is read
again on resume). The selection is the manifest's `pages` when the run had one, else every page
of `doc_pages`. A document that could not be opened (only a page-0 `bad_input` record) is not
complete: it has no pages to publish."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..exceptions import UsageError
from ..files import file_sha256
from ..inputs.finder import SourceFinder
from ..runfolder.record import RETRY_ON_RESUME, JsonObject, Row
from ..runfolder.rundir import PAGES_FILE, RunDir, run_keys
from ..runfolder.store import final_index

PAGE_SEPARATOR = "\n\f\n"  # between pages in document.txt: a form feed on a line of its own


@dataclass
class RunInfo:
    path: Path  # absolute
    keys: set[str] | None  # None: the latest record of each page, whatever its key
    settings: JsonObject = field(default_factory=dict)
    key_material: JsonObject | None = None
    versions: dict[str, str | None] | None = None
    git_commit: str | None = None
    selections: dict[str, tuple[int, ...]] = field(default_factory=dict)  # doc_id → selected pages
    finder: SourceFinder | None = None  # where the records' sources are

    def provenance(self) -> JsonObject:
        return {"run": str(self.path), "settings": self.settings, "key_material": self.key_material,
                "versions": self.versions, "git_commit": self.git_commit}


@dataclass
class DocRecords:
    """One document as one run holds it."""

    doc_id: str
    run: RunInfo
    records: list[Row]  # final records of the selected pages (page ≥ 1), by page
    complete: bool
    reason: str = ""  # why not complete
    source: str = ""
    doc_pages: int | None = None
    layer: str = "raw"
    failed_to_open: bool = False  # only a page-0 bad_input record: it will never have pages

    @property
    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r.status.value] = out.get(r.status.value, 0) + 1
        return dict(sorted(out.items()))

    def groups(self) -> dict[str, int]:
        g = {"ok": 0, "fallback": 0, "review": 0, "failed": 0}
        for r in self.records:
            g[r.status.group] += 1
        return g

    @property
    def finished_at(self) -> str:
        return max((r.finished_at for r in self.records), default="")


def run_dirs(paths: Iterable[Path | str]) -> list[Path]:
    """The run directories a RUN argument stands for: RUN itself when it holds pages.jsonl, and
    every RUN/shards/*/ that does (RUN/merged and RUN/gate are derived or samples: give them
    explicitly to use them)."""
    out: list[Path] = []
    for given in paths:
        p = Path(given)
        if not p.is_dir():
            raise UsageError(f"{p}: not a directory")
        run = RunDir(p)
        found = ([p] if run.pages.is_file() else []) + run.shard_runs()
        if not found:
            raise UsageError(f"{p} is not a run directory (no {PAGES_FILE}, no shards/*/{PAGES_FILE})")
        for f in found:
            if f.resolve() not in {o.resolve() for o in out}:
                out.append(f)
    return out


def run_info(run_dir: Path, source_roots: Iterable[Path] = ()) -> RunInfo:
    run = RunDir(Path(run_dir).resolve())
    data = run.run_info()
    info = RunInfo(path=run.path, keys=run_keys(data), settings=data.settings,
                   key_material=data.key_material or None, versions=data.versions or None,
                   git_commit=data.git_commit)
    # A SLURM shard (RUN/shards/K): records name the staged symlink; originals.csv names the file
    # and the pages each document's selection holds.
    cluster = run.cluster
    originals = cluster.originals() if cluster is not None else []
    for row in originals:
        if row.get("doc_id") and row.get("pages"):
            info.selections[row["doc_id"]] = _pages(row["pages"])
    info.finder = SourceFinder(run.path, source_roots, settings=info.settings, originals=originals)
    if info.finder.manifest is not None:
        from ..inputs.sources import from_manifest

        try:
            for doc in from_manifest(info.finder.manifest):
                if doc.pages:
                    info.selections.setdefault(doc.doc_id, doc.pages)
        except UsageError:
            pass  # the manifest changed since the run: fall back to every page
    return info


def _pages(spec: str) -> tuple[int, ...]:
    from ..inputs.sources import parse_pages

    try:
        return parse_pages(spec)
    except ValueError:
        return ()


def resolve_source(source: str, info: RunInfo) -> Path | None:
    """The file a record's `source` names, or None when it cannot be found here."""
    return info.finder.find(source) if info.finder is not None else None


def original_name(source: str, info: RunInfo) -> str:
    original = info.finder.original(source) if info.finder is not None else None
    return Path(original or source).name


def read_run(run_dir: Path, layer: str = "raw", source_roots: Iterable[Path] = (),
             clean_rules: Path | None = None) -> tuple[RunInfo, dict[str, DocRecords]]:
    """Every document of one run directory with its final records and whether it is complete."""
    info, docs = run_documents(run_dir, layer, source_roots, clean_rules)
    return info, {doc_id: load() for doc_id, load in docs.items()}


def run_documents(run_dir: Path, layer: str = "raw", source_roots: Iterable[Path] = (),
                  clean_rules: Path | None = None) -> tuple[RunInfo, dict[str, Callable[[], DocRecords]]]:
    """`read_run`, each document read when it is asked for: a command that goes through a run
    document by document holds one document's text at a time (the raw layer is read from
    pages.jsonl by offset, store.final_index; the clean layer is cleaned whole first)."""
    info = run_info(run_dir, source_roots)
    if layer == "clean":
        from ..text.clean import cleaned_records, load_rules

        finals, _where = cleaned_records(info.path, load_rules(clean_rules) if clean_rules else None)
        by_doc: dict[str, dict[int, Row]] = {}
        for (doc_id, page), rec in finals.items():
            if info.keys is not None and rec.key not in info.keys:
                continue
            by_doc.setdefault(doc_id, {})[page] = rec
        return info, {doc_id: functools.partial(assess, doc_id, recs, info, layer) for doc_id, recs in by_doc.items()}
    if layer != "raw":
        raise UsageError(f"--layer {layer!r}: expected raw or clean")
    index = final_index(RunDir(info.path).pages, keys=info.keys)

    def load(doc_id: str) -> DocRecords:
        return assess(doc_id, index.document(doc_id), info, layer)

    return info, {doc_id: functools.partial(load, doc_id) for doc_id in index.doc_ids()}


def assess(doc_id: str, recs: dict[int, Row], info: RunInfo, layer: str = "raw") -> DocRecords:
    pages = {p: r for p, r in recs.items() if p > 0}
    any_rec = next(iter(pages.values()), None) or recs.get(0)
    source = any_rec.source if any_rec else ""
    if not pages:
        opened = recs.get(0)
        why = (opened.error if opened else None) or "no page records"
        return DocRecords(doc_id, info, [], False, f"could not be opened: {why}", source, None, layer,
                          failed_to_open=True)
    counts = [r.doc_pages for r in pages.values() if r.doc_pages is not None]
    doc_pages = max(counts) if counts else None
    selected = info.selections.get(doc_id)
    if selected:
        selected = tuple(p for p in selected if doc_pages is None or p <= doc_pages)
    elif doc_pages is not None:
        selected = tuple(range(1, doc_pages + 1))
    else:
        selected = tuple(range(1, max(pages) + 1))  # page count unknown: pages 1…last seen
    records = [pages[p] for p in selected if p in pages]
    missing = [p for p in selected if p not in pages]
    retry = [p for p in selected if p in pages and pages[p].status in RETRY_ON_RESUME]
    reason = ""
    if missing:
        reason = f"{len(missing)} of {len(selected)} page(s) without a record ({_short(missing)})"
    elif retry:
        reason = f"{len(retry)} page(s) with status error, read again on resume ({_short(retry)})"
    return DocRecords(doc_id, info, records, not reason, reason, source, doc_pages, layer)


def _short(pages: list[int]) -> str:
    shown = ", ".join(str(p) for p in pages[:8])
    return "pages " + shown + (" …" if len(pages) > 8 else "")


def document_text(records: list[Row]) -> tuple[str, list[tuple[int, int, int]]]:
    """The document's text (pages in order, exactly as recorded, joined by PAGE_SEPARATOR) and
    each page's character span in it: text[start:end] is the page's text."""
    parts: list[str] = []
    spans: list[tuple[int, int, int]] = []
    pos = 0
    for i, rec in enumerate(sorted(records, key=lambda r: r.page)):
        if i:
            parts.append(PAGE_SEPARATOR)
            pos += len(PAGE_SEPARATOR)
        text = rec.text
        spans.append((rec.page, pos, pos + len(text)))
        parts.append(text)
        pos += len(text)
    return "".join(parts), spans


def safe_sha256(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return file_sha256(path)
    except OSError:
        return None


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

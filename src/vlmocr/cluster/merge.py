"""`vlmocr merge RUN`: one view of a sharded run, for evaluate and export.

Reads RUN/shards/*/pages.jsonl (each shard's final records under the settings keys its run.json
names; the shards of every part, RUN/shards/NAME-K, too) and writes RUN/merged/ as an ordinary
run directory:

    RUN/merged/pages.jsonl   one final record per page, sorted by document and page
    RUN/merged/docs/*.md     assembled documents (vlmocr.runfolder.assemble.write_document)
    RUN/merged/run.json      what was merged: shards, counts by status, conflicts, summary

Records name the staged file (``0001.pdf``) as their source; merge puts the original path back
(``source``) from RUN/staged/originals.csv and keeps the staged one as ``staged_source``.

A page held by two shards (the shard count changed between submissions) is taken from the
better status (ok/fallback over review over failed), then the newer record; when both are final
with different text, a warning names the page. The shard directories are never changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import orjson

from ..exceptions import UsageError
from ..files import OutputBuild, write_json_atomic
from ..runfolder.assemble import write_document
from ..runfolder.record import STATUS_GROUP, JsonObject, Row, Status
from ..runfolder.rundir import MERGED, RunDir, run_keys
from ..runfolder.store import final_records

MERGE = "merge"  # what the marker of a folder `merge` made says (store.OUTPUT_MARKER)
_RANK = {"ok": 0, "fallback": 0, "review": 1, "failed": 2}


@dataclass
class MergeResult:
    out: Path
    shards: list[str] = field(default_factory=list)
    records: int = 0
    docs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0  # pages found in more than one shard
    conflicts: list[JsonObject] = field(default_factory=list)  # … with different final text

    def as_dict(self) -> JsonObject:
        return {"out": str(self.out), "shards": self.shards, "records": self.records, "docs": self.docs,
                "statuses": self.statuses, "duplicates": self.duplicates, "conflicts": self.conflicts}

    def line(self) -> str:
        parts = " ".join(f"{k}={v}" for k, v in sorted(self.statuses.items()))
        return (f"Merged {len(self.shards)} shard(s): {self.records} pages in {self.docs} docs ({parts}); "
                f"{self.duplicates} page(s) in two shards, {len(self.conflicts)} with different text -> {self.out}")


def _rank(rec: Row) -> int:
    return _RANK[rec.status.group]


def _originals(run_dir: Path) -> dict[str, str]:
    # The bulk without --part ("bulk") and every part ("bulk-NAME"); not the gate's sample.
    return {r["staged"]: r["original"] for r in RunDir(run_dir).originals()
            if r.get("kind", "bulk") == "bulk" or r.get("kind", "").startswith("bulk-")}


def merge(run_dir: Path, out: Path | None = None, warn: Callable[[str], None] = print) -> MergeResult:
    run_dir = Path(run_dir)
    shards = RunDir(run_dir).shard_runs()
    if not shards:
        raise UsageError(f"{run_dir}: no shard run directories with records (RUN/shards/*/pages.jsonl)")
    out = Path(out) if out is not None else run_dir / MERGED
    build = OutputBuild(out, MERGE, legacy=_merged_before_markers)
    build.check()  # refuse a folder merge may not replace before reading any shard
    originals = _originals(run_dir)
    result = MergeResult(out=out, shards=[p.name for p in shards])
    chosen: dict[tuple[str, int], Row] = {}
    where: dict[tuple[str, int], str] = {}
    for shard in shards:
        run = RunDir(shard)
        keys = run_keys(run.run_info())  # without run.json: the latest record of each page
        for page_id, rec in final_records(run.pages, keys=keys).items():
            prev = chosen.get(page_id)
            if prev is not None:
                result.duplicates += 1
                same_group = _rank(prev) == _rank(rec)
                if same_group and prev.text != rec.text and _rank(rec) < 2:
                    result.conflicts.append({"doc_id": page_id[0], "page": page_id[1],
                                             "shards": [where[page_id], shard.name]})
                    warn(f"warning: {page_id[0]} page {page_id[1]} has different text in shards "
                         f"{where[page_id]} and {shard.name}; keeping the newer record")
                better = _rank(rec) < _rank(prev) or (
                    _rank(rec) == _rank(prev) and rec.finished_at >= prev.finished_at)
                if not better:
                    continue
            chosen[page_id] = rec
            where[page_id] = shard.name
    # Write into a fresh directory and swap it in: a reader never sees half a merge, documents
    # that left the run do not linger, and only a folder merge made itself is ever replaced.
    with build:
        _write_merged(build.path, shards, chosen, where, originals, result)
        build.commit()
    return result


def _merged_before_markers(folder: Path) -> bool:
    """A RUN/merged written before merge marked its folders: its run.json says what it merged."""
    return "merged_from" in RunDir(folder).info()


def _write_merged(tmp: Path, shards: list[Path], chosen: dict[tuple[str, int], Row],
                  where: dict[tuple[str, int], str], originals: dict[str, str], result: MergeResult) -> None:
    by_doc: dict[str, list[Row]] = {}
    merged = RunDir(tmp)
    with merged.pages.open("wb") as fh:
        for (doc_id, page) in sorted(chosen):
            rec = chosen[(doc_id, page)]
            if rec.source in originals:
                rec = rec.amended(staged_source=rec.source, source=originals[rec.source])
            rec = rec.amended(shard=where[(doc_id, page)])
            fh.write(orjson.dumps(dict(rec.data)) + b"\n")
            by_doc.setdefault(doc_id, []).append(rec)
            status = rec.status.value
            result.statuses[status] = result.statuses.get(status, 0) + 1
            result.records += 1
    for doc_id, recs in by_doc.items():
        pages = [r for r in recs if r.page > 0]
        # A document-level failure (page 0) is shown only while no page of it was read.
        write_document(tmp, doc_id, pages or recs)
    result.docs = len(by_doc)
    groups = {"ok": 0, "fallback": 0, "review": 0, "failed": 0}
    for name, n in result.statuses.items():
        try:
            groups[STATUS_GROUP[Status(name)]] += n
        except ValueError:
            pass
    write_json_atomic(merged.run_json, {
        "schema": 1, "merged_from": [str(p) for p in shards], "documents": result.docs,
        "summary": {"pages": result.records, "docs": result.docs, "records": result.records, **groups,
                    "statuses": result.statuses},
        "duplicates": result.duplicates, "conflicts": result.conflicts,
    })

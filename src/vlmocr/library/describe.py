"""`vlmocr describe --library LIB`: describe the figures of every published document that lacks
descriptions, then publish those documents again so the library's text,
search and exports carry the descriptions.

A library keeps no figures of its own: each document's catalog row names the run it was
published from, and the run holds the grounded page records and figures.jsonl. So the work is
done where `vlmocr describe RUN` does it — in each of those runs, limited to the documents the
library holds from it (a figure already described under the same settings is skipped, as on any
resume) — and the documents are published again from the same run and layer. The re-publication
replaces only the library's own version from that run (`publish(only=…, replace=True)`), never a
document the library took from another run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import ExitCode
from ..reading.describe import DescribeSummary, describe_run
from ..runfolder.record import JsonObject
from ..runfolder.rundir import RunDir
from ..settings.figures import DescribeOptions
from .catalog import Catalog
from .publish import PublishResult, publish


@dataclass
class LibraryDescribe:
    library: str
    documents: int = 0  # documents in the library
    runs: list[DescribeSummary] = field(default_factory=list)
    gone: dict[str, int] = field(default_factory=dict)  # run no longer there → its documents
    published: list[PublishResult] = field(default_factory=list)

    def exit_code(self) -> ExitCode:
        codes = [s.exit_code() for s in self.runs] + [p.exit_code() for p in self.published]
        bad = [c for c in codes if c != ExitCode.ok]
        # The worst first: interrupted, then incomplete (resubmit), then review.
        for code in (ExitCode.interrupted, ExitCode.incomplete, ExitCode.review):
            if code in bad:
                return code
        return ExitCode.ok

    def line(self) -> str:
        def n(attr: str) -> int:
            return sum(getattr(s, attr) for s in self.runs)

        statuses: dict[str, int] = {}
        for s in self.runs:
            for k, v in s.statuses.items():
                statuses[k] = statuses.get(k, 0) + v
        updated = sum(p.counts()["updated"] for p in self.published)
        gone = sum(self.gone.values())
        return (f"Described: {n('selected')} figures of {self.documents} documents in {self.library} "
                f"({len(self.runs)} runs), ok={statuses.get('ok', 0)} missing={n('missing')} "
                f"(now {n('described_now')}); {updated} documents published again"
                + (f"; {gone} documents whose run is gone ({len(self.gone)} runs)" if gone else ""))

    def as_dict(self) -> JsonObject:
        return {"library": self.library, "documents": self.documents, "runs": [s.as_dict() for s in self.runs],
                "gone": self.gone, "published": [p.as_dict() for p in self.published],
                "exit_code": int(self.exit_code()), "line": self.line()}


def library_runs(library: Path) -> tuple[int, dict[tuple[str, str], set[str]]]:
    """(documents in the library, {(run, layer): doc_ids}): the runs the documents were
    published from, each with the layer it was published in."""
    with Catalog(Path(library), readonly=True) as cat:  # a usage error when LIB holds no catalog
        rows = list(cat.documents())
    by_run: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        by_run.setdefault((str(row["run"]), str(row.get("layer") or "raw")), set()).add(str(row["doc_id"]))
    return len(rows), by_run


def describe_library(library: Path, opts: DescribeOptions, *, progress: Callable[[str], None] | None = None,
                     handle_signals: bool = False,
                     describe: Callable[..., DescribeSummary] = describe_run) -> LibraryDescribe:
    """``describe`` is how one run's figures are described (`describe_run`; with --serve and
    nothing owed, the settled summary: nothing is sent, the documents are published again)."""
    note = progress or (lambda _msg: None)
    documents, by_run = library_runs(library)
    result = LibraryDescribe(str(library), documents=documents)
    for (run, layer), doc_ids in sorted(by_run.items()):
        if not RunDir(run).pages.is_file():
            result.gone[run] = result.gone.get(run, 0) + len(doc_ids)
            note(f"{run}: not there any more; {len(doc_ids)} document(s) left as published")
            continue
        summary = describe(run, opts.model_copy(update={"doc_ids": frozenset(doc_ids)}), progress=note,
                           handle_signals=handle_signals)
        result.runs.append(summary)
        note(f"{run}: {summary.done_line()}")
        if summary.interrupted:
            break
        if opts.dry_run or not summary.figures:
            continue
        # Publishing the unchanged documents again writes nothing (their content digest is the same).
        result.published.append(publish([run], Path(library), layer=layer, replace=True, only=doc_ids,
                                        source_roots=opts.source_roots, log=note))
    return result


def library_owes(library: Path, opts: DescribeOptions) -> bool:
    """Does any run the library's documents came from owe a figure a description under ``opts``
    (counted offline: no endpoint asked)? `describe --library --serve` starts a server only then."""
    from ..reading.describe import settled_summary

    _, by_run = library_runs(library)
    return any(settled_summary(run, opts.model_copy(update={"doc_ids": frozenset(ids)})).owed
               for (run, _), ids in sorted(by_run.items()) if RunDir(run).pages.is_file())


def describe_library_settled(library: Path, opts: DescribeOptions, *, progress: Callable[[str], None] | None = None,
                             handle_signals: bool = False) -> LibraryDescribe:
    """What a library owing nothing reports: each run's settled summary, no endpoint asked."""
    return describe_library(library, opts, progress=progress, handle_signals=handle_signals, describe=_settled)


def _settled(run: str, opts: DescribeOptions, **_: Any) -> DescribeSummary:
    from ..reading.describe import settled_summary

    return settled_summary(run, opts)

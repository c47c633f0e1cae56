"""`vlmocr report`: one build of the static HTML report of a run, stage by stage: gather the run
(gather.py), queue the flagged pages (review.py), render their thumbnails (thumbs.py), write the
data and assets (site.py), then the HTML pages (html_pages.py)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import UsageError
from ..files import write_text_atomic
from ..runfolder.record import JsonObject
from ..runfolder.rundir import PAGES_FILE, RunDir
from .gather import ReportOptions, gather, micro_cer, micro_cer_clean
from .html_pages import IndexContext, index_html, shell_html
from .review import review_queues
from .site import prepare_out, write_assets, write_data
from .thumbs import make_thumbs, prune_thumbs


@dataclass
class ReportResult:
    out: Path
    pages: int
    documents: int
    records: int
    flagged: int
    thumbs: int
    thumbs_skipped: int
    statuses: dict[str, int]
    cer: float | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def index(self) -> Path:
        return self.out / "index.html"

    def as_dict(self) -> JsonObject:
        return {"out": str(self.out), "index": str(self.index), "pages": self.pages, "documents": self.documents,
                "records": self.records, "flagged": self.flagged, "thumbs": self.thumbs,
                "thumbs_skipped": self.thumbs_skipped, "statuses": self.statuses, "cer": self.cer,
                "seconds": round(self.seconds, 3), "notes": self.notes}


def build_report(opts: ReportOptions, log: Callable[[str], None] | None = None) -> ReportResult:
    t0 = time.monotonic()
    say = log or (lambda _msg: None)
    run_dir = Path(opts.run_dir)
    out = Path(opts.out)
    _check(opts, run_dir, out)
    prepare_out(out)
    notes: list[str] = []
    run = gather(opts, notes, say)
    queues = review_queues(run.pages, opts.cer_threshold)
    thumbs = make_thumbs(queues["all"], run.docs, opts, run.run_info, out, notes, say)

    say("writing data")
    title = opts.title or f"vlmocr report: {run_dir.resolve().name}"
    meta = write_data(out, run, queues, opts, title)
    # Only once the new data is in place: an open report keeps its thumbnails until then.
    prune_thumbs(out, thumbs.used)
    write_assets(out)

    statuses = Counter(p.status for p in run.pages)
    scored = [p for p in run.pages if p.cer is not None]
    cer_micro = micro_cer(scored)
    ctx = IndexContext(
        title=title, run=run, statuses=dict(statuses), queues=queues, opts=opts, cer_micro=cer_micro,
        cer_macro=(sum(p.cer for p in scored if p.cer is not None) / len(scored)) if scored else None,
        cer_clean=micro_cer_clean(scored), scored=len(scored), thumbs=thumbs.made, notes=notes,
        generated=meta["generated_at"],
    )
    write_text_atomic(out / "index.html", index_html(ctx))
    write_text_atomic(out / "review.html", shell_html(title, "review"))
    write_text_atomic(out / "doc.html", shell_html(title, "doc"))

    return ReportResult(out=out, pages=len(run.pages), documents=len(run.docs), records=run.n_records,
                        flagged=len(queues["all"]), thumbs=thumbs.made, thumbs_skipped=thumbs.skipped_cap,
                        statuses=dict(statuses), cer=cer_micro, seconds=time.monotonic() - t0, notes=notes)


def _check(opts: ReportOptions, run_dir: Path, out: Path) -> None:
    if not RunDir(run_dir).pages.is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    if opts.thumb_size < 16 or opts.thumb_size > 4000:
        raise UsageError(f"--thumb-size {opts.thumb_size}: choose 16…4000 px")
    if opts.max_thumbs < 0:
        raise UsageError("--max-thumbs must be 0 or more")
    if not 0 <= opts.cer_threshold:
        raise UsageError("--cer-threshold must be 0 or more")
    try:
        if out.resolve() == run_dir.resolve():
            raise UsageError("--out must not be the run directory itself")
    except OSError:
        pass

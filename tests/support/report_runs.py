"""Run directories for the report tests, written with the real record writer over real files."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from vlmocr.runfolder.record import PageRecord, Status
from vlmocr.runfolder.store import PAGES_FILE, RecordWriter

from .documents import make_text_pdf, text_image
from .records import finals

XSS = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned2'\">"
XSS_DOC = "delta<img src=x onerror=alert(1)>"  # a doc id with markup in it (ids may hold < and >)
KEY = "k-report-test"


@dataclass
class FlaggedRun:
    run_dir: Path
    truth_csv: Path
    pdf: Path
    image: Path
    finals: dict[tuple[str, int], dict] = field(default_factory=dict)

    @property
    def statuses(self) -> Counter:
        return Counter(r["status"] for r in self.pages())

    def pages(self) -> list[dict]:
        with_pages = {d for d, p in self.finals if p > 0}
        return [r for (d, p), r in self.finals.items() if p > 0 or d not in with_pages]


def _record(doc_id: str, source: str, page: int, status: Status, text: str, *, at: datetime, **kw) -> PageRecord:
    return PageRecord(doc_id=doc_id, source=source, page=page, key=KEY, status=status, text=text,
                      finished_at=at.isoformat(timespec="milliseconds"), **kw)


def make_flagged_run(root: Path) -> FlaggedRun:
    """A run over a real 6-page PDF, a PNG and a missing file, with every kind of flagged page,
    a page whose text is an XSS attempt, a cleaned layer, a run.json and a truth CSV."""
    src = root / "src"
    src.mkdir(parents=True)
    pdf = make_text_pdf(src / "alpha.pdf", [[f"Alpha page {n}", "The quick brown fox jumps over the lazy dog."]
                                            for n in range(1, 7)])
    image = src / "gamma.png"
    text_image(["Gamma scanned page", "Typewritten report of 1938"]).save(image)
    run = root / "run"
    t0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
    tick = iter(range(1000))

    def at() -> datetime:
        return t0 + timedelta(seconds=7 * next(tick))

    alpha, gamma = str(pdf), str(image)
    loop_text = "the the the the " * 200
    records = [
        _record("alpha", alpha, 1, Status.ok, "Alpha page 1\nThe quick brown fox jumps over the lazy dog.", at=at(),
                engine="rapidocr", finish_reason="stop", seconds=1.2, width=1654, height=2339, dpi=200.0),
        _record("alpha", alpha, 2, Status.error, "", at=at(), engine="openai", model="olmocr-2", attempt=1,
                error="HTTP 500 after 6 retries", seconds=30.0),
        _record("alpha", alpha, 2, Status.loop, loop_text, at=at(), engine="openai", model="olmocr-2", attempt=2,
                finish_reason="length", flags=["loop", "retried"], seconds=41.5, tokens_in=1200, tokens_out=4096),
        _record("alpha", alpha, 3, Status.empty, "", at=at(), engine="openai", model="olmocr-2",
                finish_reason="stop", seconds=2.0),
        _record("alpha", alpha, 4, Status.fallback, "Alpha page 4\nThe quick brown fox jumps over the lazy dog.",
                at=at(), engine="rapidocr", finish_reason="stop", flags=["fallback:rapidocr"], attempt=3, seconds=3.1),
        _record("alpha", alpha, 5, Status.truncated, XSS + "\nAlpha page 5", at=at(), engine="openai",
                model="olmocr-2", finish_reason="length", flags=["truncated"], seconds=20.0),
        _record("alpha", alpha, 6, Status.refused, "I cannot help with that.", at=at(), engine="openai",
                model="olmocr-2", finish_reason="stop", seconds=1.0),
        _record("beta", str(src / "beta.pdf"), 0, Status.bad_input, "", at=at(), engine="auto",
                error="file not found: beta.pdf"),
        _record("gamma", gamma, 1, Status.ok, "Garnrna scanncd pagc\nTypcwrittcn rep0rt of 1g38", at=at(),
                engine="rapidocr", finish_reason="stop", seconds=0.8),
        _record(XSS_DOC, str(src / "delta.pdf"), 1, Status.empty, "", at=at(), engine="rapidocr"),
        _record("omega", alpha, 1, Status.ok, "Alpha page 1 again", at=at(), engine="textlayer"),
    ]
    with RecordWriter(run / PAGES_FILE) as w:
        for rec in records:
            w.append(rec)
    # The cleaned layer (what `vlmocr clean` writes): one record per page, text cleaned.
    with RecordWriter(run / "clean" / PAGES_FILE) as w:
        for rec in finals(run).values():
            text = rec.get("text") or ""
            if rec["status"] == "loop":
                text = "the the"
            w.append({**rec, "text": text.replace("Garnrna", "Gamma"), "clean": {"changed": True}})
    summary = {"pages": 10, "docs": 5, "records": 10, "ok": 3, "fallback": 1, "review": 4, "failed": 2, "missing": 0,
               "read_now": 11, "seconds": 77.0, "pages_per_hour": 514.3, "exit_code": 1}
    (run / "run.json").write_text(json.dumps({
        "schema": 1, "settings": {"engine": "openai", "model": "olmocr-2", "inputs": [str(src)]},
        "key": KEY, "keys": [KEY], "versions": {"vlmocr": "0.1.0"}, "host": "test",
        "summary": summary, "history": [{"summary": summary}],
    }), encoding="utf-8")
    truth_csv = root / "truth.csv"
    truth_csv.write_text(
        "doc_id,page,text\n"
        'alpha,1,"Alpha page 1\nThe quick brown fox jumps over the lazy dog."\n'
        "alpha,5,Alpha page 5\n"
        'gamma,1,"Gamma scanned page\nTypewritten report of 1938"\n'
        "missingdoc,1,never read\n",
        encoding="utf-8")
    return FlaggedRun(run, truth_csv, pdf, image, finals(run))


def write_large_run(run: Path, pdf: Path, *, docs: int, pages_per_doc: int, flag_every: int = 37) -> int:
    """`docs * pages_per_doc` synthetic final records (every `flag_every`-th page flagged),
    each document's source being the same real PDF so thumbnails can be rendered."""
    statuses = [Status.loop, Status.truncated, Status.empty, Status.fallback, Status.error, Status.refused]
    t0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
    n = 0
    with RecordWriter(run / PAGES_FILE) as w:
        for d in range(docs):
            doc_id = f"book-{d:05d}"
            for p in range(1, pages_per_doc + 1):
                flagged = n % flag_every == 0
                status = statuses[(n // flag_every) % len(statuses)] if flagged else Status.ok
                text = f"{doc_id} page {p}\n" + "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 5
                w.append({"schema": 1, "doc_id": doc_id, "source": str(pdf), "page": p, "doc_pages": pages_per_doc,
                          "key": KEY, "status": status.value, "text": text, "engine": "openai", "model": "m",
                          "finish_reason": "stop", "attempt": 1, "seconds": 2.5, "flags": [], "error": None,
                          "finished_at": (t0 + timedelta(seconds=n)).isoformat()})
                n += 1
    return n

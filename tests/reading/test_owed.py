"""The page counter (reading/owed.py) behind the progress total: it counts every page a run owes
before or while the run reads, opens each document the resume index does not know exactly
once (in growing batches through the real worker pool), and the planner reads those counts
instead of opening the documents again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from support.documents import make_text_pdf
from vlmocr.progress import RunProgress
from vlmocr.reading.scheduler import Scheduler, make_reader
from vlmocr.settings.config import RunConfig


def spied_run(cfg: RunConfig) -> tuple[dict[str, list], RunProgress, object]:
    """A real run whose reader notes every document it is asked to open."""
    calls: dict[str, list] = {"one": [], "many": []}

    async def factory(c: RunConfig):
        reader = await make_reader(c)
        one, many = reader.inspect, reader.inspect_many

        async def inspect(path: str):
            calls["one"].append(Path(path).name)
            return await one(path)

        async def inspect_many(paths: list[str]):
            calls["many"].append([Path(p).name for p in paths])
            return await many(paths)

        reader.inspect, reader.inspect_many = inspect, inspect_many
        return reader

    progress = RunProgress(enabled=False)
    summary = asyncio.run(Scheduler(cfg, progress, reader_factory=factory).run())
    return calls, progress, summary


def test_resumed_run_counts_what_it_owes_and_opens_each_new_document_once(tmp_path):
    src, run = tmp_path / "in", tmp_path / "run"
    src.mkdir()
    make_text_pdf(src / "a.pdf", [["alpha one"], ["alpha two"], ["alpha three"]])
    cfg = RunConfig(inputs=[str(src)], out=run, engine="textlayer", workers=1)
    calls, progress, summary = spied_run(cfg)
    assert calls == {"one": [], "many": [["a.pdf"]]}
    assert (progress.total, progress.already, progress.done, summary.read_now) == (3, 0, 3, 3)

    # New documents beside the finished one: two readable, one that cannot be opened (its
    # page-0 record is the one page it owes, as in the summary).
    make_text_pdf(src / "b.pdf", [["bravo one"], ["bravo two"]])
    (src / "c.pdf").write_bytes(b"%PDF-1.4\nnot a PDF after all\n")
    make_text_pdf(src / "d.pdf", [["delta one"]])
    calls, progress, summary = spied_run(cfg)
    assert calls["one"] == []  # the planner took every count from the counter
    assert calls["many"] == [["b.pdf"], ["c.pdf", "d.pdf"]]  # a.pdf known: never opened; batches grow
    assert (progress.total, progress.already, progress.done) == (4, 3, 4)
    assert not progress.counting and progress.docs_counted == 4
    assert (summary.read_now, summary.pages, summary.failed) == (4, 7, 1)

    # --force owes every page again: all documents opened, in batches of 1, 2, 4 …
    calls, progress, summary = spied_run(RunConfig(inputs=[str(src)], out=run, engine="textlayer", workers=1,
                                                   force=True))
    assert calls == {"one": [], "many": [["a.pdf"], ["b.pdf", "c.pdf"], ["d.pdf"]]}
    assert (progress.total, progress.already, progress.done, summary.read_now) == (7, 0, 7, 7)

    # Nothing owed: the counter opens nothing and the total is 0 of 0, 7 already read.
    calls, progress, summary = spied_run(cfg)
    assert calls == {"one": [], "many": [["c.pdf"]]}  # a document without pages is asked again
    assert (progress.total, progress.already, summary.read_now) == (0, 7, 0)

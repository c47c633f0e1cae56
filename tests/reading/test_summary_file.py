"""RUN/summary.json, the run's own tally that `vlmocr slurm status` reads instead of the records
(issue 18, seed 000: nothing heavy on the login node): written with run.json at the start and the
end of a run and, while pages are read, every SUMMARY_EVERY seconds (here: after every record)."""

from __future__ import annotations

import asyncio
import json

from support.documents import make_text_pdf
from vlmocr.progress import RunProgress
from vlmocr.reading import scheduler
from vlmocr.reading.scheduler import Scheduler
from vlmocr.settings.config import RunConfig


def test_summary_json_follows_the_run_and_ends_with_its_outcome(tmp_path, monkeypatch):
    src, run = tmp_path / "in", tmp_path / "run"
    src.mkdir()
    make_text_pdf(src / "a.pdf", [["alpha one"], ["alpha two"], ["alpha three"]])
    (src / "b.pdf").write_bytes(b"%PDF-1.4\nnot a PDF after all\n")
    written: list[dict] = []
    real_write = scheduler.write_json_atomic

    def keep(path, data):  # the real atomic write; a copy of every summary.json as it was written
        real_write(path, data)
        if path.name == "summary.json":
            written.append(json.loads(path.read_text()))

    monkeypatch.setattr(scheduler, "write_json_atomic", keep)
    monkeypatch.setattr(scheduler, "SUMMARY_EVERY", 0.0)
    cfg = RunConfig(inputs=[str(src)], out=run, engine="textlayer", workers=1)
    summary = asyncio.run(Scheduler(cfg, RunProgress(enabled=False)).run())

    first, last = written[0], written[-1]
    # At the start nothing is read: each document counts one page owed (none opened yet).
    assert (first["state"], first["final"], first["missing"], first["exit_code"]) == ("running", 0, 2, None)
    during = [w for w in written[1:-1] if w["state"] == "running"]
    finals = [w["final"] for w in during]  # kept current while pages are read: 1, 2, 3, 4
    assert finals and finals[0] == 1 and finals == sorted(finals) and finals[-1] == 4
    assert during[0]["pages"] == 4  # a.pdf's page count known from its first record
    # The end: the same counts as the Done line, and the outcome.
    assert last["state"] == "finished" and last["exit_code"] == last["last_exit"] == int(summary.exit_code())
    assert (last["pages"], last["final"], last["ok"], last["failed"], last["missing"], last["bad_inputs"]) == \
        (summary.pages, summary.records, summary.ok, summary.failed, summary.missing, 1) == (4, 4, 3, 1, 0, 1)
    assert json.loads((run / "summary.json").read_text()) == last

    # A resume: at its start the file still says how the last run ended.
    written.clear()
    asyncio.run(Scheduler(cfg, RunProgress(enabled=False)).run())
    assert (written[0]["state"], written[0]["final"], written[0]["last_exit"]) == ("running", 4, last["exit_code"])
    assert written[-1]["state"] == "finished"

"""The scheduler: documents → page tasks → a reader → the single writer.

It never knows which engine it drives. It keeps a bounded number of pages in flight, writes
each finished page at once (one line, flushed), and on SIGTERM/SIGINT stops taking pages,
lets the ones in flight finish for a grace period, and exits 130 without a partial record."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

from .. import stopsignal
from ..engines.base import EngineOptions
from ..engines.choice import choose_ocr_engine, earlier_choice
from ..engines.registry import CPU_ENGINES, HTTP_ENGINE, OCR_ENGINES, peak_worker_mb
from ..exceptions import EndpointUnavailable, ExitCode, StoreFailed, UsageError, outcome
from ..figures.placement import add_figures, rebuild_documents
from ..files import RunLock, write_json_atomic
from ..inputs.render import count_pages
from ..inputs.skipped import SkippedCounts, SkippedFiles
from ..inputs.skipped import phrase as skipped_phrase
from ..inputs.sources import Document, discover, parse_shard, shard_of
from ..machine import WorkerCount, available_cores, choose_workers, system_memory
from ..progress import RunProgress
from ..redact import public_argv
from ..runfolder.assemble import write_document
from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject, PageRecord, PageTask, Row, Status, now_iso
from ..runfolder.rundir import RunDir, RunInfo, git_commit, reading_said, versions
from ..runfolder.store import DocState, RecordWriter, ResumeIndex
from ..settings.config import Endpoint, RunConfig, settings_key
from .bad_inputs import write_bad_inputs
from .base import PageReader
from .cpu import CpuReader
from .limiter import Limiter
from .owed import PageCounter, first_reads, reopen, select_pages
from .plan import RunPlan
from .pool import WorkerPool
from .tasks import TaskRunner

# Seconds between rewrites of summary.json while pages are read (a tally of the resume index:
# milliseconds for a shard of 15 000 pages).
SUMMARY_EVERY = 30.0

# Documents → (those to read, a note on what was left out and why, or "").
DocumentFilter = Callable[[list[Document]], tuple[list[Document], str]]


def _pages_unopened(doc: Document) -> int:
    """The pages of a document the run has not opened, as it would select them: its manifest's
    selection, else its page count (1 when it cannot be counted: its bad_input record is one)."""
    if doc.pages is not None:
        return len(doc.pages)
    try:
        return count_pages(doc.path)
    except Exception:  # unreadable: reading it will say why, in a record for its page 0
        return 1


@dataclass
class Summary:
    pages: int = 0
    docs: int = 0
    records: int = 0
    ok: int = 0
    fallback: int = 0
    review: int = 0
    failed: int = 0
    bad_input: int = 0  # of `failed`: unreadable inputs (RUN/bad_inputs.csv); a resubmit cannot help
    missing: int = 0
    read_now: int = 0
    seconds: float = 0.0
    workers: int = 0  # the worker processes the run started (machine.py chose how many)
    interrupted: bool = False
    unavailable: bool = False  # the endpoint stopped answering: resubmit when it is back
    attempts: dict[int, int] = field(default_factory=dict)  # pages by attempts of their final record
    statuses: dict[str, int] = field(default_factory=dict)
    run_dir: str = ""
    # Documents whose share of fallback pages exceeds --max-fallback: read mostly by the
    # embedded engine, they deserve a look (or another model) before they are published.
    fallback_docs: list[str] = field(default_factory=list)
    # Files of the folders walked that are no documents, by type, and hidden entries ignored
    # (skipped.py); run.json's `skipped` lists their paths.
    skipped: SkippedCounts = field(default_factory=lambda: SkippedCounts())

    @property
    def pages_per_hour(self) -> float:
        return self.read_now / self.seconds * 3600 if self.seconds > 0 else 0.0

    def done_line(self) -> str:
        # The rate only when pages were read: "(0 pages/h)" after nothing to do reads as a stall.
        rate = f" ({self.pages_per_hour:.0f} pages/h)" if self.read_now else ""
        return (
            f"Done: {self.pages} pages in {self.docs} docs, records={self.records} ok={self.ok} "
            f"fallback={self.fallback} review={self.review} failed={self.failed}"
            + (f" bad_input={self.bad_input} (listed in bad_inputs.csv)" if self.bad_input else "")
            + f" missing={self.missing}{rate}"
            + (f"; {left}" if (left := skipped_phrase(self.skipped)) else "")
            + (f"; interrupted: {self.read_now} pages read this time, run the same command to resume"
               if self.interrupted else "")
        )

    def exit_code(self) -> ExitCode:
        return outcome(unfinished=bool(self.missing or self.failed > self.bad_input), review=bool(self.review),
                       interrupted=self.interrupted, unavailable=self.unavailable, bad_inputs=bool(self.bad_input))

    def as_dict(self) -> JsonObject:
        d = asdict(self)
        d["pages_per_hour"] = round(self.pages_per_hour, 1)
        d["exit_code"] = int(self.exit_code())
        return d


async def make_reader(plan: RunPlan) -> PageReader:
    cfg = plan.cfg
    reader = plan.reader()
    if cfg.vlm_tier and reader == HTTP_ENGINE:
        raise UsageError("--vlm-tier makes a VLM the last tier after a CPU engine: --engine auto, tesseract, "
                         "rapidocr, tesseract,rapidocr … — not openai")
    earlier = None
    if cfg.cpu_tiers_from:  # refused without a VLM tier, or when it names no run
        from .cascade import earlier_readings

        earlier = earlier_readings(cfg, cfg.out)
    options: EngineOptions = {"lang": cfg.lang, "threads": 1, "rotate_pages": cfg.rotate_pages,
                               "deskew": cfg.deskew, "clean_scans": cfg.clean_scans,
                               "repair": cfg.repair,
                               # a language a person gave, not the default: wrong_language judges by it
                               "lang_given": "lang" in cfg.model_fields_set}
    if cfg.uses_ocr_choice():
        options["engine_choice"] = str(plan.ocr_choice())  # on every record `auto` reads by OCR
    # Engines whose libraries the forkserver imports once for every worker. The VLM reader's
    # fallback engine is rarely needed: its first use imports it instead of every start-up.
    options["preload"] = [] if reader == HTTP_ENGINE else sorted({reader, "textlayer"})
    if reader == HTTP_ENGINE and cfg.rotate_pages != "off":
        # The first page of each document is looked at by RapidOCR's line classifier before it is
        # sent: its onnxruntime is imported once by the forkserver, while the endpoint
        # is asked for its models, not by the first page's worker (~2 s on its critical path).
        options["preload_modules"] = ["onnxruntime", "vlmocr.engines.upright"]
    engine = CPU_ENGINES[plan.ocr_choice().engine if reader == HTTP_ENGINE else reader]
    # A fallback engine `auto` chose was found installed with its data by the choice itself: its
    # check (two tesseract processes) would only slow every VLM run's start.
    named = reader != HTTP_ENGINE or cfg.ocr_engine != "auto"
    if engine.check is not None and named:
        options.update(engine.check(options))
    pool = WorkerPool(plan.pool_workers(), options)
    if reader == HTTP_ENGINE:
        # The pool starts now, in a thread: the forkserver imports the page code on the other
        # core while this process imports the HTTP client and asks the endpoint for its models.
        # CPU readers start it at their first task instead: a run with nothing left to do
        # (resume of a finished run) then never starts it (0.4 s saved).
        pool.warm()
        from .vlm import make_vlm_reader

        try:
            return await make_vlm_reader(plan, pool)
        except BaseException:
            pool.shutdown(abandon=True)
            raise
    if cfg.vlm_tier:
        # Issue 30: the VLM reads the pages the CPU engine leaves for review; both share the pool.
        from .cascade import VlmTierReader
        from .vlm import make_vlm_reader

        pool.warm()
        try:
            vlm_plan = RunPlan(cfg.model_copy(update={"engine": HTTP_ENGINE, "vlm_tier": False}), plan.ocr,
                               plan.workers, plan.endpoint)
            vlm = await make_vlm_reader(vlm_plan, pool)
        except BaseException:
            pool.shutdown(abandon=True)
            raise
        return VlmTierReader(CpuReader(plan, pool), vlm, earlier)
    return CpuReader(plan, pool)


class Scheduler(TaskRunner):
    """Pages: plan the documents, run the reader over the pages owed, write each record."""

    def __init__(self, cfg: RunConfig, progress: RunProgress | None = None,
                 reader_factory: Callable[[RunPlan], Awaitable[PageReader]] = make_reader,
                 skip: DocumentFilter | None = None, endpoint: Endpoint | None = None) -> None:
        if cfg.out is None:
            raise UsageError("--out RUN is required")
        self.progress = progress or RunProgress(enabled=False)
        super().__init__(self.progress.note, cfg.stop_grace)
        self.cfg = cfg
        # What the run decides (its OCR engine, its workers) joins the server it was given here.
        self.plan = RunPlan(cfg, endpoint=endpoint)
        self.run_dir = Path(cfg.out)
        self.reader_factory = reader_factory
        self.skip = skip
        self.summary = Summary(run_dir=str(self.run_dir))
        self.skipped = SkippedFiles()
        # Documents being read in full this run: their pages' records, kept until the last comes
        # and the document is assembled from them (doc_id → (pages expected, records by page)).
        self._collect: dict[str, tuple[int, dict[int, Row]]] = {}
        self._deferred: set[str] = set()
        self._ladder: deque[PageTask] = deque()
        # summary.json: rewritten with run.json and every SUMMARY_EVERY s of reading in between.
        self._docs: list[Document] = []
        self._reading_changed = False
        self._keys: dict[str, str] = {}
        self._summary_at = time.monotonic()
        self.worker_count: WorkerCount | None = None  # the pool's size and why (run.json)

    # ------------------------------------------------------------------ documents

    def documents(self) -> list[Document]:
        self.skipped = SkippedFiles()
        docs = discover(self.cfg.inputs, self.cfg.manifest, skipped=self.skipped)
        self.summary.skipped = self.skipped.counts()
        if self.skipped.files:
            self.progress.note(f"{self.skipped.phrase()} (not documents; run.json lists them)")
        if self.cfg.shard:
            k, n = parse_shard(self.cfg.shard)
            docs = [d for d in docs if shard_of(d.doc_id, n) == k]
        if self.skip is not None:
            docs, why = self.skip(docs)
            if why:
                self.progress.note(why)
        return docs

    # ------------------------------------------------------------------ main

    async def run(self) -> Summary:  # noqa: PLR0915 (long: to be split)
        cfg = self.cfg
        docs = self.documents()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock = RunLock(self.run_dir)
        lock.acquire()
        self.listen()
        early = stopsignal.pending()
        if early is not None:
            self.on_signal(early)
        t0 = time.monotonic()
        started = now_iso()
        try:
            self._choose_ocr_engine()
            self._choose_workers(docs)
            self.reader = await self.reader_factory(self.plan)
            self.reader.attach(self.progress.note)
            if not self.reader.waits_for_pages_in_flight:
                self.stop_grace = 0.0  # a CPU run stops at once on SIGTERM too: its pages are redone on resume
            keys = {d.doc_id: settings_key(self.reader.doc_key_material(d.dpi, d.language)) for d in docs}
            try:
                self._reading_changed = check_one_reading(self.run_dir, self.reader.key_material(), cfg)
            except BaseException:
                await self.reader.aclose()
                raise
            self._note_document_languages(docs)
            self._docs, self._keys = docs, keys
            pages_path = RunDir(self.run_dir).pages
            self.index = ResumeIndex.load(pages_path, set(keys.values()))
            try:
                self._write_run_json(docs, keys, started, None)
                self.writer = RecordWriter(pages_path)
            except BaseException as exc:
                await self.reader.aclose()
                if isinstance(exc, OSError):
                    raise StoreFailed(f"cannot write the run directory {self.run_dir}: {exc.strerror or exc}") from None
                raise
            if self.writer.repaired:
                self.progress.note(f"[yellow]repaired a torn last line in {pages_path} ({self.writer.repaired} bytes)")
            self.progress.start()
            try:
                await self._schedule(docs, keys)
            finally:
                await self.reader.aclose(abandon=self.abandon.is_set())
                try:
                    self.writer.close()
                except OSError as exc:  # the last fsync: the disk filled since the last write
                    self.store_failed(str(pages_path), exc)
                self.progress.stop()
            self.summary.interrupted = self.interrupted
            self.summary.unavailable = isinstance(self.fatal, EndpointUnavailable)
            self.summary.seconds = time.monotonic() - t0
            if isinstance(self.fatal, StoreFailed):
                # Nothing more is written but run.json, if it fits: the records on disk are
                # intact (a torn last line is repaired on resume) and the rest is read then.
                self._tally(docs, keys)
                try:
                    self._write_run_json(docs, keys, started, self.summary)
                except OSError:
                    pass
                raise self.fatal
            self._assemble(docs, keys)
            self._tally(docs, keys)
            write_bad_inputs(self.run_dir, docs, keys, self.index)
            self._write_run_json(docs, keys, started, self.summary)
            if self.fatal is not None and not isinstance(self.fatal, EndpointUnavailable):
                raise self.fatal
        finally:
            try:
                self.stop_listening()  # --serve's SIGTERM handler is back: it may raise from here on
            finally:
                lock.release()
        return self.summary

    def _choose_ocr_engine(self) -> None:
        """The engine `auto` reads scans with (and a VLM's fallback), once per run, said once.
        A run directory goes on with the engine it was started with (engines/choice.py), unless
        --force reads it again whole."""
        cfg = self.cfg
        if not cfg.uses_ocr_choice():
            return
        run_dir = RunDir(self.run_dir)
        started = not cfg.force and run_dir.pages.exists() and run_dir.pages.stat().st_size > 0
        earlier = earlier_choice(run_dir.info(), OCR_ENGINES) if started else None
        choice = choose_ocr_engine(cfg.ocr_engine, cfg.lang, earlier=earlier)
        self.plan = self.plan.with_ocr(choice)
        if cfg.engine == "auto" and self.plan.reader() != HTTP_ENGINE:
            self.progress.note(f"engine auto: the text layer where usable, else {choice.engine} ({choice.reason})")
        else:
            self.progress.note(f"fallback engine: {choice.engine} ({choice.reason})")

    def _choose_workers(self, docs: list[Document]) -> None:
        """The pool's size: --workers when given, else the cores or what memory holds of the
        engines' workers (machine.py), said once when memory decides or is exceeded. A
        VLM run's workers only render: not limited."""
        cfg, plan = self.cfg, self.plan
        engines: tuple[str, ...] = ()
        if plan.reader() != HTTP_ENGINE:
            readings = (plan.document_reading(lang) for lang in sorted({d.language for d in docs if d.language}))
            engines = tuple(dict.fromkeys([plan.reader(), *(way.reader for way in readings if way is not None)]))
        per_worker = peak_worker_mb(engines)
        self.worker_count = choose_workers(cores=available_cores(),
                                           asked=cfg.workers if cfg.workers_given() else None, engines=engines,
                                           per_worker_mb=per_worker, memory=system_memory() if per_worker else None)
        self.plan = plan.with_workers(self.worker_count.count)
        self.summary.workers = self.worker_count.count
        note = self.worker_count.note()
        if note:
            self.progress.note(note)

    def _note_document_languages(self, docs: list[Document]) -> None:
        """Said once per language the documents state that changes how they are read: what reads
        them, or what to install when its data is missing (they are then read as the run's)."""
        if self.plan.reader() == HTTP_ENGINE:
            return
        for language in sorted({d.language for d in docs if d.language}):
            way = self.plan.document_reading(language)
            if way is not None and (way.note or way.reader != self.plan.reader() or way.tesseract_lang):
                said = way.choice or f"{way.reader} with {way.tesseract_lang}"
                self.progress.note(way.note or f"documents in {language}: {said}")

    async def _schedule(self, docs: list[Document], keys: dict[str, str]) -> None:
        """Pass 1 reads pages owed a first read; pass 2 climbs the retry ladder for review
        pages (those found on resume and those pass 1 produced)."""
        self.limiter = Limiter(self.reader.max_in_flight)
        controller = asyncio.create_task(self.reader.control_concurrency(self.limiter))
        try:
            await self._passes(docs, keys)
        finally:
            controller.cancel()
            await asyncio.gather(controller, return_exceptions=True)

    async def _passes(self, docs: list[Document], keys: dict[str, str]) -> None:
        # The progress total: every page owed, counted ahead of the planner, which takes each
        # document's page count from the counter rather than opening it again.
        counter = PageCounter(docs, keys, self.index, force=self.cfg.force, retry_only=self.cfg.retry_only,
                              inspect_many=self.reader.inspect_many, progress=self.progress,
                              force_bad=self.cfg.force_bad)

        async def first_pass():
            async for doc, inspected in counter.documents():
                if self.stop.is_set():
                    return
                for task in await self._plan_doc(doc, keys[doc.doc_id], inspected):
                    yield task

        counter.start()
        try:
            await self.drain(first_pass(), self._read_one, self.limiter)
        finally:
            await counter.close()
        if self.cfg.no_retry or self.stop.is_set() or self.abandon.is_set() or not self._ladder:
            return
        self.progress.note(f"retry ladder: {len(self._ladder)} page(s)")
        self.progress.start_phase("retrying", len(self._ladder))

        async def second_pass():
            while self._ladder and not self.stop.is_set():
                yield self._ladder.popleft()

        await self.drain(second_pass(), self._ladder_one, self.limiter)

    def _failed_records(self, task: PageTask, exc: BaseException, page_done: bool = True) -> None:
        """Every page of `task` ends with a record naming why it failed, whatever went wrong in
        the reader (a bug, an answer of an unforeseen shape): `error`, so a resubmit retries it."""
        reason = f"{type(exc).__name__}: {exc}"[:2000]
        for single in task.singles():
            self._finish(single.record(Status.error, engine=self.plan.reader(), flags=[Flag.internal_error.of()],
                                       error=f"internal error while reading: {reason}"), page_done)

    async def _read_one(self, task: PageTask) -> None:
        try:
            out = await self.reader.process(task)
        except EndpointUnavailable as exc:
            self.fail(exc)
            return
        except Exception as exc:
            self._failed_records(task, exc)
            return
        for rec in out if isinstance(out, list) else [out]:
            self._finish(rec)
            if rec.page > 0 and self.reader.owes_retry(rec.status, rec.attempt):
                # The ladder reads one page per request, whatever the first pass did.
                self._ladder.append(task.at(page=rec.page, pages=(), attempts=(), attempt=rec.attempt + 1))

    async def _ladder_one(self, task: PageTask) -> None:
        attempts = [task.attempt]
        last = [Status.error.value]  # the status the page ends the ladder with

        def emit(rec: PageRecord) -> None:
            attempts.append(rec.attempt + 1)
            last[0] = Status(rec.status).value
            self._finish(rec, page_done=False)  # one attempt: the page is done when the ladder is

        try:
            await self.reader.ladder(task, emit, self.stop.is_set)
        except EndpointUnavailable as exc:
            self.fail(exc)
            return
        except Exception as exc:
            self._failed_records(task.at(attempt=attempts[-1]), exc, page_done=False)
            last[0] = Status.error.value
        self.progress.advance(last[0])

    async def _plan_doc(self, doc: Document, key: str, inspected: tuple[int | None, str | None] | None = None) -> list[PageTask]:
        """The page tasks still owed for one document (opening it only when needed and not
        already `inspected` by the page counter)."""
        cfg = self.cfg
        state = self.index.get(key, doc.doc_id)
        doc_pages = state.doc_pages if state else None
        if doc_pages is None or cfg.force:
            n, err = inspected if inspected is not None else await self.reader.inspect(str(doc.path))
            if err is not None:
                if reopen(state, force=cfg.force, force_bad=cfg.force_bad):
                    self._finish(PageRecord(
                        doc_id=doc.doc_id, source=doc.source, page=0, doc_pages=None, key=key,
                        status=Status.bad_input, engine=cfg.engine, error=err,
                        attempt=(state.attempts_of(0) if state else 0) + 1,
                    ))
                return []
            doc_pages = n
        assert doc_pages is not None
        pages = select_pages(doc, doc_pages)
        # The document's language may choose its engine and Tesseract's data (its key says so).
        way = self.plan.document_reading(doc.language)
        first = PageTask(doc_id=doc.doc_id, source=doc.source, path=str(doc.path), page=pages[0] if pages else 1,
                         doc_pages=doc_pages, key=key, engine=cfg.engine, reader=way.reader if way else self.plan.reader(),
                         sizing=self.reader.sizing(doc.dpi), language=doc.language,
                         ocr_lang=way.tesseract_lang if way else None, engine_choice=way.choice if way else None,
                         language_suggested=doc.language_from == "triage", hard=doc.hard,
                         run_language=self.reader.run_language(), doc_dpi=doc.dpi)

        def spec(p: int, attempt: int) -> PageTask:
            return first.at(page=p, attempt=attempt)

        pending = first_reads(pages, state, force=cfg.force, retry_only=cfg.retry_only, force_bad=cfg.force_bad)
        if not (cfg.force or state is None):
            for p in pages:
                st = state.status(p)
                if st is not None and self.reader.owes_retry(st, state.attempts_of(p)):
                    self._ladder.append(spec(p, state.attempts_of(p) + 1))
                    self._deferred.add(doc.doc_id)
        if not pending:
            if not RunDir(self.run_dir).doc(doc.doc_id).exists():
                self._deferred.add(doc.doc_id)
            return []
        if len(pending) == len(pages):
            self._collect[doc.doc_id] = (len(pages), {})
        tasks = [spec(p, (state.attempts_of(p) if state else 0) + 1) for p in pending]
        n = self.reader.pages_per_request
        if n <= 1:
            return tasks
        return [chunk[0].at(pages=tuple(t.page for t in chunk), attempts=tuple(t.attempt for t in chunk))
                for chunk in (tasks[i:i + n] for i in range(0, len(tasks), n))]

    def _finish(self, record: PageRecord, page_done: bool = True) -> None:
        """The single point where a finished page becomes durable (`page_done`: a page of the
        progress bar, not one attempt of the retry ladder)."""
        if self.store_broken:
            return  # not durable, so not done: read again on resume
        try:
            rec = self.writer.append(record)  # the fields as written, for assembling documents
        except OSError as exc:
            self.store_failed(str(self.writer.path), exc)
            return
        self.index.add_record(record)
        self.summary.read_now += 1
        if time.monotonic() - self._summary_at > SUMMARY_EVERY:
            try:
                self._write_summary(self._docs, self._keys, None)
            except OSError:
                pass  # a full disk: the next record's write says so; this file is only a view
        self.progress.extra = self.reader.live()
        if page_done:
            self.progress.advance(record.status.value)
        doc_id = record.doc_id
        slot = self._collect.get(doc_id)
        if slot is not None and record.page > 0:
            expect, recs = slot
            recs[record.page] = Row.of(rec)
            if len(recs) >= expect:
                write_document(self.run_dir, doc_id, add_figures(self.run_dir, list(recs.values())))
                del self._collect[doc_id]
        else:
            # Assembled at the end from pages.jsonl (a resumed document, a ladder step, …).
            self._deferred.add(doc_id)

    # ------------------------------------------------------------------ results

    def _doc_complete(self, doc: Document, state: DocState | None) -> bool:
        if state is None:
            return False
        if state.doc_pages is None:
            return state.status(0) is not None
        return all(state.status(p) is not None for p in select_pages(doc, state.doc_pages))

    def _assemble(self, docs: list[Document], keys: dict[str, str]) -> None:
        wanted = {}
        for doc in docs:
            # Another reading made the folder's (--reread): every document is rebuilt from it,
            # also those it had read before and that needed nothing now.
            if self._reading_changed or doc.doc_id in self._deferred or doc.doc_id in self._collect:
                if self._doc_complete(doc, self.index.get(keys[doc.doc_id], doc.doc_id)):
                    wanted[doc.doc_id] = keys[doc.doc_id]
        if wanted:
            rebuild_documents(self.run_dir, wanted)

    def _tally(self, docs: list[Document], keys: dict[str, str], into: Summary | None = None) -> None:
        """The run's totals into `into` (a periodic summary.json: a document not opened yet counts
        as one page) or into the run's own summary (its Done line: such a document's pages counted,
        so a run stopped early says its own size, not the pages it had queued)."""
        s = self.summary if into is None else into
        s.docs = len(docs)
        counts: dict[str, int] = {}
        for doc in docs:
            state = self.index.get(keys[doc.doc_id], doc.doc_id)
            if state is None or state.doc_pages is None:
                st = state.status(0) if state else None
                if st is None:
                    # Not opened yet (a run stopped before it): its pages are the run's all the same.
                    n = _pages_unopened(doc) if into is None else 1
                    s.pages += n
                    s.missing += n
                else:
                    s.pages += 1
                    counts[st.value] = counts.get(st.value, 0) + 1
                continue
            selected = select_pages(doc, state.doc_pages)
            fallback = 0
            for p in selected:
                s.pages += 1
                st = state.status(p)
                if st is None:
                    s.missing += 1
                else:
                    counts[st.value] = counts.get(st.value, 0) + 1
                    n = state.attempts_of(p)
                    s.attempts[n] = s.attempts.get(n, 0) + 1
                    fallback += st is Status.fallback
            if fallback and fallback / len(selected) > self.cfg.max_fallback:
                s.fallback_docs.append(doc.doc_id)
        s.statuses = counts
        s.bad_input = counts.get(Status.bad_input.value, 0)
        for name, n in counts.items():
            group = Status(name).group
            setattr(s, group, getattr(s, group) + n)
            s.records += n

    def _provenance(self) -> JsonObject:
        """Versions and commit: asked once per run (a tesseract subprocess, a git call), though
        run.json is written at the start and at the end."""
        if not hasattr(self, "_provenance_cache"):
            # The run's engine and those documents stating their language are read with.
            readers = [self.plan.reader(), *sorted({way.reader for d in self._docs
                                                    if (way := self.plan.document_reading(d.language))})]
            engines = [CPU_ENGINES[name] for name in dict.fromkeys(readers) if name in CPU_ENGINES]
            served = self.reader.provenance()  # a VLM's server: {"server": {name, version, revision…}}
            server = served.get("server")
            name, version = (server.get("name"), server.get("version")) if isinstance(server, Mapping) else (None, None)
            extra = {str(name): str(version) if version is not None else None} if name else {}
            self._provenance_cache = {"versions": versions({**{k: v for e in engines for k, v in e.versions().items()},
                                                            **extra}),
                                      "git_commit": git_commit(), **served}
        return self._provenance_cache

    def _write_run_json(self, docs: list[Document], keys: dict[str, str], started: str, summary: Summary | None) -> None:
        run_dir = RunDir(self.run_dir)
        history = list(run_dir.run_info().history)
        entry: JsonObject = {"started_at": started, "host": socket.gethostname(), "pid": os.getpid(),
                 "argv": public_argv(sys.argv[1:]), "key": settings_key(self.reader.key_material())}
        stats = self.reader.final_stats()
        if stats is not None:
            entry["reader"] = stats
        if summary is not None:
            entry["finished_at"] = now_iso()
            entry["summary"] = summary.as_dict()
            history.append(entry)
        info = RunInfo(
            settings=self.cfg.public_dict(),
            key=settings_key(self.reader.key_material()),
            keys=sorted(set(keys.values())),
            key_material=self.reader.key_material(),
            engine_choice=self.plan.ocr_choice().as_dict(self.cfg.lang) if self.cfg.uses_ocr_choice() else None,
            **self._provenance(),
            workers=self.worker_count.as_dict() if self.worker_count is not None else None,
            host=socket.gethostname(),
            documents=len(docs),
            skipped=self.skipped.as_dict(),
            shard=self.cfg.shard,
            current=entry,
            history=history[-50:],
            summary=summary.as_dict() if summary is not None else None,
        )
        write_json_atomic(run_dir.run_json, info.as_json())
        self._write_summary(docs, keys, summary)

    def _write_summary(self, docs: list[Document], keys: dict[str, str], final: Summary | None) -> None:
        """RUN/summary.json: what `vlmocr slurm status` shows of this run without parsing its
        records (a 64-shard, million-page run on a login node). `final` at the end of the run;
        else a tally of the records so far (pages of documents not opened yet count as one)."""
        s = final
        if s is None:
            s = Summary()
            self._tally(docs, keys, into=s)
        run_dir = RunDir(self.run_dir)
        before = run_dir.summary() or {}
        last_exit = before.get("exit_code") if before.get("state") == "finished" else before.get("last_exit")
        write_json_atomic(run_dir.summary_json, {
            "schema": 1,
            "state": "finished" if final is not None else "running",
            "updated_at": now_iso(), "host": socket.gethostname(), "pid": os.getpid(),
            "docs": len(docs), "pages": s.pages, "final": s.records,
            "ok": s.ok, "fallback": s.fallback, "review": s.review, "failed": s.failed, "missing": s.missing,
            "bad_inputs": s.statuses.get(Status.bad_input.value, 0), "statuses": s.statuses,
            "exit_code": int(final.exit_code()) if final is not None else None,
            "last_exit": int(final.exit_code()) if final is not None else last_exit,
            "keys": sorted(set(keys.values())),
        })
        self._summary_at = time.monotonic()


def run(cfg: RunConfig, progress: RunProgress | None = None, skip: DocumentFilter | None = None,
        reader_factory: Callable[[RunPlan], Awaitable[PageReader]] = make_reader,
        endpoint: Endpoint | None = None) -> Summary:
    """Library entry point: read every page owed under `cfg` and return the summary. `skip`
    leaves documents out before planning (e.g. those a library already holds) and says why;
    `reader_factory`: e.g. reading/settled.py's for a run that owes nothing; `endpoint`: the
    server vlmocr started for it (`--serve`)."""
    return asyncio.run(Scheduler(cfg, progress, reader_factory=reader_factory, skip=skip, endpoint=endpoint).run())


def check_one_reading(run_dir: Path, material: JsonObject, cfg: RunConfig) -> bool:
    """A run folder holds one reading: run with other settings than the folder's
    reading — engine, model, prompt, dpi, decoding: the settings key resume uses — and the run is
    refused (exit 3) naming both and the two ways on, unless --reread (or --force) makes the new
    one the folder's. True when the folder's reading changes (every document is then rebuilt)."""
    run = RunDir(run_dir)
    if not (run.pages.exists() and run.pages.stat().st_size > 0):
        return False
    info = run.run_info()
    old, new = info.key, settings_key(material)
    if not old or old == new:
        return False
    if cfg.reread or cfg.force:
        return True
    before = info.key_material
    differ = {k: v for k, v in material.items() if before.get(k) != v} or material
    raise UsageError(
        f"{run_dir} holds the reading {old[:12]} ({reading_said(before)}); these settings read {new[:12]} "
        f"({reading_said(differ)}): give a new --out to keep both "
        "(an A/B test), or --reread to make this the folder's reading (its pages read again; docs/, evaluate, "
        "report and export then show it)")


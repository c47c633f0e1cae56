"""What a run owes: the pages of each document still owed a first read, counted ahead of the
reading so the progress total is the number of pages owed (not "done + in flight").

`PageCounter` walks the documents in order while the scheduler reads. A document the resume
index already knows costs nothing; the others are inspected in the worker pool (their page
count), a growing batch per call: the pool's queue holds pages, and one call per document
would wait a page each. The scheduler's planner walks the same documents through
`PageCounter.documents()` and takes each count from there, so no document is opened twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field

from ..inputs.sources import Document
from ..progress import RunProgress
from ..runfolder.record import RETRY_ON_RESUME, Status
from ..runfolder.store import DocState, ResumeIndex

Inspected = tuple[int | None, str | None]  # (page count, None) or (None, why it cannot be read)
FIRST_BATCH, LAST_BATCH = 1, 256  # documents per pool call: the first page waits for one only


def needs_read(status: Status | None, force_bad: bool = False) -> bool:
    """`force_bad`: a `bad_input` page is read again (a person fixed the file: --force-bad)."""
    return status is None or status in RETRY_ON_RESUME or (force_bad and status is Status.bad_input)


def select_pages(doc: Document, doc_pages: int) -> list[int]:
    return list(doc.pages) if doc.pages else list(range(1, doc_pages + 1))


def first_reads(pages: list[int], state: DocState | None, *, force: bool, retry_only: bool,
                force_bad: bool = False) -> list[int]:
    """The pages of one document owed a first read (pass 1) in this run."""
    if retry_only:
        return []
    if force or state is None:
        return pages
    return [p for p in pages if needs_read(state.status(p), force_bad)]


def reopen(state: DocState | None, *, force: bool, force_bad: bool = False) -> bool:
    """Does a document that cannot be opened get a new page-0 record? Once only: then again
    under --force, or --force-bad when its record is `bad_input`."""
    prev = state.status(0) if state else None
    return prev is None or force or (force_bad and prev is Status.bad_input)


def needs_inspect(state: DocState | None, force: bool) -> bool:
    """Must the document be opened to learn its page count?"""
    return force or state is None or state.doc_pages is None


def owed_of(doc: Document, state: DocState | None, inspected: Inspected | None, *,
            force: bool, retry_only: bool, force_bad: bool = False) -> tuple[int, int]:
    """(pages this run owes a first read, pages earlier runs read) of one document; a document
    that cannot be opened is one page (its page-0 record), as in the run's summary."""
    if inspected is not None:
        n, err = inspected
        if err is not None or n is None:
            owed = int(reopen(state, force=force, force_bad=force_bad))
            return owed, 1 - owed
        doc_pages = n
    else:
        assert state is not None and state.doc_pages is not None
        doc_pages = state.doc_pages
    pages = select_pages(doc, doc_pages)
    owed = len(first_reads(pages, state, force=force, retry_only=retry_only, force_bad=force_bad))
    return owed, len(pages) - owed


@dataclass(eq=False)
class PageCounter:
    docs: list[Document]
    keys: dict[str, str]
    index: ResumeIndex
    _: KW_ONLY
    force: bool
    retry_only: bool
    inspect_many: Callable[[list[str]], Awaitable[list[Inspected]]]
    progress: RunProgress
    force_bad: bool = False
    _inspected: dict[int, Inspected] = field(default_factory=dict, init=False)  # counted ahead, not yet planned
    _cursor: int = field(default=0, init=False)  # documents counted
    _wake: asyncio.Future | None = field(default=None, init=False)
    _task: asyncio.Task | None = field(default=None, init=False)

    def start(self) -> None:
        self.progress.count_documents(len(self.docs))
        self._task = asyncio.create_task(self._walk())
        self._task.add_done_callback(lambda _t: self._notify())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _state(self, doc: Document) -> DocState | None:
        return self.index.get(self.keys[doc.doc_id], doc.doc_id)

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _count(self, i: int, inspected: Inspected | None) -> None:
        doc = self.docs[i]
        if inspected is not None:
            self._inspected[i] = inspected
        owed, already = owed_of(doc, self._state(doc), inspected, force=self.force, retry_only=self.retry_only,
                                force_bad=self.force_bad)
        self._cursor = i + 1
        self.progress.counted(owed, already)
        self._notify()

    async def _walk(self) -> None:
        batch_size = FIRST_BATCH
        i = 0
        while i < len(self.docs):
            if not needs_inspect(self._state(self.docs[i]), self.force):
                self._count(i, None)
                i += 1
                if i % 1000 == 0:
                    await asyncio.sleep(0)  # a resume over a million known documents: let pages flow
                continue
            batch: list[int] = []  # the next documents to open, skipping those already known
            j = i
            while j < len(self.docs) and len(batch) < batch_size:
                if needs_inspect(self._state(self.docs[j]), self.force):
                    batch.append(j)
                j += 1
            results = await self.inspect_many([str(self.docs[k].path) for k in batch])
            opened = dict(zip(batch, results))
            for k in range(i, j):
                self._count(k, opened.get(k))
            i = j
            batch_size = min(LAST_BATCH, batch_size * 2)

    async def documents(self) -> AsyncIterator[tuple[Document, Inspected | None]]:
        """The documents in order, each with its page count when the counter opened it (None:
        the resume index knows it, or the counter stopped; the planner opens it then)."""
        for i, doc in enumerate(self.docs):
            while self._cursor <= i and self._task is not None and not self._task.done():
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
            yield doc, self._inspected.pop(i, None)

"""The scheduler's only view of an engine: a page reader.

`process(task)` gives the record(s) of a task; the rest says how the reader wants to be driven.
Every member is declared here with what a reader that has no use for it does, so the scheduler
never probes a reader for what it happens to have."""

from __future__ import annotations

from typing import Callable

from ..runfolder.record import JsonObject, PageRecord, PageTask, Sizing, Status
from .limiter import Limiter


class PageReader:
    max_in_flight: int = 1
    pages_per_request: int = 1  # pages a task may hold (multi-page requests)
    # Whether a stop (SIGTERM) waits up to --stop-grace for the pages in flight: a VLM's requests are
    # GPU work worth keeping; a CPU page is read again on resume sooner than it is waited for, so a
    # CPU run stops at once.
    waits_for_pages_in_flight: bool = False

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        raise NotImplementedError

    def run_language(self) -> tuple[str, str] | None:
        """(the run's language, where it came from: --lang | profile | default), which a page is
        read as when its document states none; None for a reader that reads no language."""
        return None

    def key_material(self, doc_dpi: float | None = None) -> JsonObject:
        """Everything that changes a page's text under this reader: the settings key's input."""
        raise NotImplementedError

    def doc_key_material(self, doc_dpi: float | None, language: str | None) -> JsonObject:
        """`key_material` of a document stating its `language` (its manifest row): a reader
        whose engine or data it chooses (the CPU engines) says so; the others read it alike."""
        return self.key_material(doc_dpi)

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        """(page count, None), or (None, why the document cannot be read)."""
        raise NotImplementedError

    async def inspect_many(self, paths: list[str]) -> list[tuple[int | None, str | None]]:
        """`inspect` of several documents (the run's progress total is counted ahead of the
        reading). One by one here; a reader with a worker pool asks it in one call."""
        return [await self.inspect(path) for path in paths]

    async def process(self, task: PageTask) -> PageRecord | list[PageRecord]:
        raise NotImplementedError

    def owes_retry(self, status: Status | None, attempts: int) -> bool:
        """Does a page whose last record has `status` after `attempts` owe a ladder step?"""
        return False

    async def ladder(self, task: PageTask, emit: Callable[[PageRecord], None], should_stop: Callable[[], bool]) -> None:
        """Continue a review page's retry ladder from `task.attempt`, one record per attempt."""
        return None

    async def control_concurrency(self, window: Limiter) -> None:
        """Resize the scheduler's page `window` while the run lasts (adaptive concurrency)."""
        return None

    def attach(self, say: Callable[[str], None]) -> None:
        """Where the reader tells the person running it something once (the run's notes on
        stderr), given as the run starts."""
        return None

    def live(self) -> str:
        """A few words for the progress line."""
        return ""

    def final_stats(self) -> JsonObject | None:
        """What run.json records about the reader's run."""
        return None

    def provenance(self) -> JsonObject:
        """What run.json records about what read the pages beyond the versions of vlmocr and
        its libraries: a VLM's server (`{"server": {…}}`, reading/served.py)."""
        return {}

    async def aclose(self, abandon: bool = False) -> None:
        return None

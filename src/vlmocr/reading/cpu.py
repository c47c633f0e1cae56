"""The embedded engines' reader: render and read in the pool, so the image never crosses a
process boundary."""

from __future__ import annotations

from ..runfolder.record import JsonObject, PageRecord, PageTask, Sizing, Status
from . import worker
from .base import PageReader
from .plan import RunPlan
from .pool import WorkerPool


class CpuReader(PageReader):
    def __init__(self, plan: RunPlan, pool: WorkerPool) -> None:
        self.plan = plan
        self.cfg = plan.cfg
        self.pool = pool
        # Two pages per worker keep every core busy while results travel back.
        self.max_in_flight = pool.workers * 2

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        return self.cfg.sizing(doc_dpi)

    def key_material(self, doc_dpi: float | None = None) -> JsonObject:
        return self.plan.key_material(doc_dpi)

    def run_language(self) -> tuple[str, str] | None:
        return self.cfg.lang, "--lang" if "lang" in self.cfg.model_fields_set else "default"

    def doc_key_material(self, doc_dpi: float | None, language: str | None) -> JsonObject:
        return self.plan.key_material(doc_dpi, language=language)

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        ok, result = await self.pool.call_safely(worker.inspect_doc, path)
        if not ok:
            return None, "the document crashed the PDF reader"
        return result

    async def inspect_many(self, paths: list[str]) -> list[tuple[int | None, str | None]]:
        ok, result = await self.pool.call_safely(worker.inspect_docs, paths)
        return result if ok else [await self.inspect(path) for path in paths]  # one of them crashed pdfium

    async def process(self, task: PageTask) -> PageRecord:
        ok, result = await self.pool.call_safely(worker.read_page, task, self.pool.context)
        if ok:
            return result
        return task.record(Status.bad_input, engine=task.engine, error="the page crashed the reader process twice")

    async def aclose(self, abandon: bool = False) -> None:
        self.pool.shutdown(abandon)

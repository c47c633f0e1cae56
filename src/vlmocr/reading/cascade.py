"""A VLM as the last tier of a cascade (`run --engine tesseract,rapidocr --vlm-tier --endpoint URL`,
issue 30): the CPU engine(s) read every page; a page whose reading fails its signal (suspect or
empty: the review statuses a CPU reading can end with) is sent to the VLM as well, and the better
of the two readings by the signal is the page's record. The GPU reads only the pages the CPU
tiers could not; a fluent answer on a blank page stays `suspect` (its own signal: text on a blank
image), never `ok`.

One record a page, as any run: `tiers` lists every tier's reading in order (engine, status, score,
threshold, seconds), `engine` whose reading was kept, `engine_choice` why. Resume, shards and
SLURM jobs see an ordinary reader: its settings key holds both the CPU engines' and the VLM's."""

from __future__ import annotations

import time
from typing import Callable

from ..engines.pick import Candidate, pick
from ..runfolder.record import REVIEW, JsonObject, PageRecord, PageTask, Sizing, Status
from .base import PageReader
from .cpu import CpuReader
from .limiter import Limiter
from .vlm import SUPPORT_BELOW, VlmReader

# The CPU statuses that send a page on to the VLM: a reading that failed its signal, or none.
ESCALATE = frozenset({Status.suspect, Status.empty})
# A CPU reading of fewer words says too little about what the page holds to doubt an answer by.
MIN_CPU_WORDS = 20


def _summary(rec: PageRecord, engine: str, *, text: bool = False) -> JsonObject:
    """A tier's entry in the record's `tiers`; `text`: with the reading's text (a reading not
    kept: every tier's reading stays in the raw layer)."""
    q = rec.quality or {}
    return {"engine": engine, "score": q.get("score"), "threshold": q.get("threshold"), "status": rec.status.value,
            "seconds": rec.seconds, **({"text": rec.text} if text else {})}


class VlmTierReader(PageReader):
    """CPU tiers first, the VLM for the pages they leave for review."""

    waits_for_pages_in_flight = True  # VLM answers in flight are GPU work worth their grace

    def __init__(self, cpu: CpuReader, vlm: VlmReader) -> None:
        self.cpu = cpu
        self.vlm = vlm
        self.max_in_flight = cpu.max_in_flight + vlm.max_in_flight
        self.escalated = 0
        self.adopted = 0

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        return self.cpu.sizing(doc_dpi)

    def run_language(self) -> tuple[str, str] | None:
        return self.cpu.run_language()

    def key_material(self, doc_dpi: float | None = None) -> JsonObject:
        return {**self.cpu.key_material(doc_dpi), "vlm_tier": self.vlm.key_material(doc_dpi)}

    def doc_key_material(self, doc_dpi: float | None, language: str | None) -> JsonObject:
        return {**self.cpu.doc_key_material(doc_dpi, language), "vlm_tier": self.vlm.key_material(doc_dpi)}

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        return await self.cpu.inspect(path)

    async def inspect_many(self, paths: list[str]) -> list[tuple[int | None, str | None]]:
        return await self.cpu.inspect_many(paths)

    async def process(self, task: PageTask) -> PageRecord:
        first = await self.cpu.process(task)
        if first.status not in ESCALATE:
            return first
        cpu_tiers = list(first.tiers or [_summary(first, first.engine)])
        # The CPU's kept reading, with its text, for when the VLM's is kept instead.
        cpu_with_text = [t if t.get("engine") != first.engine else {**t, "text": first.text} for t in cpu_tiers]
        self.escalated += 1
        t0 = time.monotonic()
        answer = await self.vlm.process(task.at(sizing=self.vlm.sizing(task.doc_dpi)))
        assert isinstance(answer, PageRecord)  # one page a task here
        if answer.status not in (Status.ok, *REVIEW):
            # No reading (the server failed the page, bad input): the CPU reading stands, said so.
            return first.model_copy(update={
                "tiers": [*cpu_tiers, {**_summary(answer, "openai"), "error": answer.error}],
                "flags": [*first.flags, f"vlm_tier_failed:{answer.status.value}"],
                "seconds": round(first.seconds + (time.monotonic() - t0), 4)})
        answer = self._supported(answer, first)
        tiers = [*cpu_tiers, _summary(answer, "openai", text=True)]  # as long as the CPU's reading is kept
        n = len(tiers)
        failed = ", ".join(str(t["engine"]) for t in cpu_tiers)
        unsupported = [f for f in answer.flags if f.startswith(f"unsupported_by_{first.engine}:")]
        if unsupported:
            # Its words are not on the page as the CPU read it: the CPU's reading, poor as it is,
            # is what the page holds; the answer stays in `tiers`, and the flag says why.
            return first.model_copy(update={
                "tiers": tiers, "flags": [*first.flags, f"vlm_tier_{unsupported[0]}"],
                "engine_choice": f"{first.engine}: tier {n} of {n}, {failed} failed the signal; the VLM's answer "
                                 f"is not in its reading ({unsupported[0]})",
                "seconds": round(first.seconds + answer.seconds, 4)})
        best, why = pick([Candidate(first.engine, True, first.quality or {}),
                          Candidate("openai", answer.status in (Status.ok, Status.suspect), answer.quality or {})])
        choice = f"tier {n} of {n}, {failed} failed the signal; {why}"
        if best == 1:
            self.adopted += 1
            return answer.model_copy(update={"tiers": [*cpu_with_text, _summary(answer, "openai")],
                                             "engine_choice": f"openai: {choice}"})
        return first.model_copy(update={"tiers": tiers, "engine_choice": f"{first.engine}: {choice}",
                                        "seconds": round(first.seconds + answer.seconds, 4)})

    @staticmethod
    def _supported(answer: PageRecord, cpu: PageRecord) -> PageRecord:
        """An `ok` answer of which under SUPPORT_BELOW of the words are in the CPU tiers' reading
        of the same page becomes `suspect` (issue 30, point 0: invented text, or another page's).
        The CPU reading failed its own signal, so a right answer beside a garbled reading may be
        flagged too: it goes to review, said why — never an invented page kept as `ok`."""
        from ..positions.align import shared_words

        if answer.status is not Status.ok or len(cpu.text.split()) < MIN_CPU_WORDS:
            return answer
        share, _ = shared_words(answer.text, cpu.text)
        if share >= SUPPORT_BELOW:
            return answer
        return answer.model_copy(update={"status": Status.suspect,
                                         "flags": [*answer.flags, f"unsupported_by_{cpu.engine}:{share:.2f}"]})

    async def control_concurrency(self, window: Limiter) -> None:
        return None  # the window holds CPU pages too: the VLM's own request limit stays fixed

    def attach(self, say: Callable[[str], None]) -> None:
        self.vlm.attach(say)

    def live(self) -> str:
        return f"to VLM {self.escalated}, kept {self.adopted}"

    def final_stats(self) -> JsonObject | None:
        return {"vlm_tier": {"escalated": self.escalated, "adopted": self.adopted}, **(self.vlm.final_stats() or {})}

    def provenance(self) -> JsonObject:
        return self.vlm.provenance()

    async def aclose(self, abandon: bool = False) -> None:
        await self.vlm.aclose(abandon)  # the pool they share is shut down once, by the VLM's reader

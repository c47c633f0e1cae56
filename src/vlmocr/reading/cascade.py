"""A VLM as the last tier of a cascade (`run --engine tesseract,rapidocr --vlm-tier --endpoint URL`):
the CPU engine(s) read every page; a page whose reading fails its signal (suspect or
empty: the review statuses a CPU reading can end with) is sent to the VLM as well, and the better
of the two readings by the signal is the page's record. The GPU reads only the pages the CPU
tiers could not; a fluent answer on a blank page stays `suspect` (its own signal: text on a blank
image), never `ok`.

One record a page, as any run: `tiers` lists every tier's reading in order (engine, status, score,
threshold, seconds), `engine` whose reading was kept, `engine_choice` why. Resume, shards and
SLURM jobs see an ordinary reader: its settings key holds both the CPU engines' and the VLM's.

The VLM tier as a pass of its own (seed 000: "move a slow retry pass to an A100"):
`--cpu-tiers-from RUN` takes each page's CPU reading from an earlier run read with the same CPU
settings (`EarlierReadings`: checked by each record's settings key), so the GPU job reads only the
pages that run left for review, and the CPU tiers are not read twice. The folder it writes is the
one an inline `--vlm-tier` run would have written."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..engines.pick import Candidate, pick
from ..exceptions import UsageError
from ..inputs.finder import SourceFinder
from ..runfolder.flags import Flag
from ..runfolder.record import REVIEW, JsonObject, PageRecord, PageTask, Row, Sizing, Status
from ..runfolder.rundir import RunDir
from ..runfolder.store import FinalRecords
from ..settings.config import RunConfig
from .base import PageReader
from .cpu import CpuReader
from .limiter import Limiter
from .plan import RunPlan
from .vlm import VlmReader, unsupported

# The CPU statuses that send a page on to the VLM: a reading that failed its signal, or none. A
# page of a document in a language the CPU tiers have no data for, or that a person marked hard
# (handwriting, tables …), goes on whatever its signal says (`_sent_on`: the manifest's columns).
ESCALATE = frozenset({Status.suspect, Status.empty})
# A CPU reading of fewer words says too little about what the page holds to doubt an answer by.
MIN_CPU_WORDS = 20


# An earlier run's CPU reading taken as it is: a reading, however poor (the VLM tier judges the
# review ones). An `error` record is no reading: the page is read again.
TAKEN = frozenset(Status) - {Status.error}


class EarlierReadings:
    """The CPU tiers' readings of an earlier run (`--cpu-tiers-from RUN`), for the pages whose
    record there was read with the settings this run's CPU tiers have (the record's settings key
    says so: a page of another reading is read again), of the same file (followed through
    symlinks: a SLURM run's staged names stand for the originals, `vlmocr merge` names those)."""

    def __init__(self, run: str | Path, out: str | Path | None) -> None:
        folder = RunDir(run)
        if out is not None and Path(run).resolve() == Path(out).resolve():
            raise UsageError(f"--cpu-tiers-from {run} is the run's own folder (--out): name the CPU run the VLM "
                             "tier follows, and a new --out for the tiered reading")
        if not folder.pages.is_file() and folder.merged.pages.is_file():
            folder = folder.merged  # a SLURM run, its shards merged
        if not folder.pages.is_file():
            more = " (a SLURM run: merge its shards first, `vlmocr merge RUN`)" if RunDir(run).shard_runs() else ""
            raise UsageError(f"--cpu-tiers-from {run}: no page records there{more}")
        self.run = str(run)
        self.records: FinalRecords = folder.reading()
        self.sources = SourceFinder(folder.path, resolve=True)
        self._same_file: dict[tuple[str, str], bool] = {}
        self.taken = 0
        self.read_again = 0

    def _of_the_file(self, row: Row, task: PageTask) -> bool:
        """Was the record read from the task's file?"""
        at = (row.source, task.path)
        if at not in self._same_file:
            found = self.sources.find(row.source, row.doc_id)
            self._same_file[at] = found is not None and found == Path(task.path).resolve()
        return self._same_file[at]

    def reading(self, task: PageTask, cpu_key: str) -> PageRecord | None:
        """The earlier run's reading of the task's page, made this run's record (its key and
        attempt), or None when it has none of these settings."""
        row = self.records.get((task.doc_id, task.page))
        if row is None or row.key != cpu_key or row.status not in TAKEN or not self._of_the_file(row, task):
            self.read_again += 1
            return None
        self.taken += 1
        return PageRecord.model_validate({**row.data, "key": task.key, "attempt": task.attempt})

    def stats(self) -> JsonObject:
        return {"run": self.run, "taken": self.taken, "read_again": self.read_again}


def earlier_readings(cfg: RunConfig, out: str | Path | None) -> EarlierReadings | None:
    """`--cpu-tiers-from RUN` of these settings (None when not given), refused without a VLM tier
    or when RUN holds no records; `out`: the run's own folder, which RUN may not be."""
    if not cfg.cpu_tiers_from:
        return None
    if not cfg.vlm_tier:
        raise UsageError("--cpu-tiers-from RUN takes the CPU tiers' readings for a VLM tier: give --vlm-tier "
                         "(with --endpoint or --serve, --profile)")
    earlier = EarlierReadings(cfg.cpu_tiers_from, out)
    differs = other_cpu_tiers(cfg, earlier.sources.settings)
    if differs:
        # Not refused: reading again is right, only slow (the GPU job's node reads every page
        # with the CPU first). Said before any page, on the login node too (`slurm submit`).
        from ..progress import console

        console.print(f"warning: --cpu-tiers-from {cfg.cpu_tiers_from} was read with {differs[0]}, this run's "
                      f"CPU tiers read with {differs[1]}: none of its readings can be taken, every page is read "
                      f"by the CPU again (give that run's --engine and --lang to take them)", markup=False)
    return earlier


def other_cpu_tiers(cfg: RunConfig, settings: dict[str, object]) -> tuple[str, str] | None:
    """(theirs, ours) when an earlier run's settings read pages with another CPU engine, or the
    same engine with other language data, than `cfg`'s CPU tiers; None when alike (or when its
    settings cannot say: the records' keys decide page by page anyway)."""
    from pydantic import ValidationError

    from ..engines.registry import reads_language

    try:
        theirs = RunConfig.model_validate({k: settings[k] for k in ("engine", "ocr_engine", "lang") if k in settings})
        pair = [(RunPlan(c).reader(), c.lang) for c in (theirs, cfg)]
    except (ValidationError, UsageError, ValueError):
        return None
    (a, a_lang), (b, b_lang) = pair
    if a == b and (a_lang == b_lang or not reads_language(a)):
        return None

    def label(engine: str, lang: str) -> str:
        return engine + (f" (--lang {lang})" if reads_language(engine) else "")

    return label(a, a_lang), label(b, b_lang)


def _summary(rec: PageRecord, engine: str, *, text: bool = False) -> JsonObject:
    """A tier's entry in the record's `tiers`; `text`: with the reading's text (a reading not
    kept: every tier's reading stays in the raw layer)."""
    q = rec.quality or {}
    return {"engine": engine, "score": q.get("score"), "threshold": q.get("threshold"), "status": rec.status.value,
            "seconds": rec.seconds, **({"text": rec.text} if text else {})}


class VlmTierReader(PageReader):
    """CPU tiers first, the VLM for the pages they leave for review."""

    waits_for_pages_in_flight = True  # VLM answers in flight are GPU work worth their grace

    def __init__(self, cpu: CpuReader, vlm: VlmReader, earlier: EarlierReadings | None = None) -> None:
        self.cpu = cpu
        self.vlm = vlm
        self.earlier = earlier
        self._cpu_keys: dict[tuple[float | None, str | None], str] = {}
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

    def _cpu_key(self, task: PageTask) -> str:
        """The settings key the CPU tiers alone give the task's document (an earlier run's)."""
        from ..settings.config import settings_key

        at = (task.doc_dpi, task.language)
        if at not in self._cpu_keys:
            self._cpu_keys[at] = settings_key(self.cpu.doc_key_material(task.doc_dpi, task.language))
        return self._cpu_keys[at]

    async def _cpu_reading(self, task: PageTask) -> PageRecord:
        taken = self.earlier.reading(task, self._cpu_key(task)) if self.earlier else None
        return taken if taken is not None else await self.cpu.process(task)

    def _sent_on(self, task: PageTask) -> tuple[str, str] | None:
        """Why the task's page goes on to the VLM whatever the CPU's signal says — (the CPU tier's
        `went_on`, the record's engine_choice reason) — or None: a person marked its document
        hard (the manifest's `hard`), or the CPU tiers have no data for its language (read as the
        run's: a passing signal is then no word that the page was read, as the signal judges the
        text by the language it was read as)."""
        if task.hard:
            return f"hard: {task.hard}", f"marked hard ({task.hard})"
        way = self.cpu.plan.document_reading(task.language)
        if way is None or way.note is None:
            return None
        return (f"no data for {task.language}",
                f"{self.cpu.plan.reader()} has no data for the document's language {task.language}")

    async def process(self, task: PageTask) -> PageRecord:
        first = await self._cpu_reading(task)
        sent_on = self._sent_on(task)
        if first.status not in ESCALATE and sent_on is None:
            return first
        cpu_tiers = list(first.tiers or [_summary(first, first.engine)])
        if sent_on is not None and first.status not in ESCALATE:
            cpu_tiers[-1] = {**cpu_tiers[-1], "went_on": sent_on[0]}
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
                "flags": [*first.flags, Flag.vlm_tier_failed.of(status=answer.status.value)],
                "seconds": round(first.seconds + (time.monotonic() - t0), 4)})
        if sent_on is None:  # a reading of a page the CPU cannot read (its script, its hand) supports nothing
            answer = self._supported(answer, first)
        tiers = [*cpu_tiers, _summary(answer, "openai", text=True)]  # as long as the CPU's reading is kept
        n = len(tiers)
        failed = ", ".join(str(t["engine"]) for t in cpu_tiers)
        if sent_on is not None:
            # The model's reading is the page's unless it is doubted and the CPU's is not.
            if answer.status is Status.ok:
                best = 1
            elif first.status in ESCALATE:
                best = pick([Candidate(first.engine, True, first.quality or {}),
                             Candidate("openai", answer.status is Status.suspect, answer.quality or {})])[0]
            else:
                best = 0
            choice = f"tier {n} of {n}, {sent_on[1]}"
            if best == 1:
                self.adopted += 1
                return answer.model_copy(update={"tiers": [*cpu_with_text, _summary(answer, "openai")],
                                                 "engine_choice": f"openai: {choice}"})
            return first.model_copy(update={"tiers": tiers, "engine_choice": f"{first.engine}: {choice}; the "
                                            f"VLM's answer is {answer.status.value}",
                                            "seconds": round(first.seconds + answer.seconds, 4)})
        unsupported = [f for f in answer.flags if (v := Flag.unsupported_by.values([f])) and v["engine"] == first.engine]
        if unsupported:
            said = Flag.unsupported_by.values(unsupported) or {}
            # Its words are not on the page as the CPU read it: the CPU's reading, poor as it is,
            # is what the page holds; the answer stays in `tiers`, and the flag says why.
            return first.model_copy(update={
                "tiers": tiers, "flags": [*first.flags, Flag.vlm_tier_unsupported_by.of(**said)],
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
        """An `ok` answer the CPU tiers' reading of the same page does not support becomes
        `suspect` (vlm.unsupported: under SUPPORT_BELOW of its words in it,
        invented text or another page's — or UNSUPPORTED_RUN words in a row opposite nothing in
        it — point 2, a passage invented beside the page's text). The CPU reading failed its own
        signal, so a right answer beside a garbled reading may be flagged too: it goes to review,
        said why — never an invented page kept as `ok`."""
        from ..positions.align import shared_words

        if answer.status is not Status.ok or len(cpu.text.split()) < MIN_CPU_WORDS:
            return answer
        share, _, run = shared_words(answer.text, cpu.text)
        # Under the share, the CPU's reading is kept (process); with a passage beside the page's
        # text, the answer may still be the better reading, never an `ok` one.
        flag = unsupported(share, run, cpu.engine)
        if flag is None:
            return answer
        return answer.model_copy(update={"status": Status.suspect, "flags": [*answer.flags, flag]})

    async def control_concurrency(self, window: Limiter) -> None:
        return None  # the window holds CPU pages too: the VLM's own request limit stays fixed

    def attach(self, say: Callable[[str], None]) -> None:
        self.vlm.attach(say)

    def live(self) -> str:
        return f"to VLM {self.escalated}, kept {self.adopted}"

    def final_stats(self) -> JsonObject | None:
        tier: JsonObject = {"escalated": self.escalated, "adopted": self.adopted}
        if self.earlier:
            tier["cpu_tiers_from"] = self.earlier.stats()
        return {"vlm_tier": tier, **(self.vlm.final_stats() or {})}

    def provenance(self) -> JsonObject:
        return self.vlm.provenance()

    async def aclose(self, abandon: bool = False) -> None:
        await self.vlm.aclose(abandon)  # the pool they share is shut down once, by the VLM's reader

"""Does a VLM run owe anything? Decided from the run directory and the configuration alone,
before the endpoint is asked or a server started: a resubmitted shard whose pages
are all final must not load a model for minutes to do nothing, and a finished run resumed while
the endpoint is down exits with its outcome, not "endpoint unavailable".

The settings key is computed from the configuration (`vlm.vlm_key_material`). What only the
server can tell is taken as the run recorded it last (run.json's `key_material`): the server
kind unless --server-kind or --serve names it, and the revision served. The model must be named
(--model, or the profile's model under --serve); otherwise nothing is decided here and the run
asks the endpoint as before. A page is owed when the scheduler would read it: no final record,
`error`, a ladder step left, `bad_input` under --force-bad; a document that could not be opened
is owed only under --force-bad (`bad_input` is final: the same file gives the same answer)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from ..engines.registry import HTTP_ENGINE
from ..inputs.sources import Document, discover, parse_shard, shard_of
from ..profiles import Profile, load_profile
from ..runfolder.record import JsonObject, PageRecord, PageTask, Sizing
from ..runfolder.rundir import RunDir
from ..runfolder.store import ResumeIndex
from ..settings.config import RunConfig, settings_key
from .base import PageReader
from .owed import first_reads, reopen, select_pages
from .plan import RunPlan
from .vlm import owes_ladder, vlm_key_material

STARTED_KINDS = ("vllm", "sglang")  # what --serve starts (cluster/serve/plan.SERVERS); else vLLM
NOT_OPENED = "not opened again: its bad_input record is final (--force-bad reads it again)"


class SettledReader(PageReader):
    """The reader of a run that owes nothing: the same keys and provenance as the run recorded,
    and no endpoint, server or worker pool behind it. The scheduler plans, tallies and writes
    the run's outcome with it as with any reader; it is never asked for a page."""

    def __init__(self, cfg: RunConfig, profile: Profile, kind: str, model: str, revision: str | None,
                 recorded: JsonObject) -> None:
        self.cfg, self.profile, self.kind, self.model, self.revision = cfg, profile, kind, model, revision
        self.recorded = recorded

    def sizing(self, doc_dpi: float | None = None) -> Sizing:
        return self.cfg.sizing(doc_dpi, self.profile.image)

    def key_material(self, doc_dpi: float | None = None) -> JsonObject:
        return vlm_key_material(RunPlan(self.cfg), self.profile, self.kind, self.model, self.revision,
                                self.cfg.pages_per_request, doc_dpi)

    async def inspect(self, path: str) -> tuple[int | None, str | None]:
        return None, NOT_OPENED  # asked only for documents whose page-0 record is final

    async def process(self, task: PageTask) -> PageRecord | list[PageRecord]:
        raise RuntimeError("a settled run reads no page")  # owes_nothing found none owed

    def provenance(self) -> JsonObject:
        return {"server": self.recorded["server"]} if isinstance(self.recorded.get("server"), dict) else {}


def _served(cfg: RunConfig, recorded: JsonObject) -> tuple[Profile, str, str, str | None] | None:
    """(profile, server kind, model, revision) of the run from its configuration and what it
    recorded, None when they cannot be told without the server."""
    profile = load_profile(cfg.profile or cfg.serve or "generic")
    model = cfg.model or (profile.model if cfg.serve else None)
    if not model:
        return None
    stored = recorded.get("key_material")
    material: JsonObject = stored if isinstance(stored, dict) else {}
    same_model = material.get("model") == model
    if cfg.serve:
        kind: str | None = cfg.server_kind if cfg.server_kind in STARTED_KINDS else "vllm"
    elif cfg.server_kind != "auto":
        kind = cfg.server_kind
    else:
        kind = str(material.get("server_kind") or "") if same_model else None
    if not kind:
        return None
    seen = material.get("revision")
    revision = (str(seen) if seen is not None else None) if same_model and "revision" in material else profile.revision
    return profile, kind, model, revision


def _documents(cfg: RunConfig) -> list[Document]:
    docs = discover(cfg.inputs, cfg.manifest)
    if cfg.shard:
        k, n = parse_shard(cfg.shard)
        docs = [d for d in docs if shard_of(d.doc_id, n) == k]
    return docs


def owes_nothing(cfg: RunConfig) -> Callable[[RunPlan], Awaitable[PageReader]] | None:
    """A reader factory for the scheduler when the run in `cfg.out` owes no page under `cfg`
    (no endpoint asked, no server started); None when it owes some or that cannot be told."""
    vlm = cfg.engine == HTTP_ENGINE or (cfg.engine == "auto" and bool(cfg.endpoint or cfg.profile or cfg.serve))
    if cfg.force or cfg.out is None or not vlm:  # (not cfg.reader(): for `auto` it probes Tesseract)
        return None
    run = RunDir(Path(cfg.out))
    if not run.pages.is_file():
        return None
    recorded = run.info()
    served = _served(cfg, recorded)
    if served is None:
        return None
    profile, kind, model, revision = served
    reader = SettledReader(cfg, profile, kind, model, revision, recorded)
    docs = _documents(cfg)
    keys = {d.doc_id: settings_key(reader.key_material(d.dpi)) for d in docs}
    index = ResumeIndex.load(run.pages, set(keys.values()))
    for doc in docs:
        state = index.get(keys[doc.doc_id], doc.doc_id)
        if state is None:
            return None
        if state.doc_pages is None:
            if reopen(state, force=False, force_bad=cfg.force_bad):
                return None
            continue
        pages = select_pages(doc, state.doc_pages)
        if first_reads(pages, state, force=False, retry_only=cfg.retry_only, force_bad=cfg.force_bad):
            return None
        if any(owes_ladder(cfg, profile, state.status(p), state.attempts_of(p)) for p in pages):
            return None

    async def factory(_plan: RunPlan) -> PageReader:
        return reader

    return factory


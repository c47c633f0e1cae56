"""Run configuration: one pydantic model; command line > --config file.toml > VLMOCR_* > defaults.

The settings key is the hash of everything that changes a page's text and nothing else:
changing the prompt or the dpi re-reads, changing the worker count does not."""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..engines.choice import AUTO
from ..engines.registry import CPU_ENGINES, ENGINE_CHOICES, HTTP_ENGINE, OCR_ENGINES
from ..exceptions import UsageError
from ..languages import canonical_lang, unknown_names
from ..machine import available_cores
from ..redact import public_url
from ..runfolder.record import DEFAULT_DPI, DEFAULT_MAX_PIXELS, JsonObject, Sizing

# Bump when a change in vlmocr itself alters what an engine reads for the same settings
# (e.g. a new text-layer rule), so old records are not mistaken for current ones.
READER_REVISION = 1
MAX_WORKERS = 512


@dataclass(frozen=True)
class Endpoint:
    """The server a run's pages go to when vlmocr started it (`run --serve`, here or as an HF
    job): what serving hands the readers, who take the settings it makes (RunConfig.served_by)
    instead of settings rewritten in place."""

    url: str
    model: str | None
    server_kind: str  # vllm or sglang (cluster/serve/plan.py SERVERS)
    profile: str  # the profile the server was started from
    # The bearer token the server wants (an HF job's proxy takes the HF token); None: the
    # client's own rule (VLMOCR_API_KEY/OPENAI_API_KEY or the credentials file, reading/client.py).
    api_key: str | None = field(default=None, repr=False)
    # What starting it told (ServerInfo.provenance: version, ready time, GPUs), for run.json.
    provenance: Mapping[str, Any] | None = None


class VlmSettings(BaseModel):
    """How pages or figures are asked of a VLM endpoint: one model for `run` (RunConfig) and
    `describe` (settings/figures.DescribeOptions). Where, which model and profile, how hard to
    try; and once vlmocr started the server (`served_by`), the Endpoint it serves at."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    endpoint: str | None = None
    model: str | None = None
    profile: str | None = None
    server_kind: Literal["auto", "vllm", "sglang", "openai"] = "auto"  # auto: from /v1/models owned_by
    request_timeout: float = Field(default=300.0, gt=0)  # seconds per HTTP request (a long page at 8k tokens takes minutes)
    max_retries: int = Field(default=6, ge=0, le=100)  # HTTP retries per request (429, 5xx, timeouts, dropped, malformed)
    concurrency: int | None = Field(default=None, ge=1, le=4096)  # requests in flight (default: the profile's)
    no_retry: bool = False  # first pass only: review pages stay for a later --retry-only
    def served_by(self, endpoint: Endpoint) -> Self:
        """These settings pointed at a server vlmocr started: its URL, served model name and
        kind, and its profile unless --profile names another (the prompt may differ). The
        Endpoint itself (its key, what it told) is the run's (reading/plan.RunPlan), not a setting."""
        return self.model_copy(update={"endpoint": endpoint.url, "model": endpoint.model,
                                       "server_kind": endpoint.server_kind, "profile": self.profile or endpoint.profile})

    def vlm_settings(self) -> dict[str, object]:
        """The fields of this model alone (what a RunConfig built for a describe takes)."""
        return {name: getattr(self, name) for name in VlmSettings.model_fields}


class RunConfig(VlmSettings):
    # Frozen: the settings a run was asked for, as given: run.json records them. What a run
    # decides (its OCR engine, its worker count, the server it started) is its plan's
    # (reading/plan.RunPlan). The endpoint's settings are VlmSettings' (shared with describe).

    inputs: list[str] = Field(default_factory=list)
    out: Path | None = None
    manifest: Path | None = None
    engine: str = "auto"  # engines.registry.ENGINE_CHOICES
    # What `auto` (and a VLM's fallback) reads scans with: engines.registry.OCR_ENGINES, or `auto`:
    # By --lang's script (engines/choice.AUTO_RULE): RapidOCR for Latin, Tesseract for Greek, Cyrillic …
    ocr_engine: str = AUTO
    lang: str = "eng"  # tesseract languages, e.g. "deu+eng"
    # A CPU reading that fails its signal asks Tesseract's OSD whether the page is on its side or
    # upside down, and reads it again turned (reading/worker.py); off: pages are read as they lie.
    rotate_pages: Literal["auto", "always", "off"] = "auto"
    # A page askew (within 15 degrees) is straightened (inputs/skew.py; the record's `skew`): auto —
    # before the CPU engines read it (Tesseract needs it; a VLM reads a slanted line, and measuring
    # every page would cost the client ~10 % of its feed rate: BENCHMARKS.md); on — before a VLM is
    # sent it too; off — pages are read as they lie.
    deskew: Literal["auto", "on", "off"] = "auto"
    # `--clean`: each scan flattened, binarised (Sauvola) and despeckled before it is read or sent
    # (inputs/clean.py); off by default: it helps some collections and engines and hurts others.
    clean_scans: bool = False
    # A CPU reading that fails its signal is read once more from the scan repaired by what its
    # image says is wrong (specks, a lighter layer of strokes: inputs/repair.py), the better reading
    # kept (reading/worker.py); off: failing pages are read as scanned only.
    repair: Literal["auto", "off"] = "auto"
    # `--align-with ENGINE`: a VLM's answer gets word positions: the page is read by
    # this CPU engine too and the answer's words are placed on its boxes (positions/align.py).
    # Not in the settings key: it adds positions, it does not change the text.
    align_with: str | None = None
    # `--vlm-tier`: a CPU run whose pages that fail their signal are read by the VLM
    # (--endpoint/--profile) too, the better reading kept (reading/cascade.py).
    vlm_tier: bool = False
    # `--cpu-tiers-from RUN`: the VLM tier as a pass of its own, the CPU tiers' readings taken from
    # an earlier run of the same CPU settings (reading/cascade.EarlierReadings). Not in the key:
    # the folder holds the reading an inline `--vlm-tier` run would have made.
    cpu_tiers_from: str | None = None
    dpi: float | None = None
    longest_side: int | None = None
    max_pixels: int = Field(default=DEFAULT_MAX_PIXELS, ge=4096)
    # Each worker holds an engine (RapidOCR ~1.5 GB) and a page image: beyond a few hundred the
    # machine, not the setting, decides, and a typo (--workers 10000) should not fork-bomb it.
    # Left to the default, memory may lower it (pool_workers, machine.py).
    workers: int = Field(default_factory=available_cores, ge=1, le=MAX_WORKERS)
    shard: str | None = None
    force: bool = False
    force_bad: bool = False  # read `bad_input` pages again (a person fixed the files)
    # A run folder holds one reading: other settings than its own are refused unless
    # --reread, which makes them the folder's reading (docs/, evaluate, report, export follow).
    reread: bool = False
    json_summary: bool = False
    stop_grace: float = Field(default=60.0, ge=0)  # seconds in-flight pages may finish after SIGTERM
    serve: str | None = None  # a profile whose server vlmocr starts and reads from (VlmSettings.served_by)
    retry_only: bool = False  # only the retry ladder over review pages
    library: Path | None = None  # skip documents this library already holds (not in the key)
    pages_per_request: int = Field(default=1, ge=1, le=64)  # profiles with multi-page support
    adaptive: bool = True  # size concurrency from the server's /metrics queue gauges when exported
    max_fallback: float = Field(default=0.2, ge=0, le=1)  # a document with a larger share of fallback pages is marked

    @field_validator("engine", "ocr_engine")
    @classmethod
    def _known_engine(cls, v: str, info: Any) -> str:
        known = ENGINE_CHOICES if info.field_name == "engine" else (AUTO, *OCR_ENGINES)
        if v not in known:
            raise ValueError(f"unknown engine {v!r}; known: {', '.join(known)}")
        return v

    @field_validator("align_with")
    @classmethod
    def _aligner(cls, v: str | None) -> str | None:
        known = tuple(n for n in OCR_ENGINES if not CPU_ENGINES[n].parts)
        if v is not None and v not in known:
            raise ValueError(f"--align-with {v!r}: a CPU engine that gives word boxes: {', '.join(known)}")
        return v

    @field_validator("lang")
    @classmethod
    def _lang(cls, v: str) -> str:
        # Aliases to Tesseract's names (de → deu, fraktur → frk: languages.py), so the
        # settings key and the records name the data that reads. Installed? The pre-run check.
        # A name no Tesseract reads by (`german`) is refused here, before any page is read.
        lang = canonical_lang(v)
        why = unknown_names(lang)
        if why:
            raise ValueError(why)
        return lang

    @field_validator("dpi")
    @classmethod
    def _dpi(cls, v: float | None) -> float | None:
        if v is not None and not 10 <= v <= 1200:
            raise ValueError("dpi must be within 10..1200")
        return v

    @field_validator("longest_side")
    @classmethod
    def _longest(cls, v: int | None) -> int | None:
        if v is not None and not 64 <= v <= 20000:
            raise ValueError("longest side must be within 64..20000 px")
        return v

    @model_validator(mode="after")
    def _both_sizes(self) -> "RunConfig":
        if self.dpi is not None and self.longest_side is not None:
            raise ValueError("give --dpi or --longest-side, not both")
        if self.no_retry and self.retry_only:
            raise ValueError("--no-retry and --retry-only exclude each other")
        return self

    # ------------------------------------------------------------------ derived

    def sizing(self, doc_dpi: float | None = None, image: Any = None) -> Sizing:
        """How large a page image is: a document's own dpi (manifest), else --dpi or
        --longest-side, else the model profile's `image` defaults, else 200 dpi. The profile's
        pixel cap, when it has one, wins over --max-pixels (the model cannot take more)."""
        max_pixels = (getattr(image, "max_pixels", None) or self.max_pixels) if image is not None else self.max_pixels
        if doc_dpi is None and self.longest_side:
            return Sizing(dpi=None, longest_side=self.longest_side, max_pixels=max_pixels)
        if doc_dpi or self.dpi or image is None:
            return Sizing(dpi=doc_dpi or self.dpi or DEFAULT_DPI, longest_side=None, max_pixels=max_pixels)
        if image.longest_side:
            return Sizing(dpi=None, longest_side=image.longest_side, max_pixels=max_pixels)
        return Sizing(dpi=float(image.dpi), longest_side=None, max_pixels=max_pixels)

    def workers_given(self) -> bool:
        """Whether `workers` was set (option, VLMOCR_WORKERS, config file), not the default."""
        return "workers" in self.model_fields_set

    def uses_ocr_choice(self) -> bool:
        """Whether `ocr_engine` reads anything: behind `auto`, or as a VLM's fallback."""
        return self.engine in (AUTO, HTTP_ENGINE)

    def public_dict(self) -> JsonObject:
        """What run.json records: never secrets (API keys are not part of this model; a user
        and password inside the endpoint URL are taken out)."""
        data = self.model_dump(mode="json")
        if data.get("endpoint"):
            data["endpoint"] = public_url(data["endpoint"])
        return data


def settings_key(material: JsonObject) -> str:
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _env_values() -> JsonObject:
    values: JsonObject = {}
    for name in RunConfig.model_fields:
        if name in ("inputs",):
            continue
        raw = os.environ.get(env_name(name))
        if raw is not None and raw != "":
            values[name] = raw
    return values


def env_name(setting: str) -> str:
    """The environment variable of a run setting: VLMOCR_WORKERS for workers."""
    return f"VLMOCR_{setting.upper()}"


def _file_values(config_file: Path) -> JsonObject:
    """The settings of a config file: top-level keys, or a [run] table — not both (a key left
    beside the table would be silently dropped, and the run would not be the one described)."""
    try:
        with open(config_file, "rb") as fh:
            values = tomllib.load(fh)
    except FileNotFoundError:
        raise UsageError(f"config file not found: {config_file}") from None
    except OSError as exc:
        raise UsageError(f"config file {config_file}: cannot read it ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{config_file}: not valid TOML ({exc})") from None
    if isinstance(values.get("run"), dict):
        beside = sorted(k for k in values if k != "run")
        if beside:
            raise UsageError(f"{config_file}: settings both at the top level ({', '.join(beside)}) and in a [run] "
                             "table; put them all in [run] or all at the top level")
        values = values["run"]
    unknown = set(values) - set(RunConfig.model_fields)
    if unknown:
        raise UsageError(f"{config_file}: unknown setting(s) {', '.join(sorted(unknown))}")
    return values


def load_config(cli: Mapping[str, object], config_file: Path | None = None) -> RunConfig:
    """Merge the layers; unknown keys in a config file are an error naming the file. An invalid
    value is named where it came from: the VLMOCR_* variable (with its value) or the file."""
    merged: dict[str, object] = dict(_env_values())
    # The value too, to see what was wrong — but never an endpoint's (it may carry a password).
    origin = {k: env_name(k) if k == "endpoint" else f"{env_name(k)}={v!r}" for k, v in merged.items()}
    if config_file is not None:
        file_values = _file_values(config_file)
        merged.update(file_values)
        origin.update({k: f"{config_file}: {k}" for k in file_values})
    given = {k: v for k, v in cli.items() if v is not None}
    merged.update(given)
    for k in given:
        origin.pop(k, None)
    try:
        return RunConfig.model_validate(merged)
    except ValidationError as exc:
        def where(loc: tuple[int | str, ...]) -> str:
            text = ".".join(str(p) for p in loc) or "settings"
            return origin.get(str(loc[0]), text) if loc else text

        problems = "; ".join(f"{where(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"invalid settings: {problems}") from None

"""Model profiles: everything model-specific lives in a TOML file, never in Python.

A profile says how to ask one model for a page (prompt, image order and sizing, sampling,
extra request body per server kind), how to start a server for it, how to clean its answer,
and how to retry it. Shipped profiles are package data next to this file; users add or
override profiles with directories on ``VLMOCR_PROFILE_PATH`` (colon-separated), or pass a
path to a ``.toml`` file directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from vlmocr.exceptions import UsageError

from ..runfolder.record import JsonObject
from ..text.postprocess import GroundingFormat as GroundingFormat  # re-exported: a profile's own word
from ..text.postprocess import PostprocessSpec

ServerKind = Literal["vllm", "sglang", "openai"]
SERVER_KINDS: tuple[str, ...] = get_args(ServerKind)
LaunchKind = Literal["vllm", "sglang"]
ENV_PROFILE_PATH = "VLMOCR_PROFILE_PATH"

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def has_control_characters(text: str) -> bool:
    """Newlines, tabs, escapes and the like: they let a value shown in a script or a log line
    end that line and start another."""
    return any(unicodedata.category(c) == "Cc" for c in text)


def unsafe_name(data: Mapping[str, Any]) -> str | None:
    """Why a profile's names are unsafe to print in a script or to start a server with (its
    name, model, revision, server flags and environment), or None when they are fine."""
    named: list[tuple[str, Any]] = [(key, data.get(key)) for key in ("name", "model", "revision")]
    serve = data.get("serve")
    for kind, spec in (serve.items() if isinstance(serve, Mapping) else ()):
        if not isinstance(spec, Mapping):
            continue
        env = spec.get("env")
        for var, value in (env.items() if isinstance(env, Mapping) else ()):
            if not _ENV_NAME_RE.fullmatch(str(var)):
                return f"serve.{kind}.env: {str(var)!r} is not an environment variable name"
            named.append((f"serve.{kind}.env.{var}", value))
        args = spec.get("args")
        named += [(f"serve.{kind}.args", arg) for arg in (args if isinstance(args, list) else ())]
        jobs = spec.get("hf_jobs")
        if isinstance(jobs, Mapping):
            named += [(f"serve.{kind}.hf_jobs.{key}", jobs.get(key)) for key in ("image", "image_hopper", "flavor")]
            for install in jobs.get("pip_install") or ():
                named += [(f"serve.{kind}.hf_jobs.pip_install", arg) for arg in (install if isinstance(install, list) else ())]
    for what, value in named:
        if isinstance(value, str) and has_control_characters(value):
            return f"{what} {value!r} contains a control character"
    return None


class _Strict(BaseModel):
    # A typo in a profile must fail loudly instead of silently using a default.
    model_config = ConfigDict(extra="forbid")


class ImageSpec(_Strict):
    """How a page becomes the image sent to the model.

    ``longest_side`` wins over ``dpi`` when set (the page is scaled so that its longest side
    is exactly that many pixels, as olmOCR and LightOnOCR are trained). ``max_pixels`` and
    ``min_pixels`` bound the area afterwards, as Qwen-style processors do server-side anyway;
    bounding it client-side keeps requests small and the settings key honest.
    """

    dpi: int = Field(default=200, gt=0)
    longest_side: int | None = Field(default=None, gt=0)
    max_pixels: int | None = Field(default=None, gt=0)
    min_pixels: int | None = Field(default=None, gt=0)
    format: Literal["png", "jpeg"] = "png"
    jpeg_quality: int = Field(default=90, ge=1, le=100)

    @property
    def mime(self) -> str:
        return "image/png" if self.format == "png" else "image/jpeg"


class Sampling(_Strict):
    """Decoding parameters. ``top_k``, ``min_p`` and ``repetition_penalty`` are vLLM/SGLang
    extensions and are left out of requests to a plain OpenAI API (it rejects unknown keys)."""

    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = None
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    stop: list[str] | None = None


SAMPLING_KEYS = frozenset(Sampling.model_fields)
VENDOR_SAMPLING_KEYS = frozenset({"top_k", "min_p", "repetition_penalty"})


class HfJobsSpec(_Strict):
    """Where `vlmocr serve --target hf-jobs` runs this server kind (seed 004, "Serve
    Unlimited-OCR as a live endpoint on HF Jobs"): a pinned image ("not `:latest`"), the image
    for Hopper flavors when it differs (vLLM's ``-cu129`` tag), the default flavor, and what
    to ``pip install`` in the container before the server starts (the model's own wheel,
    where the image lacks it): one argument list per install, run in order."""

    image: str = ""
    image_hopper: str = ""
    flavor: str = ""
    pip_install: list[list[str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _pinned(self) -> HfJobsSpec:
        for image in (self.image, self.image_hopper):
            if image and (image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]):
                raise ValueError(f"hf_jobs image {image!r} is not pinned: name a tag other than :latest")
        return self


class VersionRecipe(_Strict):
    """One range of server versions in a serving recipe (the released vLLM 0.34 has no
    n-gram logits processor, 0.31-0.33 have one only the V1 model runner takes). ``serve`` tells
    the version that will run before it launches anything (cluster/serve/version.py) and uses
    the first part whose ``versions`` (a PEP 440 specifier set, "" = any) holds it; its ``args``,
    ``env`` and ``json_args`` go on top of the spec's own. A part with ``refuse`` stops the
    start at once with that line (it names the image or version to use): never a server that
    dies inside the health wait."""

    versions: str = ""
    # Container images this part is for (`--target hf-jobs`: a pinned image holds a build whose
    # version number says nothing, e.g. vllm/vllm-openai:unlimited-ocr); a part with images and
    # no versions is chosen by the image only, never for a local start.
    images: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    json_args: JsonObject = Field(default_factory=dict)
    # What protects this part's pages against loops, recorded in the run's provenance: the
    # server's n-gram processor, or only the client's loop defence (text/loops.py and the ladder).
    loop_guard: str = ""
    refuse: str = ""
    # The part used when the version cannot be told (no `vllm --version`, no VLMOCR_SERVE_VERSION):
    # the one that starts on every version the recipe names.
    when_unknown: bool = False

    @model_validator(mode="after")
    def _specifier(self) -> VersionRecipe:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(self.versions)
        except InvalidSpecifier:
            raise ValueError(f"versions {self.versions!r}: not a PEP 440 specifier set such as '>=0.31,<0.34'") from None
        return self


class ServeSpec(_Strict):
    """Flags `vlmocr serve` adds after the model for one server kind.

    ``json_args`` holds flags whose value is JSON (e.g. ``--limit-mm-per-prompt``); they are
    kept as data so the serve command can write them to an args file instead of fighting
    shell quoting."""

    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    json_args: JsonObject = Field(default_factory=dict)
    hf_jobs: HfJobsSpec = Field(default_factory=HfJobsSpec)  # --target hf-jobs
    # --attention-backend, put before ``args``: "" leaves it to the server, a name pins it,
    # "auto" lets vlmocr choose by the GPU (cluster/serve/attention.py: fa3 on Hopper, else flashinfer).
    attention_backend: str = Field(default="", pattern=r"^[a-z0-9_]*$")
    # The server versions this recipe is for, by range (VersionRecipe); empty: any version.
    by_version: list[VersionRecipe] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_unknown(self) -> ServeSpec:
        if self.by_version and sum(r.when_unknown for r in self.by_version if not r.images) != 1:
            raise ValueError("by_version: mark exactly one part when_unknown = true (used when the "
                             "server's version cannot be told)")
        return self

    def with_part(self, part: VersionRecipe | None) -> ServeSpec:
        """This recipe with a version part's flags, JSON flags and environment on top."""
        if part is None:
            return self
        return self.model_copy(update={"args": [*self.args, *part.args],
                                       "json_args": {**self.json_args, **part.json_args},
                                       "env": {**self.env, **part.env}})

    def argv(self) -> list[str]:
        """The flags as one argv list, JSON values serialized compactly."""
        out = list(self.args)
        for flag, value in self.json_args.items():
            out += [flag, json.dumps(value, separators=(",", ":"), sort_keys=True)]
        return out


class MultiPageSpec(_Strict):
    """Several pages in one request (``max_pages`` 1 = single page only)."""

    max_pages: int = Field(default=1, ge=1)
    page_separator: str = "<PAGE>"
    prompt: str | None = None
    prompt_by_server: dict[ServerKind, str] = Field(default_factory=dict)
    # A placeholder the text carries once per page, before the prompt: a model without a chat
    # template on vLLM (Unlimited-OCR) needs one "<image>" per image in the text. Per server
    # kind like the prompt ("" where the server's template inserts the images itself).
    image_token: str = ""
    image_token_by_server: dict[ServerKind, str] = Field(default_factory=dict)
    extra_body: dict[ServerKind, JsonObject] = Field(default_factory=dict)
    # Output budget of a whole multi-page request; per-page max_tokens × pages, capped here.
    max_tokens: int | None = Field(default=None, gt=0)


class RetrySpec(_Strict):
    """Hints for the retry ladder over review pages (loop / truncated / empty)."""

    temperatures: list[float] = Field(default_factory=lambda: [0.1, 0.3, 0.5, 0.8])
    # Sampling keys (other than temperature) set on every retry, e.g. a wider top_p.
    sampling: dict[str, float | int] = Field(default_factory=dict)
    max_tokens_factor: float = Field(default=1.5, ge=1.0)
    max_tokens_limit: int | None = Field(default=None, gt=0)
    # Repetition controls per server kind, merged into the request body on retries.
    extra_body: dict[ServerKind, JsonObject] = Field(default_factory=dict)
    # On a 400 "prompt too long", may the page be re-rendered smaller and tried once more?
    shrink_on_overflow: bool = True
    shrink_factor: float = Field(default=0.75, gt=0.0, lt=1.0)

    @model_validator(mode="after")
    def _sampling_keys(self) -> RetrySpec:
        unknown = set(self.sampling) - (SAMPLING_KEYS - {"temperature", "stop"})
        if unknown:
            raise ValueError(f"retry.sampling: unknown or not allowed keys {sorted(unknown)}")
        if any(t < 0 for t in self.temperatures):
            raise ValueError("retry.temperatures must be >= 0")
        return self


# Bytes per parameter of the dtype the weights are served in (what `weights_gb` is made of).
DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0,
                                 "int4": 0.5, "awq": 0.5, "gptq": 0.5}


class MemorySpec(_Strict):
    """The GPU memory the model needs, for `vlmocr plan --partitions` (which partition holds it,
    on one GPU or tensor parallel across one node's GPUs). In GB, on the scale the seeds quote
    GPUs (an A40 is "46 GB"): ``weights_gb`` = parameters × bytes per parameter of ``dtype``
    (the served weights); ``min_gpu_gb`` = (weights + KV cache and activations for the profile's
    context and concurrency) ÷ 0.9 (vLLM's default --gpu-memory-utilization): the smallest GPU,
    or the sum of a node's GPUs under tensor parallelism, that serves it. Each shipped profile
    says in a comment where its figures come from."""

    params_b: float | None = Field(default=None, gt=0)  # parameters, in billions
    dtype: str = ""  # the served weights: bf16, fp8, awq … (DTYPE_BYTES)
    weights_gb: float = Field(gt=0)
    min_gpu_gb: float = Field(gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> MemorySpec:
        if self.dtype and self.dtype not in DTYPE_BYTES:
            raise ValueError(f"memory.dtype {self.dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
        if self.min_gpu_gb < self.weights_gb:
            raise ValueError(f"memory.min_gpu_gb {self.min_gpu_gb:g} is less than weights_gb {self.weights_gb:g}: "
                             "the GPU holds the weights and the KV cache")
        if self.params_b and self.dtype:
            # A typo (80 for 8) or a dtype left at bf16 after switching to FP8 weights shows here.
            expected = self.params_b * DTYPE_BYTES[self.dtype]
            if not 0.75 * expected <= self.weights_gb <= 1.35 * expected:
                raise ValueError(f"memory.weights_gb {self.weights_gb:g} does not match {self.params_b:g}B parameters "
                                 f"in {self.dtype} (about {expected:.1f} GB)")
        return self


class Profile(_Strict):
    """One model's recipe. See the shipped ``*.toml`` files for documented examples."""

    name: str
    description: str = ""
    model: str = ""  # Hugging Face repo id; empty = whatever --model names
    revision: str = ""  # pinned commit; empty = not pinned yet
    license: str = ""
    prompt: str = ""
    # The same instruction may need different text per server (e.g. a literal <image> for
    # vLLM where the model has no chat template, none for SGLang whose template adds it).
    prompt_by_server: dict[ServerKind, str] = Field(default_factory=dict)
    system_prompt: str = ""
    image_position: Literal["before", "after"] = "before"
    image_only: bool = False
    # Model defaults are fine: pydantic copies a non-hashable default for each instance.
    image: ImageSpec = ImageSpec()
    sampling: Sampling = Sampling()
    max_tokens: int = Field(default=4096, gt=0)
    # Ask vLLM/SGLang for token log-probabilities: the quality signal's confidence for the page
    # (text/signal.py). Not in the settings key (the text is the same); false for a server that
    # rejects them.
    logprobs: bool = True
    # The language of the pages this profile is for (a Tesseract name or ISO 639-1 code: grc,
    # frk, de): the quality signal judges the answers by it when --lang is not given and the
    # manifest names none. Empty: --lang's default. Not in the settings key (the text is the same).
    language: str = ""
    context_length: int | None = Field(default=None, gt=0)
    concurrency: int = Field(default=16, ge=1)
    extra_body: dict[ServerKind, JsonObject] = Field(default_factory=dict)
    # "module:Class" of an SGLang CustomLogitProcessor, sent per request (SGLang has no
    # server-side registration; the server needs --enable-custom-logit-processor).
    sglang_logit_processor: str = ""
    serve: dict[LaunchKind, ServeSpec] = Field(default_factory=dict)
    postprocess: PostprocessSpec = PostprocessSpec()
    multipage: MultiPageSpec = MultiPageSpec()
    retry: RetrySpec = RetrySpec()
    # GPU memory the model needs (`vlmocr plan --partitions`); None in a user profile that does
    # not say (the plan then names it as unplaceable instead of guessing).
    memory: MemorySpec | None = None

    _source: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        if not _NAME_RE.fullmatch(self.name):
            raise ValueError(f"name {self.name!r}: use lowercase letters, digits, '.', '_' or '-'")
        problem = unsafe_name(self.model_dump(include={"model", "revision", "serve"}))
        if problem:
            raise ValueError(problem)
        prompts = [self.prompt, *self.prompt_by_server.values()]
        if self.image_only and any(prompts):
            raise ValueError("image_only profiles must not have a prompt")
        if not self.image_only and not self.prompt:
            raise ValueError("prompt is empty; set image_only = true for image-only models")
        if self.sglang_logit_processor and ":" not in self.sglang_logit_processor:
            raise ValueError("sglang_logit_processor must look like 'package.module:ClassName'")
        if self.language:
            from ..languages import canonical_lang

            self.language = canonical_lang(self.language)  # ValueError: named with the profile's file
        return self

    @property
    def source(self) -> Path | None:
        """The file this profile was loaded from (None when built in code)."""
        return self._source

    def prompt_for(self, server_kind: str = "vllm", pages: int = 1) -> str:
        """The exact prompt text sent for this server kind and page count."""
        kind = cast(ServerKind, server_kind)
        if pages > 1:
            multi = self.multipage
            tokens = multi.image_token_by_server.get(kind, multi.image_token) * pages
            if multi.prompt is not None:
                return tokens + multi.prompt_by_server.get(kind, multi.prompt)
            return tokens + self.prompt_by_server.get(kind, self.prompt)
        return self.prompt_by_server.get(kind, self.prompt)

    @property
    def prompt_id(self) -> str:
        """Short, stable id of the default prompt text (recorded on every page)."""
        return prompt_id(self.prompt)

    def prompt_id_for(self, server_kind: str = "vllm", pages: int = 1) -> str:
        return prompt_id(self.prompt_for(server_kind, pages))


def prompt_id(text: str) -> str:
    """First 12 hex digits of the sha256 of the prompt text: enough to tell prompts apart."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def profile_dir() -> Path:
    """The directory of the shipped profiles."""
    return Path(__file__).resolve().parent


def profile_search_path() -> list[Path]:
    """User directories first (so a user file overrides a shipped one), then the shipped."""
    user = [Path(p).expanduser() for p in os.environ.get(ENV_PROFILE_PATH, "").split(os.pathsep) if p]
    return [*user, profile_dir()]


def _read(path: Path, *, require_stem_name: bool) -> Profile:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"profile {path}: cannot read: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"profile {path}: not valid TOML: {e}") from e
    data.setdefault("name", path.stem)
    # Checked before the model so the message is one line, not pydantic's report.
    if problem := unsafe_name(data):
        raise UsageError(f"profile {path}: {problem}")
    # Profiles in a search directory are found by file name, so the two must agree.
    if require_stem_name and data["name"] != path.stem:
        raise UsageError(f"profile {path}: name {data['name']!r} does not match the file name {path.stem!r}")
    try:
        profile = Profile.model_validate(data)
    except ValidationError as e:
        raise UsageError(f"profile {path}: invalid:\n{e}") from e
    profile._source = path
    return profile


def load_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """A profile by name (searched on VLMOCR_PROFILE_PATH, then shipped) or by .toml path."""
    text = os.fspath(name_or_path)
    looks_like_path = text.endswith(".toml") or os.sep in text or isinstance(name_or_path, Path)
    if looks_like_path:
        path = Path(text).expanduser()
        if not path.is_file():
            raise UsageError(f"profile file {path} does not exist")
        return _read(path, require_stem_name=False)
    for directory in profile_search_path():
        candidate = directory / f"{text}.toml"
        if candidate.is_file():
            return _read(candidate, require_stem_name=True)
    known = ", ".join(sorted({p.stem for d in profile_search_path() if d.is_dir() for p in d.glob("*.toml")}))
    raise UsageError(f"unknown profile {text!r}; known profiles: {known}")


def list_profiles() -> list[Profile]:
    """Every profile on the search path, one per name (user files win), sorted by name."""
    found: dict[str, Profile] = {}
    for directory in profile_search_path():
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.toml")):
            if path.stem not in found:
                found[path.stem] = _read(path, require_stem_name=True)
    return [found[k] for k in sorted(found)]


__all__ = [
    "SERVER_KINDS",
    "HfJobsSpec",
    "ImageSpec",
    "MemorySpec",
    "MultiPageSpec",
    "PostprocessSpec",
    "Profile",
    "RetrySpec",
    "Sampling",
    "ServeSpec",
    "ServerKind",
    "VersionRecipe",
    "has_control_characters",
    "list_profiles",
    "load_profile",
    "profile_dir",
    "profile_search_path",
    "prompt_id",
    "unsafe_name",
]

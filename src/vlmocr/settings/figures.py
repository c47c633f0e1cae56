"""What a describe is asked with: the options, the profile and prompt it describes with, and the
describe key (what changes a description). The state of each figure under that key is
reading/describe.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import Field

from ..exceptions import UsageError
from .config import Endpoint, VlmSettings

# Bump when a change to figures/find.py alters what is sent for the same settings (cropping rules, say), so
# old descriptions are not mistaken for current ones.
FIGURE_REVISION = 1

DEFAULT_DPI = 200.0
# Margin around the box, as a share of the page's longer side: 0.5 % is ~11 px at 200 dpi on
# A4/letter. Grounding boxes are tight and sometimes a few units short; a margin keeps the edge
# of a frame or an axis label inside the crop.
DEFAULT_MARGIN = 0.005
# Share of the page area below which a figure is an icon, a logo or a bullet: not worth a request.
DEFAULT_MIN_AREA = 0.01

# A description is a paragraph, not a page: a short budget also bounds a looping answer.
DEFAULT_MAX_TOKENS = 1024

DEFAULT_PROMPT = (
    "Describe this figure from a document for a reader who cannot see it. Say what kind of figure "
    "it is (chart, diagram, photograph, map, drawing, table image …) and what it shows: for a chart "
    "the axes, labels, values and trends; for a diagram its parts and how they connect; for a "
    "photograph or drawing its subject. Transcribe any text in it that matters. Be factual and "
    "concise (at most about 150 words) and do not guess beyond what is visible. Output only the "
    "description."
)


class DescribeOptions(VlmSettings):
    """What `vlmocr describe` is asked: the endpoint's settings as `run` has them (VlmSettings:
    endpoint, model, profile, server kind, timeout, retries, concurrency, --no-retry; a served
    describe gets a copy pointed at its server, `served_by`), and how figures are cut and
    described. Frozen: read, never rewritten."""

    prompt: str | None = None
    dpi: float = DEFAULT_DPI
    margin: float = DEFAULT_MARGIN
    min_area: float = DEFAULT_MIN_AREA
    max_figures: int | None = None  # at most this many figures described in this invocation
    workers: int | None = None  # crop processes (default: all cores)
    max_tokens: int | None = None  # default: min(profile max_tokens, DEFAULT_MAX_TOKENS)
    force: bool = False
    dry_run: bool = False
    source_roots: list[Path] = Field(default_factory=list)
    markdown: bool = True  # re-assemble docs/*.md with the descriptions afterwards
    doc_ids: frozenset[str] | None = None  # only these documents' figures (describe --library); None: all
    # The server `describe --serve` started (served_by): its key and what it told, for the reader
    # that asks it. Not a setting: never dumped, so never in the describe key.
    started: Endpoint | None = Field(default=None, exclude=True, repr=False)

    def served_by(self, endpoint: Endpoint) -> Self:
        return super().served_by(endpoint).model_copy(update={"started": endpoint})

    def check(self, served: bool = False) -> None:
        """Refuse bad values; ``served``: --serve gives the endpoint (and the model) later."""
        if not 10 <= self.dpi <= 1200:
            raise UsageError("--dpi must be within 10..1200")
        if not 0 <= self.margin <= 0.25:
            raise UsageError("--margin must be within 0..0.25 (a share of the page's longer side)")
        if not 0 <= self.min_area < 1:
            raise UsageError("--min-area must be within 0..1 (a share of the page area)")
        if self.max_figures is not None and self.max_figures < 1:
            raise UsageError("--max-figures must be at least 1")
        if self.concurrency is not None and self.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise UsageError("--workers must be at least 1")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1")
        if served:
            return
        if not self.dry_run and not self.endpoint:
            raise UsageError("describe needs --endpoint URL or --serve PROFILE (or --dry-run)")
        if not self.dry_run and not (self.profile or self.model):
            raise UsageError("describe needs --profile P or --model NAME")


def _is_shipped(profile: Any) -> bool:
    from ..profiles import profile_dir

    src = profile.source
    return src is not None and src.resolve().parent == profile_dir().resolve()


def describing_profile(profile: Any, prompt: str | None, max_tokens: int | None) -> tuple[Any, str]:
    """(the profile used for describing, its prompt).

    The prompt is ``--prompt``, else a user profile's own prompt (a profile written for
    describing), else the default describing prompt: the shipped profiles are page-reading
    recipes whose prompts transcribe. The profile keeps its sampling, extra body per server
    kind and retry ladder."""
    from ..profiles import MultiPageSpec

    shipped = _is_shipped(profile)
    if prompt:
        text = prompt
    elif not shipped and not profile.image_only and profile.prompt:
        text = profile.prompt
    else:
        text = DEFAULT_PROMPT
    tokens = max_tokens or min(profile.max_tokens, DEFAULT_MAX_TOKENS)
    update: dict[str, Any] = {"prompt": text, "prompt_by_server": {}, "image_only": False,
                              "max_tokens": tokens, "multipage": MultiPageSpec()}
    if shipped:
        update["system_prompt"] = ""  # an OCR system prompt would ask for a transcription
    return profile.model_copy(update=update), text


def describe_key_material(profile: Any, model: str | None, opts: DescribeOptions) -> dict[str, Any]:
    """Everything that changes a description and nothing that depends on where it is asked
    (the endpoint, its server kind, concurrency, workers)."""
    crop_max = profile.image.max_pixels
    return {
        "figure_revision": FIGURE_REVISION,
        "model": model,
        "revision": profile.revision or None,
        "prompt": profile.prompt,
        "system_prompt": profile.system_prompt,
        "image_position": profile.image_position,
        "dpi": float(opts.dpi),
        "margin": float(opts.margin),
        "crop_max_pixels": crop_max,
        "max_tokens": profile.max_tokens,
        "sampling": profile.sampling.model_dump(exclude_none=True),
    }

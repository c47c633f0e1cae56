"""Figure descriptions: crop the figures that layout-grounded models found on a page, ask a VLM
to describe each one, and keep one record per figure attempt in ``RUN/figures.jsonl``.

Grounded page records carry ``blocks`` ({type, bbox [x1, y1, x2, y2] on a 0–1000 grid, text});
a block whose type is image/figure/chart/picture is a figure. Its number on the page (``figure``,
1-based, in block order, counting every figure block whatever the filters) names its crop,
``RUN/figures/<doc_id>/p<page>-f<figure>.png``, so a person can check what was sent.

The figure store works like the page store: append-only JSONL (``store.RecordWriter``), the last
record of a (doc_id, page, figure) is final, and the **describe key** (a hash of what changes a
description but not of where it is asked: model, revision, prompt, crop resolution and margin,
decoding) decides what is already done. A figure is described again when it has no final record
under the key, when its last record is ``error`` (transient: resubmit retries it), when it still
owes a step of the retry ladder (loop/truncated/empty/refused, as pages), or when the page was
re-read and the figure's box moved.

Rendering and cropping run in the process pool (``readers.WorkerPool``), never on the event
loop; requests go through ``engines.openai.OpenAIClient`` (retries, backoff, 429, 5xx) with at
most ``--concurrency`` in flight (``limiter.Limiter``); answers are classified by
``quality.classify``.

Descriptions flow into the assembled Markdown as image links with the description as alt text,
``![description](../figures/<doc>/p3-f1.png)``, where the figure sits in the page text
(``apply_descriptions``; ``rebuild_with_figures`` re-assembles ``docs/*.md``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import settings_key
from .exceptions import BadInput, ExitCode, UsageError, outcome
from .reading.tasks import TaskRunner
from .record import LADDER, Status, now_iso
from .render import DEFAULT_MAX_PIXELS, Sizing, encode, is_blank, render_page
from .store import PAGES_FILE, RecordWriter, RunLock, final_records, iter_records

FIGURES_FILE = "figures.jsonl"
FIGURES_DIR = "figures"
FIGURE_TYPES = frozenset({"image", "figure", "chart", "picture"})
SCHEMA = 1
# Bump when a change here alters what is sent for the same settings (cropping rules, say), so
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
# One image token per 28×28 patch (Qwen-style ViTs); chars per text token for the estimate.
PATCH_PIXELS = 28 * 28
CHARS_PER_TOKEN = 4
# Anchors (where a figure sits in the page text) are one line of the neighbouring blocks.
ANCHOR_CHARS = 200
MIN_ANCHOR_CHARS = 4
# A "no text" answer is a fine description of a figure without text ("A photograph of a harbour
# at dusk; there is no text."). Only a bare statement of that kind, shorter than this, is empty.
NO_TEXT_DESCRIPTION_CHARS = 40
# The dry run lists this many figures one by one (the totals count all of them).
ESTIMATE_ROWS = 1000

DEFAULT_PROMPT = (
    "Describe this figure from a document for a reader who cannot see it. Say what kind of figure "
    "it is (chart, diagram, photograph, map, drawing, table image …) and what it shows: for a chart "
    "the axes, labels, values and trends; for a diagram its parts and how they connect; for a "
    "photograph or drawing its subject. Transcribe any text in it that matters. Be factual and "
    "concise (at most about 150 words) and do not guess beyond what is visible. Output only the "
    "description."
)

FAILED_STATUSES = frozenset({Status.error, Status.refused, Status.bad_input})


# ============================================================================================
# Finding figures in page records
# ============================================================================================


def is_figure_block(block: Mapping[str, Any]) -> bool:
    return str(block.get("type") or "").strip().lower() in FIGURE_TYPES


def normalize_bbox(raw: Any, scale: tuple[float, float] | None = None) -> list[float] | None:
    """[x1, y1, x2, y2] on the 0–1000 grid, ordered and clamped; None when unusable.

    ``scale`` = (width, height) when the coordinates are pixels of the image the model saw
    (dots.ocr), converted to the grid here."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(v) for v in raw)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    if scale is not None:
        w, h = scale
        x1, x2, y1, y2 = x1 / w * 1000, x2 / w * 1000, y1 / h * 1000, y2 / h * 1000
    x1, x2 = sorted((min(max(x1, 0.0), 1000.0), min(max(x2, 0.0), 1000.0)))
    y1, y2 = sorted((min(max(y1, 0.0), 1000.0), min(max(y2, 0.0), 1000.0)))
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return [_num(x1), _num(y1), _num(x2), _num(y2)]


def _num(v: float) -> float | int:
    v = round(v, 3)
    return int(v) if float(v).is_integer() else v


def pixel_boxes(bbox: list[float], width: int, height: int, margin: float) -> tuple[list[int], list[int]]:
    """(figure box, crop box) in pixels of a ``width`` × ``height`` page image for a 0–1000
    ``bbox``: the figure box rounded outwards, the crop box that plus ``margin`` (a share of the
    longer side), both clamped to the image and at least one pixel wide."""
    x1 = math.floor(bbox[0] / 1000 * width)
    y1 = math.floor(bbox[1] / 1000 * height)
    x2 = math.ceil(bbox[2] / 1000 * width)
    y2 = math.ceil(bbox[3] / 1000 * height)
    x1, x2 = min(max(x1, 0), width - 1), min(max(x2, 1), width)
    y1, y2 = min(max(y1, 0), height - 1), min(max(y2, 1), height)
    x2, y2 = max(x2, x1 + 1), max(y2, y1 + 1)
    m = round(margin * max(width, height))
    crop = [max(0, x1 - m), max(0, y1 - m), min(width, x2 + m), min(height, y2 + m)]
    return [x1, y1, x2, y2], crop


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:ANCHOR_CHARS]
    return ""


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[-ANCHOR_CHARS:]
    return ""


@dataclass
class Figure:
    """One figure block of a final page record."""

    doc_id: str
    page: int
    figure: int  # 1-based among the page's figure blocks, in block order
    block_index: int  # 0-based index in the page record's blocks
    type: str
    bbox: list[float]  # 0–1000 grid
    source: str
    page_key: str | None
    anchor: dict[str, str]  # own text, the line before and the line after, to place it in the text
    page_width: int | None = None  # of the image the page was read from (for estimates)
    page_height: int | None = None
    page_dpi: float | None = None

    @property
    def area(self) -> float:
        """Share of the page area."""
        x1, y1, x2, y2 = self.bbox
        return (x2 - x1) * (y2 - y1) / 1_000_000

    @property
    def ident(self) -> tuple[str, int, int]:
        return self.doc_id, self.page, self.figure

    @property
    def crop_rel(self) -> str:
        return crop_path(self.doc_id, self.page, self.figure)


def crop_path(doc_id: str, page: int, figure: int) -> str:
    """Where a figure's crop lives, relative to the run directory."""
    return f"{FIGURES_DIR}/{doc_id}/p{page}-f{figure}.png"


def _run_json(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _pixel_grounding(run_dir: Path) -> bool:
    """Were the page's boxes pixels of the sent image (dots.ocr's JSON) rather than 0–1000?"""
    material = _run_json(run_dir).get("key_material") or {}
    post = material.get("postprocess") if isinstance(material, dict) else None
    return isinstance(post, dict) and post.get("grounding_format") == "dots-json"


def page_figures(rec: Mapping[str, Any], pixel_grounding: bool = False) -> list[Figure]:
    """Every figure block of one page record that has a usable box, numbered in block order
    (a figure without a box keeps its number: the others' crops keep their names)."""
    blocks = rec.get("blocks") or []
    if not isinstance(blocks, list):
        return []
    scale = None
    if pixel_grounding and rec.get("width") and rec.get("height"):
        scale = (float(rec["width"]), float(rec["height"]))
    texts = [str(b.get("text") or "") if isinstance(b, dict) else "" for b in blocks]
    out: list[Figure] = []
    number = 0
    for i, block in enumerate(blocks):
        if not isinstance(block, dict) or not is_figure_block(block):
            continue
        number += 1
        bbox = normalize_bbox(block.get("bbox"), scale)
        if bbox is None:
            continue
        before = next((_last_line(t) for t in reversed(texts[:i]) if t.strip()), "")
        after = next((_first_line(t) for t in texts[i + 1:] if t.strip()), "")
        out.append(Figure(
            doc_id=str(rec["doc_id"]), page=int(rec["page"]), figure=number, block_index=i,
            type=str(block.get("type")), bbox=bbox, source=str(rec.get("source") or ""),
            page_key=rec.get("key"), anchor={"text": _first_line(texts[i]), "before": before, "after": after},
            page_width=rec.get("width"), page_height=rec.get("height"), page_dpi=rec.get("dpi"),
        ))
    return out


def count_figure_blocks(rec: Mapping[str, Any]) -> int:
    return sum(1 for b in rec.get("blocks") or [] if isinstance(b, dict) and is_figure_block(b))


def find_figures(run_dir: Path) -> tuple[list[Figure], int]:
    """(figures with a usable box, figure blocks without one) in the final page records, in
    (doc_id, page, figure) order. Streams pages.jsonl keeping only the figures, not the texts."""
    pixel = _pixel_grounding(run_dir)
    latest: dict[tuple[str, int], tuple[list[Figure], int]] = {}
    for rec in iter_records(run_dir / PAGES_FILE):
        try:
            ident = (str(rec["doc_id"]), int(rec["page"]))
        except (KeyError, TypeError, ValueError):
            continue
        found = page_figures(rec, pixel) if ident[1] > 0 and rec.get("blocks") else []
        no_box = count_figure_blocks(rec) - len(found) if rec.get("blocks") else 0
        if found or no_box:
            latest[ident] = (found, no_box)
        else:
            latest.pop(ident, None)  # the last record of the page has no figures
    figures: list[Figure] = []
    for ident in sorted(latest):
        figures += latest[ident][0]
    return figures, sum(n for _, n in latest.values())


# ============================================================================================
# Cropping (runs in pool workers)
# ============================================================================================


def _data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _cap(img: Any, max_pixels: int | None) -> tuple[Any, list[str]]:
    from PIL import Image

    if max_pixels and img.width * img.height > max_pixels:
        s = (max_pixels / (img.width * img.height)) ** 0.5
        size = (max(1, int(img.width * s)), max(1, int(img.height * s)))
        return img.resize(size, Image.Resampling.LANCZOS), ["crop_downscaled"]
    return img, []


def crop_page(spec: dict[str, Any]) -> dict[str, Any]:
    """Render one page once and cut out its figures; each crop is saved (PNG, atomically) and
    returned as a data URL with its boxes, size and sha256. ``{"error": reason}`` when the page
    cannot be rendered.

    spec: path, page, dpi, margin, crop_max_pixels, crops: [{figure, bbox, out}]."""
    t0 = time.perf_counter()
    try:
        rendered = render_page(Path(spec["path"]), int(spec["page"]),
                               Sizing(dpi=float(spec["dpi"]), longest_side=None, max_pixels=DEFAULT_MAX_PIXELS))
    except BadInput as exc:
        return {"error": exc.reason, "bad_input": True}
    except Exception as exc:  # noqa: BLE001  (a renderer failure: transient as far as we know)
        return {"error": f"{type(exc).__name__}: {exc}"[:500], "bad_input": False}
    img = rendered.image
    width, height = img.size
    crops = []
    for c in spec["crops"]:
        box, crop_box = pixel_boxes(c["bbox"], width, height, float(spec["margin"]))
        left, top, right, bottom = crop_box
        crop, flags = _cap(img.crop((left, top, right, bottom)), spec.get("crop_max_pixels"))
        data = encode(crop, "png")
        _write_atomic(Path(c["out"]), data)
        crops.append({
            "figure": c["figure"], "box_px": box, "crop_px": crop_box, "width": crop.width,
            "height": crop.height, "sha256": hashlib.sha256(data).hexdigest(), "image": _data_url(data),
            "blank": is_blank(crop), "flags": list(rendered.flags) + flags,
        })
    return {"dpi": rendered.dpi, "page_width": width, "page_height": height, "crops": crops,
            "seconds": time.perf_counter() - t0}


def shrink_crop(path: str, factor: float) -> dict[str, Any]:
    """The saved crop scaled by ``factor`` (a prompt over the context gets one smaller try)."""
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        small = img.resize((max(16, int(img.width * factor)), max(16, int(img.height * factor))),
                           Image.Resampling.LANCZOS)
    data = encode(small, "png")
    return {"image": _data_url(data), "width": small.width, "height": small.height}


def page_pixel_size(path: str, page: int, dpi: float) -> tuple[int, int]:
    """The size a page renders to at ``dpi`` (for estimates: PDFs are measured, not drawn)."""
    from .render import _lock, _scale_for, kind_of, open_pdf  # the renderer's own rules

    p = Path(path)
    sizing = Sizing(dpi=dpi, longest_side=None, max_pixels=DEFAULT_MAX_PIXELS)
    if kind_of(p) == "pdf":
        with _lock:
            pdf = open_pdf(p)
            if not 1 <= page <= len(pdf):
                raise BadInput(f"page {page} does not exist: {p.name}")
            w_pt, h_pt = pdf[page - 1].get_size()
        scale, _ = _scale_for(w_pt, h_pt, sizing)
        # pypdfium2 sizes the bitmap this way.
        return max(1, math.ceil(w_pt * scale)), max(1, math.ceil(h_pt * scale))
    img = render_page(p, page, sizing).image
    return img.width, img.height


# ============================================================================================
# Settings, the describe key and the figure state
# ============================================================================================


@dataclass
class DescribeOptions:
    endpoint: str | None = None
    profile: str | None = None
    model: str | None = None
    prompt: str | None = None
    dpi: float = DEFAULT_DPI
    margin: float = DEFAULT_MARGIN
    min_area: float = DEFAULT_MIN_AREA
    max_figures: int | None = None  # at most this many figures described in this invocation
    concurrency: int | None = None  # requests in flight (default: the profile's)
    workers: int | None = None  # crop processes (default: all cores)
    max_tokens: int | None = None  # default: min(profile max_tokens, DEFAULT_MAX_TOKENS)
    request_timeout: float = 300.0
    max_retries: int = 6
    server_kind: str = "auto"
    no_retry: bool = False
    force: bool = False
    dry_run: bool = False
    source_roots: list[Path] = field(default_factory=list)
    markdown: bool = True  # re-assemble docs/*.md with the descriptions afterwards

    def check(self) -> None:
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
        if not self.dry_run and not self.endpoint:
            raise UsageError("describe needs --endpoint URL (or --dry-run)")
        if not self.dry_run and not (self.profile or self.model):
            raise UsageError("describe needs --profile P or --model NAME")


def _is_shipped(profile: Any) -> bool:
    from .profiles import profile_dir

    src = profile.source
    return src is not None and src.resolve().parent == profile_dir().resolve()


def describing_profile(profile: Any, prompt: str | None, max_tokens: int | None) -> tuple[Any, str]:
    """(the profile used for describing, its prompt).

    The prompt is ``--prompt``, else a user profile's own prompt (a profile written for
    describing), else the default describing prompt: the shipped profiles are page-reading
    recipes whose prompts transcribe. The profile keeps its sampling, extra body per server
    kind and retry ladder."""
    from .profiles import MultiPageSpec

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


@dataclass
class FigureState:
    status: Status
    attempts: int  # highest attempt number under the key
    steps: int  # ladder steps taken (records with a ladder status) under the key
    bbox: list[float] | None
    record: dict[str, Any]


def load_state(path: Path, key: str) -> dict[tuple[str, int, int], FigureState]:
    """The last record of each figure under ``key``, with its attempt and ladder counts."""
    out: dict[tuple[str, int, int], FigureState] = {}
    for rec in iter_records(path):
        if rec.get("key") != key:
            continue
        try:
            ident = (str(rec["doc_id"]), int(rec["page"]), int(rec["figure"]))
            status = Status(rec["status"])
        except (KeyError, ValueError, TypeError):
            continue
        prev = out.get(ident)
        attempts = max(int(rec.get("attempt") or 1), prev.attempts if prev else 0)
        steps = (prev.steps if prev else 0) + (status in LADDER)
        out[ident] = FigureState(status, attempts, steps, rec.get("bbox"), rec)
    return out


def _same_box(a: Any, b: Any) -> bool:
    return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == 4 and all(
        abs(float(x) - float(y)) < 0.01 for x, y in zip(a, b))


def owes(fig: Figure, state: FigureState | None, opts: DescribeOptions, ladder_len: int) -> tuple[bool, int, int]:
    """(is the figure owed a description now, its next attempt number, its next ladder step)."""
    if state is None:
        return True, 1, 0
    if opts.force or not _same_box(state.bbox, fig.bbox):
        # --force, or the page was re-read and the box moved: a new figure as far as we know.
        return True, state.attempts + 1, 0
    if state.status is Status.error:
        return True, state.attempts + 1, state.steps
    if state.status in LADDER and not opts.no_retry and state.steps <= ladder_len:
        return True, state.attempts + 1, state.steps
    return False, state.attempts, state.steps


# ============================================================================================
# Finding the source of a page
# ============================================================================================


class SourceFinder:
    """The file a page was read from. Records carry ``source`` as the user gave it (relative
    paths to the cwd of the run, or a manifest's original_path). Tried in order, as the report
    does: the path itself, relative to each ``--source-root``, the cwd, the run directory's
    parent, the run directory and the manifest's folder; then the run's own inputs (from
    run.json) discovered again, which also finds staged copies of a manifest's documents."""

    def __init__(self, run_dir: Path, source_roots: Iterable[Path] = ()) -> None:
        self.run_dir = run_dir
        settings = _run_json(run_dir).get("settings") or {}
        self.settings = settings if isinstance(settings, dict) else {}
        self.roots = [Path(r) for r in source_roots] + [Path.cwd(), run_dir.parent, run_dir]
        if self.settings.get("manifest"):
            self.roots.append(Path(self.settings["manifest"]).parent)
        self._by_doc: dict[str, Path] | None = None
        self._cache: dict[tuple[str, str], Path | None] = {}
        self._lock = threading.Lock()

    def _discovered(self) -> dict[str, Path]:
        with self._lock:  # pages look up their sources from threads
            return self._discover_once()

    def _discover_once(self) -> dict[str, Path]:
        if self._by_doc is None:
            try:
                from .sources import discover

                docs = discover(self.settings.get("inputs") or [], self.settings.get("manifest"))
                self._by_doc = {d.doc_id: Path(d.path) for d in docs}
            except (UsageError, OSError, ValueError):  # inputs moved or gone
                self._by_doc = {}
        return self._by_doc

    def find(self, doc_id: str, source: str) -> Path | None:
        key = (doc_id, source)
        if key not in self._cache:
            self._cache[key] = self._find(doc_id, source)
        return self._cache[key]

    def _find(self, doc_id: str, source: str) -> Path | None:
        if source:
            given = Path(source)
            if given.is_absolute():
                if given.is_file():
                    return given
            else:
                for root in self.roots:
                    if (root / given).is_file():
                        return root / given
        found = self._discovered().get(doc_id)
        return found if found is not None and found.is_file() else None


# ============================================================================================
# Describing
# ============================================================================================


@dataclass
class DescribeSummary:
    run_dir: str
    key: str
    model: str | None
    prompt_id: str
    dry_run: bool = False
    figures: int = 0  # figure blocks with a usable box in the final page records
    no_box: int = 0  # figure blocks without a usable box
    small: int = 0  # below --min-area
    selected: int = 0  # figures - small
    done_before: int = 0  # already final under the key
    owed: int = 0
    over_cap: int = 0  # owed but left for later by --max-figures
    described_now: int = 0  # figures sent this time
    requests: int = 0  # HTTP requests (with retries)
    records: int = 0  # records written this time
    statuses: dict[str, int] = field(default_factory=dict)  # final status of the selected figures
    missing: int = 0  # selected figures without a final record
    estimate: dict[str, Any] | None = None
    docs_rebuilt: int = 0
    seconds: float = 0.0
    interrupted: bool = False

    def group(self, name: str) -> int:
        return sum(n for s, n in self.statuses.items() if Status(s).group == name)

    def exit_code(self) -> ExitCode:
        if self.dry_run:
            return ExitCode.ok
        return outcome(unfinished=bool(self.missing or self.group("failed")), review=bool(self.group("review")),
                       interrupted=self.interrupted)

    def done_line(self) -> str:
        if self.dry_run:
            est = self.estimate or {}
            return (f"Dry run: {self.figures} figures, {self.small} below --min-area, {self.done_before} already "
                    f"described, {self.owed - self.over_cap} to describe ({self.over_cap} over --max-figures), "
                    f"~{est.get('total_tokens', 0)} tokens (images {est.get('image_tokens', 0)}, prompts "
                    f"{est.get('prompt_tokens', 0)}, output budget {est.get('output_tokens', 0)})")
        rate = self.described_now / self.seconds * 3600 if self.seconds > 0 else 0.0
        return (f"Described: {self.selected} figures, records={sum(self.statuses.values())} "
                f"ok={self.statuses.get('ok', 0)} "
                f"review={self.group('review')} failed={self.group('failed')} missing={self.missing} "
                f"small={self.small} (now {self.described_now}, {rate:.0f} figures/h)")

    def as_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["exit_code"] = int(self.exit_code())
        data["line"] = self.done_line()
        return data


def _visible_len(text: str) -> int:
    return len("".join(text.split()))


def classify_description(text: str, finish_reason: str | None, blank_crop: bool) -> tuple[Status, list[str]]:
    """``quality.classify`` for a description. One difference: saying the figure has no text
    is a description (figures often have none), unless that is all the answer says."""
    from .quality import FLAG_NO_TEXT_ANSWER, classify

    status, flags = classify(text, finish_reason, blank_image=blank_crop)
    status = Status(status)
    if (status is Status.empty and FLAG_NO_TEXT_ANSWER in flags
            and _visible_len(text) >= NO_TEXT_DESCRIPTION_CHARS):
        status = Status.ok
    return status, list(flags)


def _clean_description(text: str) -> str:
    from .postprocess import strip_fences

    return strip_fences(text or "").strip()


class _Describer:
    def __init__(self, run_dir: Path, opts: DescribeOptions, reader: Any, profile: Any, key: str,
                 writer: RecordWriter, runner: TaskRunner) -> None:
        self.run_dir = run_dir
        self.opts = opts
        self.reader = reader
        self.pool = reader.pool
        self.server_kind = reader.server_kind
        self.model = reader.model_name
        self.profile = profile
        self.key = key
        self.writer = writer
        self.runner = runner
        from .profiles import prompt_id

        self.prompt_id = prompt_id(profile.prompt)
        self.described = 0
        self.counts: Counter[str] = Counter()

    def emit(self, rec: dict[str, Any]) -> None:
        if self.runner.store_broken:
            return  # not durable, so not done: described again on resume
        try:
            self.writer.append(rec)
        except OSError as exc:
            self.runner.store_failed(str(self.writer.path), exc)
            return
        self.counts[rec["status"]] += 1

    def record(self, fig: Figure, attempt: int, status: Status, t0: float, crop: dict[str, Any] | None = None,
               page: dict[str, Any] | None = None, *, description: str = "", finish_reason: str | None = None,
               tokens_in: int | None = None, tokens_out: int | None = None, error: str | None = None,
               flags: list[str] | None = None) -> dict[str, Any]:
        crop = crop or {}
        return {
            "schema": SCHEMA, "doc_id": fig.doc_id, "source": fig.source, "page": fig.page, "figure": fig.figure,
            "block_index": fig.block_index, "type": fig.type, "bbox": fig.bbox, "area": round(fig.area, 6),
            "crop": fig.crop_rel if crop else None, "box_px": crop.get("box_px"), "crop_px": crop.get("crop_px"),
            "width": crop.get("width"), "height": crop.get("height"), "dpi": (page or {}).get("dpi"),
            "crop_sha256": crop.get("sha256"), "key": self.key, "page_key": fig.page_key, "status": status.value,
            "description": description, "finish_reason": finish_reason, "model": self.model,
            "revision": self.profile.revision or None, "prompt_id": self.prompt_id, "attempt": attempt,
            "tokens_in": tokens_in, "tokens_out": tokens_out, "seconds": round(time.monotonic() - t0, 4),
            "error": error, "flags": flags or [], "anchor": fig.anchor, "finished_at": now_iso(),
        }

    async def page(self, path: Path | None, figs: list[tuple[Figure, int, int]]) -> None:
        """Crop one page's owed figures in the pool, then describe them."""
        t0 = time.monotonic()
        first = figs[0][0]
        if path is None:
            for fig, attempt, _ in figs:
                self.emit(self.record(fig, attempt, Status.error, t0,
                                      error=f"source not found: {fig.source!r} (pass --source-root)"))
            return
        spec = {"path": str(path), "page": first.page, "dpi": self.opts.dpi, "margin": self.opts.margin,
                "crop_max_pixels": self.profile.image.max_pixels,
                "crops": [{"figure": f.figure, "bbox": f.bbox, "out": str(self.run_dir / f.crop_rel)}
                          for f, _, _ in figs]}
        ok, page = await self.pool.call_safely(crop_page, spec)
        if not ok or "error" in page:
            status = Status.bad_input if not ok or page.get("bad_input") else Status.error
            why = "the page crashed the renderer twice" if not ok else page["error"]
            for fig, attempt, _ in figs:
                self.emit(self.record(fig, attempt, status, t0, error=why))
            return
        crops = {c["figure"]: c for c in page["crops"]}
        await asyncio.gather(*(self.figure(fig, attempt, step, crops[fig.figure], page)
                               for fig, attempt, step in figs))

    async def figure(self, fig: Figure, attempt: int, step: int, crop: dict[str, Any], page: dict[str, Any]) -> None:
        """Describe one figure, climbing the retry ladder while the answer needs review."""
        from .request import ladder_overrides

        sent = False
        while not self.runner.stop.is_set():
            overrides = ladder_overrides(self.profile, self.server_kind, step)
            if overrides is None:
                return  # the ladder is exhausted: the last review record stays final
            rec = await self.attempt(fig, attempt, step, crop, page, overrides)
            if rec is None:
                return
            if not sent:
                sent = True
                self.described += 1
            self.emit(rec)
            if Status(rec["status"]) not in LADDER or self.opts.no_retry:
                return
            attempt += 1
            step += 1

    async def attempt(self, fig: Figure, attempt: int, step: int, crop: dict[str, Any], page: dict[str, Any],
                      overrides: dict[str, Any]) -> dict[str, Any] | None:
        """One request for one figure, through the page reader's own `ask` (request limit,
        context-overflow shrink, endpoint gone); None when stopping before it was sent."""
        t0 = time.monotonic()

        async def shrink(factor: float) -> str | None:
            ok, small = await self.pool.call_safely(shrink_crop, str(self.run_dir / fig.crop_rel), factor)
            return small["image"] if ok else None

        answer = await self.reader.ask(crop["image"], overrides, profile=self.profile, shrink=shrink,
                                       should_stop=self.runner.stop.is_set)
        if answer is None:
            return None  # stopping: only requests already sent may finish
        flags = list(crop.get("flags", [])) + answer.flags
        result = answer.result
        if result is None:
            return self.record(fig, attempt, Status.error, t0, crop, page, error=answer.error, flags=flags)
        text = _clean_description(result.text)
        status, qflags = classify_description(text, result.finish_reason, bool(crop.get("blank")))
        flags += qflags
        if step:
            flags.append(f"ladder:{step}")
        if result.requests > 1:
            flags.append(f"http_tries:{result.requests}")
        return self.record(fig, attempt, status, t0, crop, page, description=text, finish_reason=result.finish_reason,
                           tokens_in=result.tokens_in, tokens_out=result.tokens_out, flags=flags)


def _estimate(figs: list[Figure], finder: SourceFinder, opts: DescribeOptions, profile: Any) -> dict[str, Any]:
    """Tokens a describe would spend: image tokens (crop pixels / 784) + prompt (chars / 4) +
    the output budget (max_tokens), per figure. Crops are measured from the page size at the
    chosen dpi, without rendering."""
    sizes: dict[tuple[str, int], tuple[int, int] | None] = {}
    prompt_tokens = math.ceil(len(profile.prompt + profile.system_prompt) / CHARS_PER_TOKEN)
    image_tokens = 0
    unknown = 0
    rows: list[dict[str, Any]] = []
    for fig in figs:
        page_key = (fig.doc_id, fig.page)
        if page_key not in sizes:
            path = finder.find(fig.doc_id, fig.source)
            try:
                sizes[page_key] = page_pixel_size(str(path), fig.page, opts.dpi) if path else None
            except BadInput:
                sizes[page_key] = None
        size = sizes[page_key]
        if size is None:
            unknown += 1
            continue
        _, crop = pixel_boxes(fig.bbox, size[0], size[1], opts.margin)
        w, h = crop[2] - crop[0], crop[3] - crop[1]
        cap = profile.image.max_pixels
        if cap and w * h > cap:
            s = (cap / (w * h)) ** 0.5
            w, h = max(1, int(w * s)), max(1, int(h * s))
        tokens = math.ceil(w * h / PATCH_PIXELS)
        image_tokens += tokens
        if len(rows) < ESTIMATE_ROWS:
            rows.append({"doc_id": fig.doc_id, "page": fig.page, "figure": fig.figure, "crop_width": w,
                         "crop_height": h, "image_tokens": tokens})
    n = len(figs) - unknown
    out = {"figures": n, "unmeasured": unknown, "image_tokens": image_tokens, "prompt_tokens": prompt_tokens * n,
           "output_tokens": profile.max_tokens * n, "max_tokens": profile.max_tokens, "per_figure": rows}
    out["input_tokens"] = out["image_tokens"] + out["prompt_tokens"]
    out["total_tokens"] = out["input_tokens"] + out["output_tokens"]
    return out


def _select(figures: list[Figure], opts: DescribeOptions, state: dict, ladder_len: int,
            summary: DescribeSummary) -> list[tuple[Figure, int, int]]:
    owed: list[tuple[Figure, int, int]] = []
    for fig in figures:
        if fig.area < opts.min_area:
            summary.small += 1
            continue
        summary.selected += 1
        need, attempt, step = owes(fig, state.get(fig.ident), opts, ladder_len)
        if need:
            owed.append((fig, attempt, step))
        else:
            summary.done_before += 1
    summary.owed = len(owed)
    if opts.max_figures is not None and len(owed) > opts.max_figures:
        summary.over_cap = len(owed) - opts.max_figures
        owed = owed[: opts.max_figures]
    return owed


def _final_statuses(path: Path, key: str, figures: list[Figure], opts: DescribeOptions,
                    summary: DescribeSummary) -> None:
    state = load_state(path, key)
    counts: Counter[str] = Counter()
    missing = 0
    for fig in figures:
        if fig.area < opts.min_area:
            continue
        st = state.get(fig.ident)
        if st is None or not _same_box(st.bbox, fig.bbox):
            missing += 1
        else:
            counts[st.status.value] += 1
    summary.statuses = dict(counts)
    summary.missing = missing


async def _describe(run_dir: Path, opts: DescribeOptions, progress: Callable[[str], None],
                    handle_signals: bool) -> DescribeSummary:
    from .profiles import load_profile, prompt_id
    from .readers import WorkerPool

    t_start = time.monotonic()
    figures, no_box = find_figures(run_dir)
    finder = SourceFinder(run_dir, opts.source_roots)
    path = run_dir / FIGURES_FILE

    if opts.dry_run:
        base = load_profile(opts.profile or "generic")
        profile, _ = describing_profile(base, opts.prompt, opts.max_tokens)
        model = opts.model or base.model or None
        key = settings_key(describe_key_material(profile, model, opts))
        summary = DescribeSummary(str(run_dir), key, model, prompt_id(profile.prompt), dry_run=True,
                                  figures=len(figures), no_box=no_box)
        owed = _select(figures, opts, load_state(path, key), len(profile.retry.temperatures), summary)
        summary.estimate = _estimate([f for f, _, _ in owed], finder, opts, profile)
        summary.seconds = round(time.monotonic() - t_start, 3)
        return summary

    from .config import RunConfig
    from .limiter import Limiter
    from .vlm import make_vlm_reader

    workers = opts.workers or max(1, os.cpu_count() or 1)
    try:
        cfg = RunConfig(engine="openai", endpoint=opts.endpoint, model=opts.model, profile=opts.profile,
                        concurrency=opts.concurrency, request_timeout=opts.request_timeout,
                        max_retries=opts.max_retries, server_kind=opts.server_kind,  # type: ignore[arg-type]
                        workers=workers)
    except ValueError as exc:
        raise UsageError(f"invalid settings: {exc}") from None
    # The preflight of page reading: the endpoint answers and serves the model.
    pool = WorkerPool(workers, {})
    try:
        reader = await make_vlm_reader(cfg, pool)
    except BaseException:
        pool.shutdown(abandon=True)
        raise
    writer: RecordWriter | None = None
    runner = TaskRunner(progress)
    try:
        profile, _ = describing_profile(reader.profile, opts.prompt, opts.max_tokens)
        key = settings_key(describe_key_material(profile, reader.model_name, opts))
        summary = DescribeSummary(str(run_dir), key, reader.model_name, prompt_id(profile.prompt),
                                  figures=len(figures), no_box=no_box)
        writer = RecordWriter(path)  # repairs a torn last line first
        owed = _select(figures, opts, load_state(path, key), len(profile.retry.temperatures), summary)
        d = _Describer(run_dir, opts, reader, profile, key, writer, runner)

        by_page: dict[tuple[str, int], list[tuple[Figure, int, int]]] = {}
        for item in owed:
            by_page.setdefault((item[0].doc_id, item[0].page), []).append(item)
        if by_page:
            progress(f"describing {len(owed)} figures on {len(by_page)} pages with {reader.model_name} "
                     f"({reader.requests.limit} in flight)")

        async def pages() -> AsyncIterator[tuple[tuple[str, int], list[tuple[Figure, int, int]]]]:
            for item in by_page.items():
                yield item

        async def one_page(job: tuple[tuple[str, int], list[tuple[Figure, int, int]]]) -> None:
            (doc_id, _), items = job
            src = await asyncio.to_thread(finder.find, doc_id, items[0][0].source)
            await d.page(src, items)

        async def report() -> None:
            while True:
                await asyncio.sleep(10)
                progress(f"{d.described}/{len(owed)} figures described, "
                         + " ".join(f"{k}={v}" for k, v in sorted(d.counts.items())))

        if handle_signals:
            runner.listen()
        ticker = asyncio.create_task(report())
        try:
            # Pages in flight: enough to keep every request slot and every worker busy.
            await runner.drain(pages(), one_page, Limiter(max(reader.requests.limit, workers * 2)),
                               lambda job: f"{job[0][0]} page {job[0][1]}")
        finally:
            ticker.cancel()
            if handle_signals:
                runner.stop_listening()
        summary.interrupted = runner.interrupted
        summary.described_now = d.described
        summary.records = writer.written
        summary.requests = reader.client.stats.requests
        if runner.fatal is not None:
            raise runner.fatal
    finally:
        if writer is not None:
            try:
                writer.close()
            except OSError:
                pass  # the disk is full: the run's fatal error says so
        # A second signal means the user wants out now: kill the crop workers.
        await reader.aclose(abandon=runner.abandon.is_set())
    _final_statuses(path, key, figures, opts, summary)
    if opts.markdown:
        summary.docs_rebuilt = rebuild_with_figures(run_dir)
    summary.seconds = round(time.monotonic() - t_start, 3)
    return summary


def describe_run(run_dir: str | Path, opts: DescribeOptions, *, progress: Callable[[str], None] | None = None,
                 handle_signals: bool = False) -> DescribeSummary:
    """Library entry point of `vlmocr describe`: describe every owed figure of a run."""
    run_dir = Path(run_dir)
    opts.check()
    if not (run_dir / PAGES_FILE).is_file():
        raise UsageError(f"{run_dir} is not a run directory (no {PAGES_FILE})")
    note = progress or (lambda _msg: None)
    if opts.dry_run:
        return asyncio.run(_describe(run_dir, opts, note, handle_signals))
    lock = RunLock(run_dir)
    # Its own lock file: describing may go on while no one else writes figures.jsonl; a page run
    # on the same directory writes other files.
    lock.path = run_dir / ".describe.lock"
    lock.acquire()
    try:
        return asyncio.run(_describe(run_dir, opts, note, handle_signals))
    finally:
        lock.release()


# ============================================================================================
# Descriptions in Markdown and exports
# ============================================================================================


@dataclass(frozen=True)
class FigureRef:
    """A described figure, ready to be put into a page's text."""

    doc_id: str
    page: int
    figure: int
    crop: str  # relative to the run directory
    description: str
    bbox: tuple[float, ...] | None = None
    anchor: Mapping[str, str] = field(default_factory=dict)
    type: str = ""
    model: str | None = None
    prompt_id: str | None = None
    crop_sha256: str | None = None

    def markdown(self, link_prefix: str = "../") -> str:
        return f"![{alt_text(self.description)}]({link_prefix}{self.crop})"

    def as_dict(self) -> dict[str, Any]:
        """For structured exports (JSON/JSONL): one entry per figure of a page."""
        return {"figure": self.figure, "type": self.type, "bbox": list(self.bbox) if self.bbox else None,
                "crop": self.crop, "description": self.description, "model": self.model,
                "prompt_id": self.prompt_id, "crop_sha256": self.crop_sha256}


_ALT_ESCAPE = re.compile(r"([\\\[\]])")


def alt_text(description: str) -> str:
    """A description as Markdown alt text: one line, brackets and backslashes escaped."""
    return _ALT_ESCAPE.sub(r"\\\1", " ".join((description or "").split()))


def figures_by_page(run_dir: str | Path) -> dict[tuple[str, int], list[FigureRef]]:
    """The described figures of a run, by (doc_id, page), in figure order: for each figure the
    latest ``ok`` record (any describe key: a later failed attempt with other settings does
    not hide a good description). Empty when the run has no figures.jsonl."""
    path = Path(run_dir) / FIGURES_FILE
    latest: dict[tuple[str, int, int], dict[str, Any]] = {}
    for rec in iter_records(path):
        if rec.get("status") != Status.ok.value or not rec.get("description") or not rec.get("crop"):
            continue
        try:
            latest[(str(rec["doc_id"]), int(rec["page"]), int(rec["figure"]))] = rec
        except (KeyError, TypeError, ValueError):
            continue
    out: dict[tuple[str, int], list[FigureRef]] = {}
    for (doc_id, page, number), rec in sorted(latest.items()):
        bbox = rec.get("bbox")
        out.setdefault((doc_id, page), []).append(FigureRef(
            doc_id=doc_id, page=page, figure=number, crop=str(rec["crop"]), description=str(rec["description"]),
            bbox=tuple(bbox) if isinstance(bbox, list) else None, anchor=dict(rec.get("anchor") or {}),
            type=str(rec.get("type") or ""), model=rec.get("model"), prompt_id=rec.get("prompt_id"),
            crop_sha256=rec.get("crop_sha256"),
        ))
    return out


def figure_markdown(run_dir: str | Path, link_prefix: str = "../") -> dict[tuple[str, int], list[str]]:
    """``![description](figures/<doc>/p<page>-f<n>.png)`` per described figure, by page."""
    return {k: [f.markdown(link_prefix) for f in v] for k, v in figures_by_page(run_dir).items()}


# Figure placeholders a model may leave in the page text: Markdown images and HTML <img>.
_PLACEHOLDER = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)|<img\b[^>\n]*>", re.IGNORECASE)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _find(text: str, needle: str, start: int) -> int:
    if len(needle) < MIN_ANCHOR_CHARS:
        return -1
    i = text.find(needle, start)
    return i if i >= 0 else text.find(needle)


def _position(text: str, fig: FigureRef, cursor: int) -> int | None:
    """Where the figure goes in ``text``: before its own text (a caption the block carried),
    after the line before it, or before the line after it; None when no anchor is found."""
    anchor = fig.anchor or {}
    own = anchor.get("text") or ""
    if (i := _find(text, own, cursor)) >= 0:
        return _line_start(text, i)
    before = anchor.get("before") or ""
    if (i := _find(text, before, cursor)) >= 0:
        return _line_end(text, i + len(before))
    after = anchor.get("after") or ""
    if (i := _find(text, after, cursor)) >= 0:
        return _line_start(text, i)
    return None


def apply_descriptions(text: str, figures: Iterable[FigureRef], link_prefix: str = "../") -> str:
    """The page text with each described figure as ``![description](link)``.

    A figure placeholder the model left in the text (``![…](…)`` or ``<img …>``; the n-th
    one stands for figure n) is replaced; otherwise the image goes where the figure block sat
    among the page's blocks (found by the neighbouring blocks' text), or at the page end when
    that cannot be found. Idempotent: a figure whose link is already in the text is left alone."""
    figs = sorted((f for f in figures if f.description), key=lambda f: f.figure)
    figs = [f for f in figs if f"]({link_prefix}{f.crop})" not in text]
    if not figs:
        return text
    # Images already put in by an earlier call keep their places in the count.
    placeholders = list(_PLACEHOLDER.finditer(text))
    replaced: dict[int, FigureRef] = {}
    rest: list[FigureRef] = []
    for f in figs:
        if f.figure - 1 < len(placeholders):
            replaced[f.figure - 1] = f
        else:
            rest.append(f)
    if replaced:
        out, last = [], 0
        for i, m in enumerate(placeholders):
            if i in replaced:
                out += [text[last:m.start()], replaced[i].markdown(link_prefix)]
                last = m.end()
        text = "".join(out) + text[last:]
    if not rest:
        return text
    inserts: list[tuple[int, int, str]] = []
    cursor = 0
    for f in rest:
        pos = _position(text, f, cursor)
        if pos is None:
            pos = len(text)
        else:
            cursor = pos
        inserts.append((pos, f.figure, f.markdown(link_prefix)))
    inserts.sort()
    pieces: list[str] = []
    last = 0
    for pos, _, md in inserts:
        pieces.append(text[last:pos])
        pieces.append("\x00" + md + "\x00")  # paragraph breaks are settled below
        last = pos
    pieces.append(text[last:])
    joined = "".join(pieces)
    # Each image is its own paragraph: one blank line before and after, none at the edges.
    joined = re.sub(r"\n*\x00\n*", "\x00", joined)
    joined = joined.replace("\x00\x00", "\n\n")
    joined = joined.strip("\x00").replace("\x00", "\n\n")
    return joined


def _current(fig: FigureRef, current: list[Figure] | None) -> bool:
    """Is the described figure still on the page as it was read last? (A page re-read by a
    grounded model may have moved or dropped it; a page without blocks keeps it.)"""
    if current is None:
        return True
    match = next((c for c in current if c.figure == fig.figure), None)
    return match is not None and fig.bbox is not None and _same_box(list(fig.bbox), match.bbox)


def with_figures(records: Iterable[dict[str, Any]], figures: Mapping[tuple[str, int], list[FigureRef]],
                 link_prefix: str = "../", pixel_grounding: bool = False) -> list[dict[str, Any]]:
    """Copies of page records whose text carries their figures' descriptions (records without
    described figures are returned as they are)."""
    out = []
    for rec in records:
        figs = figures.get((str(rec.get("doc_id")), int(rec.get("page") or 0)))
        if figs:
            current = page_figures(rec, pixel_grounding) if rec.get("blocks") else None
            figs = [f for f in figs if _current(f, current)]
        if figs:
            rec = {**rec, "text": apply_descriptions(rec.get("text") or "", figs, link_prefix)}
        out.append(rec)
    return out


def add_figures(run_dir: str | Path, records: Iterable[dict[str, Any]],
                link_prefix: str = "../") -> list[dict[str, Any]]:
    """The integration point for assembled documents: ``records`` (final page records of one
    or more documents of ``run_dir``) with their figures' descriptions in the text. Returns the
    records unchanged (as a list) when the run has no described figures."""
    run_dir = Path(run_dir)
    records = list(records)
    if not (run_dir / FIGURES_FILE).is_file():
        return records
    figures = figures_by_page(run_dir)
    if not figures:
        return records
    return with_figures(records, figures, link_prefix, _pixel_grounding(run_dir))


def rebuild_with_figures(run_dir: str | Path, link_prefix: str = "../") -> int:
    """Re-assemble docs/<doc>.md of every document with described figures, from the final page
    records, with the descriptions in place (as `outputs.rebuild_documents` does without them).
    Returns the number of documents written."""
    from .outputs import write_document

    run_dir = Path(run_dir)
    figures = figures_by_page(run_dir)
    docs = {doc for doc, _ in figures}
    if not docs:
        return 0
    finals = final_records(run_dir / PAGES_FILE, docs=docs)
    by_doc: dict[str, list[dict[str, Any]]] = {}
    for (doc_id, _page), rec in finals.items():
        by_doc.setdefault(doc_id, []).append(rec)
    pixel = _pixel_grounding(run_dir)
    for doc_id, recs in by_doc.items():
        pages = [r for r in recs if int(r["page"]) > 0]
        # A document-level failure (page 0) is shown only while no page of it was read.
        write_document(run_dir, doc_id, with_figures(pages or recs, figures, link_prefix, pixel))
    return len(by_doc)


def page_figure_fields(run_dir: str | Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """For structured exports: the described figures of each page as JSON-ready dicts
    (figure, type, bbox, crop, description, model, prompt_id, crop_sha256)."""
    return {k: [f.as_dict() for f in v] for k, v in figures_by_page(run_dir).items()}


__all__ = [
    "DEFAULT_PROMPT",
    "FIGURES_FILE",
    "FIGURE_TYPES",
    "DescribeOptions",
    "DescribeSummary",
    "Figure",
    "FigureRef",
    "add_figures",
    "alt_text",
    "apply_descriptions",
    "crop_page",
    "crop_path",
    "describe_run",
    "figure_markdown",
    "figures_by_page",
    "find_figures",
    "is_figure_block",
    "normalize_bbox",
    "page_figure_fields",
    "page_figures",
    "pixel_boxes",
    "rebuild_with_figures",
    "with_figures",
]

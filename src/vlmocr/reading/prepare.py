"""A page made ready to read, one recipe for every path: rendered (inputs/render.py), turned upright
when it lies turned, straightened when askew, cleaned under --clean — for a CPU engine as rendered,
for a VLM in grey when it holds no colour and encoded to send (`prepare_for_http`), and again as it
was sent, for the CPU reading that places a VLM's words (`sent`). What was done is kept, in order
(`steps`), so the positions read on the prepared image map back onto the page as scanned."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ..exceptions import BadInput
from ..inputs.render import Rendered, blank_and_ink, encode, grey_if_neutral, render_page
from ..inputs.repair import despeckled_first
from ..languages import script_of_lang
from ..positions.geometry import Step, steps_before
from ..runfolder.flags import Flag
from ..runfolder.record import JsonObject, PageRecord, PageTask, Status
from .context import PageContext
from .orientation import ROTATIONS, Upright, turn_if_not_upright, turn_to_upright
from .textlayer import from_text_layer


def image_digest(img) -> str:
    h = hashlib.sha256()
    h.update(f"{img.mode}:{img.width}x{img.height}:".encode())
    h.update(img.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class PreparedPage:
    """A page as it will be read: the rendering it came from, the image, and what was done to it."""

    rendered: Rendered
    image: Image.Image
    flags: list[str]  # the rendering's, the turn's (rotated:…, osd_confidence:…, OSD's word), cleaning's
    steps: list[Step] = field(default_factory=list)  # the turn and the straightening, in order
    rotation: int = 0  # degrees turned counter-clockwise here (a turn found, not one asked for)
    rotation_from: str = ""  # who found it: osd, or lines (the line classifier)
    up: Upright | None = None  # what orientation detection said, when it was asked
    skew: float | None = None  # degrees it lay askew, straightened
    cleaned: list[str] = field(default_factory=list)  # what --clean or a despeckle first did (also in flags)
    blank: bool = False  # no ink to read (judged before any turn; the VLM's pages only)
    ink: float | None = None
    same_as_file: str | None = None  # the file shows exactly this image (an engine may read it)


def prepare_image(task: PageTask, ctx: PageContext, *, for_vlm: bool, rendered: Rendered | None = None,
                  look: bool = True, sent: tuple[int | None, float | None] | None = None) -> PreparedPage:
    """The page of `task` made ready: rendered (or `rendered`, a rendering already made), turned
    upright when `look` and the run's --rotate-pages say to look (a CPU reading: `always` asks OSD
    of every page, `auto` turns after a failed reading instead; a VLM's page: `always`, or the
    cheap look at the first page of a document under `auto`; a turn the task names is applied),
    straightened (a VLM's page only under --deskew on) and cleaned. A VLM's page is grey when it
    holds no colour, and a blank one is left as it is. `sent`: the page again exactly as it was
    sent to a VLM — its turn and straightening, nothing looked for, nothing cleaned."""
    rendered = rendered if rendered is not None else render_page(Path(task.path), task.page, task.sizing)
    flags = list(rendered.flags)
    img = grey_if_neutral(rendered.image) if for_vlm else rendered.image
    if sent is not None:
        return _as_sent(rendered, img, flags, *sent)
    blank, ink = blank_and_ink(img) if for_vlm else (False, None)
    steps: list[Step] = []
    rotation, rotation_from, up = 0, "", None
    rotate = ctx.rotate_pages
    if for_vlm and task.vlm.rotate:
        img = img.transpose(ROTATIONS[task.vlm.rotate])  # the task's turn: the record says it (VlmReader)
    elif look and not blank and (rotate == "always" or (for_vlm and task.vlm.look_before and rotate == "auto")):
        # A page on its side or upside down should not be read as it lies. A CPU engine under
        # `auto` reads first and asks OSD only when the reading fails (worker.read_page). A VLM's
        # first page of each document, and every page of a document that had a page turned, is
        # looked at first: the ink (~1.5 ms) for a page on its side, RapidOCR's line classifier
        # (~60 ms) for one not clearly upright; OSD only when either says so.
        if rotate == "always":
            up = turn_to_upright(img if for_vlm else grey_if_neutral(img))
        else:
            up = turn_if_not_upright(img, script_of_lang(task.read_as()[0]))
        flags += up.flags
        if up.turn:
            steps.append(Step("turn", up.turn, *img.size))
            img = img.transpose(ROTATIONS[up.turn])
            flags += [Flag.rotated.of(turn=up.turn), Flag.osd_confidence.of(confidence=f"{up.confidence:.1f}")]
            rotation, rotation_from = up.turn, up.how
    skew = None
    cleaned: list[str] = []
    if not blank and not for_vlm and ctx.repair != "off":
        # A scan covered in specks is despeckled before it is read (inputs/repair.py: why not after).
        if (found := despeckled_first(img)) is not None:
            img = found[0]
            cleaned = [Flag.repaired.of(how="despeckle"), Flag.speckle.of(share=f"{found[1]:.3f}")]
            flags += cleaned
    if not blank:
        img, skew = straight_page(img, ctx, for_vlm=for_vlm)
        if skew is not None:
            steps.append(Step("skew", skew, *img.size))
        img, scan_cleaned = cleaned_page(img, ctx)
        flags += scan_cleaned
        cleaned += scan_cleaned
    # Turned, straightened or cleaned, it is not the file's pixels any more: no engine may read
    # the file instead.
    same = (str(rendered.same_as_file) if rendered.same_as_file and not for_vlm and not steps and not cleaned
            else None)
    return PreparedPage(rendered, img, flags, steps, rotation, rotation_from, up, skew, cleaned, blank, ink, same)


def _as_sent(rendered: Rendered, img: Image.Image, flags: list[str], rotation: int | None,
             skew: float | None) -> PreparedPage:
    """The page turned and straightened again as it was sent to a VLM."""
    steps = steps_before(rotation, skew, img.size)
    if rotation:
        img = img.transpose(ROTATIONS[rotation])
    if skew is not None:
        from ..inputs.skew import straighten

        img = straighten(img, skew)
    blank, ink = blank_and_ink(img)
    return PreparedPage(rendered, img, flags, steps, skew=skew, blank=blank, ink=ink)


def straight_page(img: Image.Image, ctx: PageContext, *, for_vlm: bool = False) -> tuple[Image.Image, float | None]:
    """The page straightened when it lies askew (inputs/skew.py), and the angle it lay at; (the
    page, None) when it is read as it lies: straight, too little ink to tell (a blank page),
    `--deskew off`, or a page for a VLM under `--deskew auto` (`on` straightens those too).
    Some 10 ms a page."""
    mode = ctx.deskew
    if mode == "off" or (for_vlm and mode != "on"):
        return img, None
    from ..inputs.skew import find_skew, straighten

    skew = find_skew(img)
    if skew is None or not skew.worth_straightening:
        return img, None
    return straighten(img, skew.angle), skew.angle


def cleaned_page(img: Image.Image, ctx: PageContext) -> tuple[Image.Image, list[str]]:
    """The scan cleaned under `--clean` (inputs/clean.py), with the flags saying what was done;
    (the page, []) otherwise."""
    if not ctx.clean_scans:
        return img, []
    from ..inputs.clean import clean_page

    return clean_page(img)


@dataclass(frozen=True)
class Prepared:
    """A page rendered and encoded for an HTTP engine, ready to send."""

    image: str  # data URL
    sha256: str  # of the decoded pixels sent (as a CPU engine's image_sha256)
    width: int
    height: int
    dpi: float | None
    flags: tuple[str, ...]
    blank: bool
    ink: float | None = None  # render.ink_share of the image sent
    # Degrees the page was turned counter-clockwise before it was sent because it lay turned
    # (turn_if_not_upright / turn_to_upright); 0: sent as rendered (or as the task said).
    rotation: int = 0
    rotation_from: str = ""  # who found the turn: osd, or lines (OSD unsure, the line classifier)
    skew: float | None = None  # degrees it lay askew, straightened before it was sent (straight_page)
    master: JsonObject | None = None  # the page's master image (render.Rendered.master), as a record keeps it

    def with_flag(self, flag: str) -> "Prepared":
        return dataclasses.replace(self, flags=(*self.flags, flag))


def prepare_for_http(task: PageTask, ctx: PageContext | None = None) -> Prepared | PageRecord:
    """For an HTTP engine: a finished record when the text layer serves the page (auto) or the
    page is bad input; otherwise the page prepared (`prepare_image`) and encoded as a data URL,
    ready to send."""
    import base64

    ctx = ctx or PageContext()
    t0 = time.perf_counter()
    try:
        layer_flags: list[str] = []
        if task.engine == "auto":
            rec, _, layer_flags = from_text_layer(task, ctx, "auto", t0)
            if rec is not None:
                return rec
        page = prepare_image(task, ctx, for_vlm=True)
        img = page.image
        fmt = task.vlm.image_format
        data = encode(img, fmt, task.vlm.jpeg_quality)
        mime = "image/jpeg" if fmt in ("jpeg", "jpg") else "image/png"
        master = page.rendered.master
        return Prepared(image=f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}",
                        sha256=image_digest(img), width=img.width, height=img.height, dpi=page.rendered.dpi,
                        flags=tuple([*layer_flags, *page.flags]), blank=page.blank, ink=page.ink,
                        rotation=page.rotation, rotation_from=page.rotation_from, skew=page.skew,
                        master=master.to_json() if master is not None else None)
    except BadInput as exc:
        return task.record(Status.bad_input, engine=task.engine, error=exc.reason,
                           seconds=round(time.perf_counter() - t0, 4))

"""Thumbnails of the flagged pages (thumbs/<hash>.jpg), rendered from the run's source files in
worker processes, at most --max-thumbs of them. A page without one gets a note saying why."""

from __future__ import annotations

import hashlib
import multiprocessing
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..files import atomic_file
from ..inputs.finder import SourceFinder
from ..machine import available_cores
from ..runfolder.record import JsonObject
from .gather import Doc, Page, ReportOptions

THUMB_DIR = "thumbs"
_THUMB_FILE = re.compile(r"[0-9a-f]{20}\.jpg")  # the names _thumb_name gives

ThumbTask = tuple[str, int, int, str]  # source, page, longest side, destination


@dataclass
class Thumbs:
    made: int = 0
    skipped_cap: int = 0  # flagged pages over --max-thumbs
    used: set[str] = field(default_factory=set)  # file names this build refers to


def make_thumbs(flagged: list[Page], docs: list[Doc], opts: ReportOptions, run_info: JsonObject, out: Path,
                notes: list[str], say: Callable[[str], None]) -> Thumbs:
    """Renders the thumbnails of `flagged` into out/thumbs and sets each page's thumb or note."""
    thumb_dir = out / THUMB_DIR
    thumb_dir.mkdir(exist_ok=True)
    # Resolved: a thumbnail is named after the file itself (_thumb_name), however it was reached.
    settings = run_info.get("settings")
    finder = SourceFinder(opts.run_dir, opts.source_roots, settings=settings if isinstance(settings, dict) else {},
                          resolve=True)
    tasks: list[ThumbTask] = []
    task_pages: dict[str, list[Page]] = {}
    result = Thumbs()
    for p in flagged:
        if p.page < 1:
            p.thumb_note = "no page image: the document could not be opened"
            continue
        if len(task_pages) >= opts.max_thumbs:
            result.skipped_cap += 1
            p.thumb_note = f"no thumbnail: the report renders at most {opts.max_thumbs} (--max-thumbs)"
            continue
        src = p.rec.source or docs[p.d].source
        path = finder.find(src, p.rec.doc_id)
        if path is None:
            p.thumb_note = f"no thumbnail: source not found ({src}); pass --source-root"
            continue
        try:
            name = _thumb_name(path, p.page, opts.thumb_size)
        except OSError as exc:
            p.thumb_note = f"no thumbnail: {exc}"
            continue
        dest = str(thumb_dir / name)
        if dest not in task_pages:
            tasks.append((str(path), p.page, opts.thumb_size, dest))
        task_pages.setdefault(dest, []).append(p)
    workers = opts.workers or min(4, available_cores())
    say(f"rendering {len(tasks)} thumbnails")
    tasks.sort(key=lambda t: (t[0], t[1]))
    for dest, ok, note, _w, _h in _render_thumbs(tasks, workers):
        for p in task_pages[dest]:
            if ok:
                p.thumb = f"{THUMB_DIR}/{Path(dest).name}"
            else:
                p.thumb_note = note
        if ok:
            result.made += 1
            result.used.add(Path(dest).name)
    if result.skipped_cap:
        notes.append(f"{result.skipped_cap} flagged pages have no thumbnail: over --max-thumbs {opts.max_thumbs}")
    unfound = finder.missing()
    if unfound:
        notes.append(f"{len(unfound)} source file(s) not found for thumbnails (e.g. {unfound[0]}); "
                     f"pass --source-root DIR")
    return result


def prune_thumbs(out: Path, used: set[str]) -> None:
    """Thumbnails no longer referenced (an earlier build) go; only our own file names are touched."""
    for f in (out / THUMB_DIR).iterdir():
        if _THUMB_FILE.fullmatch(f.name) and f.name not in used:
            f.unlink(missing_ok=True)


def _thumb_name(path: Path, page: int, size: int) -> str:
    st = path.stat()
    ident = f"{path}|{st.st_mtime_ns}|{st.st_size}|{page}|{size}"
    return hashlib.sha1(ident.encode("utf-8")).hexdigest()[:20] + ".jpg"


def render_thumb(task: ThumbTask) -> tuple[str, bool, str, int, int]:
    """Render one page to a JPEG (in a worker process). Returns (dest, ok, note, w, h)."""
    src, page, size, dest = task
    from PIL import Image

    from ..exceptions import BadInput
    from ..inputs.render import Sizing, render_page

    d = Path(dest)
    if d.is_file():
        try:
            with Image.open(d) as im:
                return dest, True, "", im.width, im.height
        except OSError:
            pass
    try:
        img = render_page(Path(src), page, Sizing(dpi=None, longest_side=size)).image
    except BadInput as exc:
        return dest, False, f"cannot render the page: {exc.reason}", 0, 0
    except Exception as exc:  # a thumbnail must never stop the report
        return dest, False, f"cannot render the page: {type(exc).__name__}: {exc}", 0, 0
    if img.mode not in ("RGB", "L"):
        img = img.convert("RGB")
    with atomic_file(d) as tmp:
        img.save(tmp, format="JPEG", quality=80, optimize=True)
    return dest, True, "", img.width, img.height


def _render_thumbs(tasks: list[ThumbTask], workers: int) -> list[tuple[str, bool, str, int, int]]:
    if not tasks:
        return []
    if workers <= 1 or len(tasks) < 8:
        return [render_thumb(t) for t in tasks]
    # Sorted by source so each worker mostly reuses the PDF it has open; spawn, not fork,
    # because pdfium is not fork-safe.
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(render_thumb, tasks, chunksize=max(1, min(16, len(tasks) // (workers * 4)))))

"""A page read from its PDF text layer, when the layer serves it: the `textlayer` engine always, `auto`
when the layer is usable (a born-digital page needs no OCR), with where its lines lie and the
scan's master image when the layer lies over one (an earlier OCR's)."""

from __future__ import annotations

import time
from pathlib import Path

from ..engines.base import PageInput
from ..engines.registry import cpu_engine
from ..inputs.render import DEFAULT_DPI, kind_of, pdf_master, text_layer, text_layer_lines, usable_text_layer
from ..positions.lines import text_layer_positions
from ..runfolder.flags import Flag
from ..runfolder.record import PageRecord, PageTask, Status
from .context import PageContext
from .judging import classify, judge_reading


def from_text_layer(task: PageTask, ctx: PageContext, mode: str, t0: float) -> tuple[PageRecord | None, str, list[str]]:
    """The page's record when its text layer serves it (always, for the textlayer engine;
    when usable, for auto); otherwise no record, the layer, and the flag saying why not."""
    layer = text_layer(Path(task.path), task.page)
    usable, why = usable_text_layer(layer)
    if mode != "textlayer" and not usable:
        # Only a PDF has a text layer that can be unusable: an image file has none to judge.
        return None, layer, [Flag.textlayer_unusable.of(why=why)] if kind_of(Path(task.path)) == "pdf" else []
    reading = cpu_engine("textlayer", ctx.engine_options()).read(PageInput(task.doc_id, task.page, None, layer))
    status, qflags = classify(reading.text, reading.finish_reason, blank_image=False)
    if mode == "textlayer" and status is Status.empty:
        qflags.append(Flag.no_text_layer.of())
    status, quality = judge_reading(status, reading, "textlayer", page_lang=task.language, ctx=ctx)
    positions = None
    if reading.text.strip():
        # Where its lines lie: PDFium's text rectangles, in pixels at the run's dpi.
        size, rotation, rects = text_layer_lines(Path(task.path), task.page)
        positions = text_layer_positions(size, rotation, rects, (task.sizing.dpi or DEFAULT_DPI) / 72.0,
                                         reading.text)
    # A scan whose text layer serves (an earlier OCR's): its coordinates go onto the scan's image too.
    master = pdf_master(Path(task.path), task.page) if positions is not None else None
    return task.record(
        status, text=reading.text, quality=quality, engine="textlayer", finish_reason=reading.finish_reason,
        seconds=round(time.perf_counter() - t0, 4), flags=qflags + ([Flag.textlayer.of()] if usable else []),
        positions=positions, master=master.to_json() if master is not None else None,
    ), layer, []

"""Issue 32, point 1: archive images read as blank pages came back `ok` and empty, exit 0 — 16-bit
grey (clipped to white), text in the alpha channel (black once alpha was dropped), negatives (the
blank test counted only marks darker than the ground). Every image is now normalised by what it
means (vlmocr/inputs/pixels.py) for every engine, and a page whose image is not uniform never ends `ok`
with empty text. A property test draws a few words into every Pillow mode and bit depth; a small
corpus is read by both CPU engines and by the VLM path against the stand-in server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.cli import run_cli
from support.components import need
from support.page_images import FONT, WORDS, as_mode, hostile_corpus, text_page
from vlmocr.evaluation import cer
from vlmocr.inputs.pixels import FLAG_ALPHA, FLAG_INVERTED, FLAG_SCALED, dark_on_light, engine_mode
from vlmocr.inputs.render import blank_and_ink, render_page
from vlmocr.reading.worker import read_page
from vlmocr.runfolder.record import PageTask, Sizing, Status
from vlmocr.testing.openai_server import ServerConfig, serve_in_process

MODES = ("1", "L", "LA", "P", "RGB", "RGBA", "CMYK", "I;16", "I", "F", "alpha-only")
TRUTH = "\n".join(WORDS)


def needs_font() -> None:
    need(FONT.exists(), "DejaVuSans.ttf", "fonts-dejavu-core")


def read_file(path: Path, engine: str = "tesseract"):
    task = PageTask(doc_id=path.stem, source=str(path), path=str(path), page=1, doc_pages=1, key="k",
                    engine=engine, reader=engine, sizing=Sizing())
    return read_page(task)


@pytest.mark.tesseract
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(mode=st.sampled_from(MODES), inverted=st.booleans(), fmt=st.sampled_from(("png", "tiff")),
       px=st.integers(min_value=30, max_value=56))
def test_every_mode_and_depth_is_read_or_named_never_ok_and_empty(tmp_path, mode, inverted, fmt, px):
    needs_font()
    img = as_mode(text_page(px=px), mode, inverted=inverted and mode != "alpha-only")
    path = tmp_path / f"page-{mode.replace(';', '')}-{int(inverted)}.{fmt}"
    try:
        img.save(path)
    except (OSError, ValueError, KeyError):  # a mode the format cannot hold: nothing to read
        return
    rec = read_file(path)
    empty = not (rec.text or "").strip()
    assert not (rec.status == Status.ok and empty), (mode, inverted, fmt, rec.flags)
    if rec.status != Status.bad_input:  # read: the words (its signal may still ask for review)
        assert cer(rec.text, TRUTH) < 0.1, (mode, inverted, fmt, rec.status, rec.text, rec.flags)


def test_normalisation_by_meaning():
    needs_font()
    page = text_page()
    out, flags = engine_mode(as_mode(page, "I;16"))
    assert flags == [FLAG_SCALED] and out.mode == "L" and out.getextrema() == (0, 255)
    out, flags = engine_mode(as_mode(page, "alpha-only"))
    assert flags == [FLAG_ALPHA] and out.convert("L").getextrema() == (0, 255)
    assert out.convert("L").getpixel((5, 5)) == 255  # the transparent paper is white
    out, flags = dark_on_light(as_mode(page, "L", inverted=True))
    assert flags == [FLAG_INVERTED] and out.getpixel((5, 5)) == 255
    # Not a negative: a light page, and a black page with nothing on it, stay as they are.
    assert dark_on_light(page)[1] == [] and dark_on_light(page.point(lambda v: 0))[1] == []
    # 8-bit values in a wide integer mode are kept as they are (no contrast stretch).
    out, flags = engine_mode(page.convert("I"))
    assert flags == [] and out.mode == "L" and out.tobytes() == page.convert("L").tobytes()


def test_a_negative_is_not_blank_even_before_it_is_turned():
    needs_font()
    negative = as_mode(text_page(), "L", inverted=True)
    assert blank_and_ink(negative)[0] is False  # light marks on a dark ground are marks
    assert blank_and_ink(negative.point(lambda v: 0))[0] is True


def test_a_changed_image_is_never_handed_over_as_the_file(tmp_path):
    needs_font()
    corpus = hostile_corpus(tmp_path / "in")
    for name in corpus:
        rendered = render_page(tmp_path / "in" / name, 1, Sizing())
        changed = {FLAG_SCALED, FLAG_ALPHA, FLAG_INVERTED} & set(rendered.flags)
        assert (rendered.same_as_file is None) or not changed, (name, rendered.flags)


@pytest.mark.tesseract
@pytest.mark.parametrize("engine", ["rapidocr", "tesseract"])
def test_the_archive_corpus_reads_with_every_cpu_engine(tmp_path, engine):
    needs_font()
    if engine == "tesseract":
        from support.tessdata import need_tesseract

        need_tesseract("eng")
    corpus = hostile_corpus(tmp_path / "in")
    res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "r"), "--engine", engine, "--lang", "eng",
                  "--workers", "1")
    assert res.returncode == 0, res.stderr
    recs = {json.loads(line)["doc_id"]: json.loads(line) for line in (tmp_path / "r" / "pages.jsonl").open()}
    assert set(recs) == {Path(n).stem for n in corpus}
    for doc, rec in recs.items():
        assert rec["status"] == "ok" and cer(rec["text"], TRUTH) < 0.1, (doc, rec["text"], rec["flags"])
    assert FLAG_SCALED in recs["grey16"]["flags"] and FLAG_ALPHA in recs["alpha"]["flags"]
    assert FLAG_INVERTED in recs["negative"]["flags"]


def test_the_archive_corpus_reads_through_the_vlm_path(tmp_path):
    """The stand-in server reads the image it is sent (RapidOCR): a white or black page would
    come back empty."""
    needs_font()
    hostile_corpus(tmp_path / "in")
    with serve_in_process(ServerConfig(answer="ocr")) as srv:
        res = run_cli("run", str(tmp_path / "in"), "--out", str(tmp_path / "r"), "--endpoint", srv.url,
                      "--engine", "openai", "--profile", "generic", "--workers", "1", "--no-retry",
                      env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""})
    assert res.returncode == 0, res.stderr
    for line in (tmp_path / "r" / "pages.jsonl").open():
        rec = json.loads(line)
        assert rec["status"] == "ok" and rec["engine"] == "openai", rec
        assert cer(rec["text"], TRUTH) < 0.1, (rec["doc_id"], rec["text"])

"""RapidOCR's recogniser run one line at a time (engines/rapidocr.py, SETTINGS' Rec.rec_batch_num):
RapidOCR's batches of six pad every line to the batch's widest, and on this CPU the model costs a
quarter more that way for the same text. Checked on the recogniser's real inputs and on a real
page's reading against its transcription; the choice is in the settings tag, so readings made in
batches are never taken for these."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from vlmocr.engines.base import PageInput
from vlmocr.engines.rapidocr import DEFAULTS, SETTINGS, RapidOcrEngine, settings_tag
from vlmocr.evaluation.score import cer

PAGE = Path(__file__).resolve().parents[1] / "data" / "gt" / "goethe" / "goethe_0014.png"  # Fraktur


def recogniser_batches(engine: RapidOcrEngine, image: Image.Image) -> tuple[str, list[int]]:
    """The page's text and the number of lines in each run of the recognition model."""
    page = PageInput("p", 1, image, None, None, [], None)
    engine.read(page)  # the recogniser is made on the first page
    rec = engine._ocr.text_rec
    real, sizes = rec.session, []

    class Counting:
        def __call__(self, x):
            sizes.append(int(x.shape[0]))
            return real(x)

        def __getattr__(self, name):
            return getattr(real, name)

    rec.session = Counting()
    try:
        return engine.read(page).text, sizes
    finally:
        rec.session = real


def test_lines_are_recognised_one_at_a_time_and_read_as_well():
    image = Image.open(PAGE)
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    text, sizes = recogniser_batches(RapidOcrEngine(), image)
    assert len(sizes) > 10 and set(sizes) == {1}, sizes  # every line its own run
    batched, sizes6 = recogniser_batches(RapidOcrEngine(settings={**SETTINGS, "Rec.rec_batch_num": 6}), image)
    assert max(sizes6) == 6 and len(sizes6) < len(sizes)
    assert cer(text, truth) <= cer(batched, truth) + 0.01, (cer(text, truth), cer(batched, truth))
    # In the tag: a reading made in batches of six is another reading.
    assert "rb1" in settings_tag() and "rb" not in settings_tag(DEFAULTS)
    assert settings_tag({**SETTINGS, "Rec.rec_batch_num": 6}) != settings_tag()

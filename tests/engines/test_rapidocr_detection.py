"""RapidOCR's detector sized per page (engines/rapidocr.py, detection_rule): a page larger than
1280 px on its long side is detected at 1280 and recognised from its own pixels; a small page, or
a long strip whose letters would get too small, keeps RapidOCR's own rule (enlarged to a short side
of 736). Checked on the detector's real input (rapidocr 3.x builds its pre-processing from the two
attributes each call) and on a real page's reading against its transcription."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from vlmocr.engines.base import PageInput
from vlmocr.engines.rapidocr import DEFAULTS, SETTINGS, RapidOcrEngine, detection_rule, settings_tag
from vlmocr.evaluation.score import cer

GT = Path(__file__).resolve().parents[1] / "data" / "gt"
PAGE = GT / "goethe" / "goethe_0014.png"  # 1156 × 1782, Fraktur


def test_the_rule():
    assert detection_rule(1654, 2339) == (1280, "max")  # an A4 scan at 200 dpi (2000 after max_side_len)
    assert detection_rule(900, 700) == (736, "min")  # small: enlarged, as RapidOCR does
    assert detection_rule(2000, 600) == (736, "min")  # a strip: 1280 would leave 384 px across
    assert detection_rule(1654, 2339, DEFAULTS) == (736, "min")  # RapidOCR's own rule, for comparison
    assert "det736min+1280page" in settings_tag() and "+1280page" not in settings_tag(DEFAULTS)


@pytest.fixture(scope="module")
def engines() -> tuple[RapidOcrEngine, RapidOcrEngine]:
    return RapidOcrEngine(), RapidOcrEngine(settings={**SETTINGS, "vlmocr.det_long_side": None})


def detector_inputs(engine: RapidOcrEngine, image: Image.Image) -> list[tuple[int, ...]]:
    engine.read(PageInput("p", 1, image, None, None, [], None))  # the detector made
    det = engine._ocr.text_det
    real, shapes = det.session, []

    def session(x):
        shapes.append(tuple(x.shape))
        return real(x)

    det.session = session
    try:
        reading = engine.read(PageInput("p", 1, image, None, None, [], None))
    finally:
        det.session = real
    assert reading.text.strip()
    return shapes


def test_a_large_page_is_detected_at_1280_a_small_one_enlarged(engines):
    new, _ = engines
    image = Image.open(PAGE)
    (shape,) = detector_inputs(new, image)
    assert max(shape[2:]) == 1280  # (1, 3, H, W), both multiples of 32
    small = image.resize((image.width * 600 // image.height, 600))
    (shape,) = detector_inputs(new, small)
    assert min(shape[2:]) == 736  # enlarged to RapidOCR's short side, as before


def test_the_page_reads_as_well_in_a_fraction_of_the_detection(engines):
    new, before = engines
    image = Image.open(PAGE)
    truth = PAGE.with_suffix(".txt").read_text(encoding="utf-8")
    page = PageInput("goethe_0014", 1, image, None, None, [], None)
    got, had = cer(new.read(page).text, truth), cer(before.read(page).text, truth)
    assert got <= had + 0.01, (got, had)
    (small,), (large,) = detector_inputs(new, image), detector_inputs(before, image)
    assert small[2] * small[3] < 0.6 * large[2] * large[3]  # the detector's work is in its pixels

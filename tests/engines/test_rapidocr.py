"""RapidOCR with the settings vlmocr reads with (engines/rapidocr.py, chosen on ../shared/gt):
the typewritten lines its defaults lose are read, and a reading names the settings it was made
with. The lines are a crop of a real page (tests/data/engines; README there)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from vlmocr.config import load_config
from vlmocr.engines.base import PageInput, Reading
from vlmocr.engines.rapidocr import DEFAULTS, SETTINGS, RapidOcrEngine, settings_tag
from vlmocr.rundir import dist_version

# Fifteen typewritten lines. RapidOCR's defaults turn some of them over (its angle classifier
# calls them upside down) and read them as `on  tt tt  t tne`, `n    t  n o not`.
LINES = Path(__file__).resolve().parents[1] / "data" / "engines" / "ehri_en_lines.jpg"
EXPECTED = ('on board the "Laortis". The Comittee of the',
            "grant that has been previously made, and we felt",
            "number of persons. I much regret that I do not")


def read(engine: RapidOcrEngine) -> Reading:
    with Image.open(LINES) as im:
        return engine.read(PageInput("ehri", 1, im.convert("RGB")))


def test_the_tuned_engine_reads_the_lines_the_defaults_lose():
    reading = read(RapidOcrEngine())
    for line in EXPECTED:
        assert line in reading.text.splitlines()
    assert len(reading.text.splitlines()) == 15
    # A reading names the settings it was made with: the angle classifier is off.
    assert reading.model == f"PP-OCR (rapidocr {settings_tag(SETTINGS)})" and "cls0" in reading.model
    assert reading.revision == dist_version("rapidocr") and reading.revision
    # The checks above can fail: RapidOCR's own settings lose lines of this very image. (If a
    # later RapidOCR reads them with its defaults too, this check goes; the ones above stay.)
    defaults = read(RapidOcrEngine(settings=DEFAULTS))
    assert not all(line in defaults.text for line in EXPECTED)
    assert settings_tag(DEFAULTS) in defaults.model and settings_tag(DEFAULTS) != settings_tag(SETTINGS)


def test_the_settings_key_names_rapidocrs_settings():
    """Resume re-reads a page RapidOCR read with other settings: they are in the settings key."""
    material = load_config({"engine": "rapidocr", "inputs": ["x.pdf"]}).key_material()
    assert material["rapidocr"] == settings_tag(SETTINGS)
    assert "rapidocr" not in load_config({"engine": "tesseract", "inputs": ["x.pdf"]}).key_material()

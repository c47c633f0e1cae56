"""RapidOCR with the settings vlmocr reads with (engines/rapidocr.py, chosen on ../shared/gt):
the typewritten lines its defaults lose are read, and a reading names the settings it was made
with. The lines are a crop of a real page (tests/data/engines; README there)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from vlmocr.engines.base import PageInput, Reading
from vlmocr.engines.rapidocr import DEFAULTS, SETTINGS, RapidOcrEngine, settings_tag
from vlmocr.reading.plan import RunPlan
from vlmocr.runfolder.rundir import dist_version
from vlmocr.settings.config import load_config

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


# Twelve typewritten French lines on a page scanned with a 1.5° slant, dense (RapidOCR's boxes,
# grown around their text, are taller than the line pitch). Grouped by the overlap of their
# upright extents, neighbouring lines were joined: "I1 vous fait asseoir … en vous frappant sur
# les articulations …", "en tombant … et J'avais eu, du reste …" (CER 27 % on the whole page).
SLANTED = Path(__file__).resolve().parents[1] / "data" / "engines" / "tapus_slanted_lines.jpg"
SLANTED_STARTS = ("rien, il vous", "I1 vous fait", "frappant sur", "partagés la-dessus", "d'autres qu'il",
                  "ences, dont", "J'avais eu", "assiettes qui", "pour en partir")


def test_lines_of_a_slanted_dense_page_stay_apart_and_in_order():
    with Image.open(SLANTED) as im:
        lines = RapidOcrEngine().read(PageInput("tapus", 1, im.convert("RGB"))).text.splitlines()
    starts = [next((i for i, line in enumerate(lines) if line.startswith(s)), None) for s in SLANTED_STARTS]
    assert None not in starts, (SLANTED_STARTS, lines)
    assert starts == sorted(starts), lines  # in reading order
    assert not any("asseoir" in line and "frappant" in line for line in lines), lines
    assert not any("repas" in line and "J'avais" in line for line in lines), lines
    assert len(lines) >= 12


def test_the_settings_key_names_rapidocrs_settings():
    """Resume re-reads a page RapidOCR read with other settings: they are in the settings key."""
    material = RunPlan(load_config({"engine": "rapidocr", "inputs": ["x.pdf"]})).key_material()
    assert material["rapidocr"] == settings_tag(SETTINGS)
    assert "rapidocr" not in RunPlan(load_config({"engine": "tesseract", "inputs": ["x.pdf"]})).key_material()


def test_a_reading_whose_lines_run_down_the_page_says_so():
    """Issue 33: RapidOCR turns a tall box before reading it, so a page on its side reads as real
    words in a scrambled order that its quality signal passes. Its reading says its lines ran
    down the page (the worker then asks OSD); a short word standing on end does not."""
    from vlmocr.engines.base import LINES_RUN_DOWN
    from vlmocr.engines.rapidocr import lines_run_down

    def box(x, y, w, h):
        return [[x, y], [x + w, y], [x + w, y + h], [x, y + h]]

    across = [box(10, 10 + 40 * i, 600, 30) for i in range(5)]
    down = [box(10 + 40 * i, 10, 30, 600) for i in range(5)]
    texts = ["a line of typewritten text"] * 5
    assert not lines_run_down(across, texts)
    assert lines_run_down(down, texts)
    assert not lines_run_down(across + [box(700, 10, 20, 200)], [*texts, "I"])  # a letter on end
    engine = object.__new__(RapidOcrEngine)
    engine.tag, engine.version = "test", None
    assert LINES_RUN_DOWN in engine.reading(down, texts, [0.9] * 5).flags
    assert LINES_RUN_DOWN not in engine.reading(across, texts, [0.9] * 5).flags


def test_boxes_in_three_columns_are_grouped_column_by_column():
    """A newspaper's three columns under a headline across them: each column top to bottom, left
    to right, the headline first (positions/order.py finds each gutter, the side it splits off is
    split again). Joined by height alone, every line read across the three columns."""
    from vlmocr.engines.rapidocr import _group_lines

    def quad(x0: int, y0: int, x1: int, y1: int) -> list[list[int]]:
        return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]

    boxes, texts = [quad(50, 20, 1150, 70)], ["HEADLINE OVER ALL THREE"]
    for row in range(12):
        y = 100 + 34 * row
        for col in range(3):
            x = 50 + col * 380
            boxes.append(quad(x, y, x + 340, y + 24))
            texts.append(f"column {col} line {row}")
    lines = _group_lines(boxes, texts, [0.99] * len(texts))
    read = [" ".join(m.text for m in line) for line in lines]
    assert read == ["HEADLINE OVER ALL THREE"] + [f"column {c} line {r}" for c in range(3) for r in range(12)]

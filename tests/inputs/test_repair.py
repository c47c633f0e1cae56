"""The measures and repairs of a degraded scan (inputs/repair.py) on real pages (tests/data/gt)
degraded as benchmarks/bench_degraded.py degrades them (vlmocr/testing/degraded.py): each measure
tells the degraded page from the clean one, and each repair takes out what was added while the
ink stays."""

from __future__ import annotations

import numpy as np
from PIL import Image

from support.components import GT
from vlmocr.inputs.repair import LAYERS_AT, SPECKLE_AT, despeckled_first, diagnose, repair
from vlmocr.testing.degraded import degrade

TYPESCRIPT = GT / "ehri_en" / "EHRI-DR-19390519-US_03.jpg"  # grey, 1940s typescript
FRAKTUR = GT / "goethe" / "goethe_0014.png"  # bitonal print


def _page(path) -> Image.Image:
    with Image.open(path) as im:
        return im.convert("L")


def test_a_clean_page_asks_for_no_repair():
    for path in (TYPESCRIPT, FRAKTUR):
        found = diagnose(_page(path))
        assert found.speckle < SPECKLE_AT and found.repairs() == [], (path.name, found)
    assert diagnose(_page(FRAKTUR)).layers is None  # black and white: no lighter layer to tell apart


def test_specks_are_measured_and_removed_the_strokes_kept():
    clean = _page(TYPESCRIPT)
    noisy = degrade(clean, "noise", TYPESCRIPT.stem)
    found = diagnose(noisy)
    assert found.speckle >= SPECKLE_AT and found.repairs()[0] == "despeckle", found
    fixed = repair(noisy, ["despeckle"])
    assert fixed.size == noisy.size and diagnose(fixed).speckle < SPECKLE_AT / 4
    assert despeckled_first(clean) is None and despeckled_first(noisy) is not None
    # The typewritten strokes survive a 3×3 median: the clean page's ink is still ink.
    ink = np.asarray(clean) < 100
    assert (np.asarray(fixed)[ink] < 160).mean() > 0.9


def test_the_verso_bleeding_through_is_measured_and_taken_out_the_ink_kept():
    versos = {TYPESCRIPT: GT / "ehri_da" / "EHRI-DR-19431002-DK_01.jpg", FRAKTUR: GT / "zonaras" / "zonaras_0036.png"}
    for path, verso in versos.items():
        clean = _page(path)
        bled = degrade(clean, "bleed", path.stem, verso=_page(verso))  # another page's strokes, mirrored
        found = diagnose(bled)
        assert found.layers is not None and found.layers >= LAYERS_AT and "layers" in found.repairs(), (path.name, found)
        fixed = np.asarray(repair(bled, ["layers"]))
        assert fixed.shape == np.asarray(bled).shape
        ink = np.asarray(clean) < 100
        verso_only = (np.asarray(bled) < 230) & (np.asarray(clean) > 230)  # the back's strokes on paper
        assert verso_only.mean() > 0.01
        assert (fixed[verso_only] > 200).mean() > 0.9, path.name  # gone to paper (or its faintest grey)
        assert (fixed[ink] < 128).mean() > 0.95, path.name  # the ink kept


def test_a_page_whose_lines_were_found_small_is_enlarged_and_nothing_else_is():
    page = _page(TYPESCRIPT)
    assert "enlarge" in diagnose(page, line_px=9).repairs()
    assert "enlarge" not in diagnose(page, line_px=45).repairs()
    # No lines found at all: the page's size decides.
    small = page.resize((page.width // 4, page.height // 4))
    assert "enlarge" in diagnose(small, None).repairs() and "enlarge" not in diagnose(page, None).repairs()
    assert repair(small, ["enlarge"]).size == (small.width * 2, small.height * 2)

"""Issue 29 point 1 with issue 33 point 4: boxes an engine found on the image it read (turned,
straightened) map back to the page as scanned. A dark box drawn on a page, the page turned or
straightened as the worker does, the box found again on the result and mapped back."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from vlmocr.inputs.skew import straighten
from vlmocr.positions.geometry import Step, box_back, to_page
from vlmocr.runfolder.record import Line, Positions

W, H = 600, 900
BOX = (100, 200, 160, 230)


def page() -> Image.Image:
    img = Image.new("L", (W, H), 255)
    img.paste(0, BOX)
    return img


def ink_box(img: Image.Image) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(np.asarray(img) < 128)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


@pytest.mark.parametrize("turn,how", [(90, Image.Transpose.ROTATE_90), (180, Image.Transpose.ROTATE_180),
                                      (270, Image.Transpose.ROTATE_270)])
def test_a_box_on_a_turned_page_maps_back_exactly(turn, how):
    turned = page().transpose(how)
    assert ink_box(turned) != BOX
    assert box_back(ink_box(turned), [Step("turn", turn, W, H)], W, H) == BOX


@pytest.mark.parametrize("skew", [-7.0, 3.5, 8.0])
def test_a_box_on_a_straightened_page_maps_back_onto_its_ink_on_the_scan(skew):
    # A scan askew: its word lies slanted. Straightened, the word stands upright and an engine's
    # box fits it; mapped back, the box holds the slanted word as it lies on the scan.
    scan = page().rotate(skew, resample=Image.Resampling.BICUBIC, fillcolor=255)
    straight = straighten(scan, skew)
    back = box_back(ink_box(straight), [Step("skew", skew, W, H)], W, H)
    assert all(abs(a - b) <= 3 for a, b in zip(back, ink_box(scan))), (back, ink_box(scan))


def test_turned_then_straightened_maps_back_through_both_last_first():
    turned = page().transpose(Image.Transpose.ROTATE_270)
    straight = straighten(turned, 4.0)
    steps = [Step("turn", 270, W, H), Step("skew", 4.0, *turned.size)]
    x0, y0, x1, y1 = box_back(ink_box(straight), steps, W, H)
    assert abs(x0 - BOX[0]) <= 6 and abs(y0 - BOX[1]) <= 6 and abs(x1 - BOX[2]) <= 6 and abs(y1 - BOX[3]) <= 6


def test_positions_take_the_page_size_and_nothing_changes_without_steps():
    turned = page().transpose(Image.Transpose.ROTATE_90)
    found = Positions(width=turned.width, height=turned.height, source="tesseract",
                      lines=[Line(box=ink_box(turned), words=[(*ink_box(turned), 0.9, "x")])])
    back = to_page(found, [Step("turn", 90, W, H)], W, H)
    assert (back.width, back.height) == (W, H) and back.lines[0].words[0] == (*BOX, 0.9, "x")
    assert to_page(found, [], W, H) is found

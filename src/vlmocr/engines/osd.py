"""The script of a scanned page, from Tesseract's orientation and script detection (`--psm 0`).

A page image says nothing cheap about its script: OSD is the one detector at hand, and it
costs a tesseract process (~0.4 s to load its model, 1–2.5 s for a full page on one core:
BENCHMARKS.md, "Triage: the script of scans"). `vlmocr triage --osd N` pays it for N pages a
document; without it, a scan's script is honestly unknown.

OSD names a script for every page, sure or not. Measured on the 100 development pages, its
answer is right whenever its confidence is high enough for that script: Fraktur pages score
15–45 while the typewritten Czech pages it took for Fraktur scored 2.5 and 7.5; Greek pages
score 0.25–5.4 while the typewritten German and French pages it took for Greek (or Cyrillic)
scored below 2. So a page votes for a script other than Latin only at `MIN_CONFIDENCE`; below
it, the page abstains. Latin answers were right at any confidence.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import tesseract
from .plugins import plugin_names, wrap_engine

# OSD's script names → ISO 15924.
ISO15924 = {"Latin": "Latn", "Fraktur": "Latf", "Greek": "Grek", "Cyrillic": "Cyrl", "Arabic": "Arab",
            "Hebrew": "Hebr", "Han": "Hani", "Japanese": "Jpan", "Korean": "Kore", "Hangul": "Hang",
            "Devanagari": "Deva", "Thai": "Thai", "Georgian": "Geor", "Armenian": "Armn", "Bengali": "Beng",
            "Tamil": "Taml", "Ethiopic": "Ethi"}
# The confidence at which a page's answer counts (see the module doc); other scripts: "default".
MIN_CONFIDENCE = {"Latn": 0.0, "Latf": 10.0, "default": 2.0}
# Larger page images are scaled down to this first (a 600 dpi scan costs OSD seconds more and
# says nothing more). Smaller is not better: zonaras_0054 at 1600 px scored 1.3, at 2400 px 3.5.
OSD_LONGEST_SIDE = 2400

_FIELD = re.compile(r"^(Script|Script confidence|Rotate|Orientation confidence):\s*(.+)$", re.MULTILINE)
# An orientation OSD is this sure of turns a page. On the typewritten pages of
# tests/data/gt turned by 90/180/270 it answered right at 4.5–9.4; pages with little text score
# below 2 and are left as they are.
MIN_ORIENTATION_CONFIDENCE = 2.0


@dataclass(frozen=True)
class PageScript:
    script: str  # ISO 15924 ("" when OSD gave no answer)
    confidence: float
    seconds: float
    # The page's orientation: degrees to turn it *counter-clockwise* to make it upright (PIL's
    # Transpose.ROTATE_N; Tesseract's "Rotate: N" is clockwise), and OSD's confidence in it.
    turn: int = 0
    turn_confidence: float = 0.0

    @property
    def sure(self) -> bool:
        """Sure enough of its orientation (upright included) to act on it."""
        return self.turn in (0, 90, 180, 270) and self.turn_confidence >= MIN_ORIENTATION_CONFIDENCE

    @property
    def turns(self) -> bool:
        """Sure enough of a non-upright orientation to turn the page."""
        return self.sure and self.turn != 0

    @property
    def counts(self) -> bool:
        """Sure enough to vote (MIN_CONFIDENCE)."""
        if not self.script:
            return False
        return self.confidence >= MIN_CONFIDENCE.get(self.script, MIN_CONFIDENCE["default"])


# The cheap look before OSD, for the pages a VLM is about to read of a document that
# already had a page turned (VlmHints.look_before; an upright collection is never looked at):
# lines of text run across the page, so the ink of a page
# upright changes sharply from row to row (line, gap, line) and smoothly from column to column,
# and it has empty rows between its lines where its columns have few; on its side, the other way
# round. `looks_sideways` weighs both (log of the roughness ratio + GAP_WEIGHT × the empty-row
# excess) and asks OSD below SIDEWAYS_BELOW. Chosen on the 100 development pages rendered at
# 200 dpi, upright and turned by 90 and 270 degrees (benchmarks/bench_orientation.py,
# BENCHMARKS.md): 7 of 100 upright pages ask OSD for nothing, 11 of 200 turned pages are not
# seen (sent as they lie; an answer that then fails its signal is checked by OSD all the same),
# no synthetic test page is taken for turned. ~1.5 ms a page against OSD's 0.3–2.5 s.
GAP_WEIGHT = 5.0
SIDEWAYS_BELOW = 0.06
SIDEWAYS_LOOK_SIDE = 600  # the page is looked at this small (box-reduced: cheap)


def ink_profiles(image: Any) -> tuple[float, float]:
    """(rows' roughness / columns' roughness, share of empty rows − share of empty columns) of
    the ink of a page image, inside the ink's extent. Text lines across the page: the first
    well above 1, the second above 0."""
    import numpy as np

    g = image if image.mode == "L" else image.convert("L")
    factor = max(1, max(g.size) // SIDEWAYS_LOOK_SIDE)
    if factor > 1:
        g = g.reduce(factor)
    a = np.asarray(g, dtype=np.float32)
    ink = a < min(160.0, float(a.mean()) - float(a.std()))
    rows, cols = ink.mean(axis=1), ink.mean(axis=0)

    def rough(p: Any) -> float:
        m = float(p.mean())
        return float(np.abs(np.diff(p)).mean()) / m if m > 0 else 0.0

    def empty(p: Any) -> float:
        where = np.nonzero(p > 0)[0]
        if len(where) < 2:
            return 0.0
        inside = p[where[0]:where[-1] + 1]
        return float((inside < 0.15 * inside.mean()).mean())

    across = rough(cols)
    return (rough(rows) / across if across > 0 else float("inf")), empty(rows) - empty(cols)


def looks_sideways(image: Any) -> bool:
    """Whether a page image may lie on its side: worth asking OSD (which decides)."""
    ratio, gaps = ink_profiles(image)
    return math.log(max(ratio, 1e-6)) + GAP_WEIGHT * gaps < SIDEWAYS_BELOW


def parse_osd(output: str) -> tuple[str, float]:
    """(ISO 15924 script, confidence) from `tesseract --psm 0` output; ("", 0) without one."""
    fields = dict(_FIELD.findall(output))
    name = fields.get("Script", "").strip()
    try:
        confidence = float(fields.get("Script confidence", "0"))
    except ValueError:
        confidence = 0.0
    return (ISO15924.get(name, name) if name else ""), confidence


def parse_orientation(output: str) -> tuple[int, float]:
    """(degrees counter-clockwise that make the page upright, confidence) from `tesseract --psm 0`."""
    fields = dict(_FIELD.findall(output))
    try:
        clockwise = int(fields.get("Rotate", "0").strip()) % 360
        confidence = float(fields.get("Orientation confidence", "0"))
    except ValueError:
        return 0, 0.0
    return (360 - clockwise) % 360, confidence


def osd_image(image: Any) -> PageScript:
    """OSD of one page image (PIL). Never raises: a page OSD cannot judge (too little text, no
    osd data) answers no script. Asked through the engine plugins (engines/plugins.py) as a CPU
    engine's reading is, so a plugin that caches readings answers a page it has seen."""
    # What its answer depends on beyond the pixels, for a plugin's key (no plugin: not asked).
    options = {"psm": 0, "longest_side": OSD_LONGEST_SIDE, **(_tesseract_version() if plugin_names() else {})}
    reader = wrap_engine(OSD_ENGINE, options, _Osd)
    return reader.read(SimpleNamespace(image=image, text_layer=None, dpi=None, flags=()))


OSD_ENGINE = "tesseract-osd"  # the name OSD is asked under by the engine plugins


@lru_cache(maxsize=1)
def _tesseract_version() -> dict[str, str]:
    return {k: str(v) for k, v in tesseract.ENGINE.versions().items()}


class _Osd:
    def read(self, page: Any) -> PageScript:
        return _osd(page.image)


def _osd(image: Any) -> PageScript:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vlmocr-osd-") as tmp:
        path = Path(tmp) / "page.png"
        img = image if image.mode in ("L", "1") else image.convert("L")
        if max(img.size) > OSD_LONGEST_SIDE:
            img = img.copy()
            img.thumbnail((OSD_LONGEST_SIDE, OSD_LONGEST_SIDE))
        img.save(path, format="PNG", compress_level=1)
        try:
            out = subprocess.run(["tesseract", str(path), "-", "--psm", "0"], capture_output=True, text=True,
                                 timeout=120, check=False, env={**os.environ, "OMP_THREAD_LIMIT": "1"})
            script, confidence = parse_osd(out.stdout + "\n" + out.stderr)
            turn, turn_confidence = parse_orientation(out.stdout + "\n" + out.stderr)
        except (OSError, subprocess.SubprocessError):
            script, confidence, turn, turn_confidence = "", 0.0, 0, 0.0
    return PageScript(script, confidence, round(time.perf_counter() - t0, 3), turn, turn_confidence)


def document_script(pages: list[PageScript]) -> tuple[str, str]:
    """(script, how it was found) of a document from its pages' OSD: the script most pages voted
    for (a tie goes to the larger summed confidence); "" when no page was sure."""
    votes = [p for p in pages if p.counts]
    if not votes:
        return "", f"unknown (scan; OSD unsure on {len(pages)} page{'s' if len(pages) != 1 else ''})"
    count = Counter(p.script for p in votes)
    weight: dict[str, float] = {}
    for p in votes:
        weight[p.script] = weight.get(p.script, 0.0) + p.confidence
    best = max(count, key=lambda s: (count[s], weight[s]))
    return best, f"osd {count[best]}/{len(pages)} pages"

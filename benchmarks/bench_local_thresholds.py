#!/usr/bin/env python3
"""Local thresholds for Tesseract (reading/worker.py): every page of ../shared/gt (`VLMOCR_GT`
overrides) with its image, read by Tesseract in the page's language as `vlmocr run` reads it;
where the reading fails its signal, read again binarised by Sauvola (Tesseract's
`thresholding_method=2`) and the better by the signal kept, as the worker does. Prints, for the
pages that failed, CER of the first reading, of Sauvola's, and of the one kept, and RESULT lines:
the mean CER over every page read with and without the second reading, and how often the signal
kept a reading that was worse.

    python benchmarks/bench_local_thresholds.py             # every page (~10 min, 2 processes)
    python benchmarks/bench_local_thresholds.py --sets ehri_cs,tapus
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gt_reading import GT, over_pages_with_images, tess_lang, truth  # noqa: E402


def one_page(row: dict[str, str]) -> dict:
    """Tesseract's reading of the page, and when it fails its signal, Sauvola's: both judged, the
    kept one chosen by the worker's own rule (reading/worker.py)."""
    from vlmocr.engines.base import PageInput
    from vlmocr.evaluation.score import cer
    from vlmocr.inputs.render import blank_and_ink, grey_if_neutral, render_page
    from vlmocr.reading import judging, worker
    from vlmocr.runfolder.record import Sizing

    lang = tess_lang(row["language"], row["script"])
    rendered = render_page(GT / row["image"], 1, Sizing())
    img = grey_if_neutral(rendered.image)
    blank, ink = blank_and_ink(img)
    page = PageInput(row["name"], 1, img, "", rendered.dpi, [], None)
    first = worker.read_judged("tesseract", page, blank, ink, lang, lang, False)
    out = {"name": row["name"], "set": row["set"], "first": cer(first.reading.text, truth(row)),
           "failed": first.status in judging.TURN_WHEN, "bilevel": judging.bilevel(img)}
    out["kept"] = out["first"]
    if judging.wants_local_thresholds(first, img, blank):
        second = worker.read_judged("tesseract", page, blank, ink, lang, lang, False, local_thresholds=True)
        out["sauvola"] = cer(second.reading.text, truth(row))
        out["sauvola_status"] = second.status.value
        if judging.keeps_second(first, second):
            out["kept"] = out["sauvola"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="", help="only these sets of pages.csv (comma-separated)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    pages = over_pages_with_images(one_page, args.workers, args.sets.split(",") if args.sets else None)
    print(f"{len(pages)} pages of {GT}; Tesseract's reading failed its signal on "
          f"{sum(p['failed'] for p in pages)} ({sum(p['failed'] and p['bilevel'] for p in pages)} of them "
          "black and white already: not read again)\n")
    print("| page | CER first (Otsu) | CER Sauvola | kept | CER kept |")
    print("|---|---:|---:|---|---:|")
    for p in pages:
        if "sauvola" in p:
            kept = "Sauvola" if p["kept"] == p["sauvola"] and p["kept"] != p["first"] else "first"
            print(f"| {p['name'][:40]} | {p['first']:.1%} | {p['sauvola']:.1%} | {kept} | {p['kept']:.1%} |")
    before = statistics.mean(p["first"] for p in pages)
    after = statistics.mean(p["kept"] for p in pages)
    tried = [p for p in pages if "sauvola" in p]
    worse = sum(1 for p in tried if p["kept"] > p["first"] + 0.005)
    missed = sum(1 for p in tried if p["kept"] == p["first"] and p["sauvola"] < p["first"] - 0.005)
    print(f"\nRESULT local thresholds: CER macro {before:.2%} → {after:.2%} over {len(pages)} pages "
          f"({len(tried)} read again, {sum(p['kept'] != p['first'] for p in tried)} kept)")
    print(f"RESULT local thresholds: kept a worse reading on {worse}, left a better one on {missed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

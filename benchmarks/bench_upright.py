#!/usr/bin/env python3
"""OSD's second opinion (issue 33): Tesseract's OSD on every page of ../shared/gt (`VLMOCR_GT`
overrides) rendered as `vlmocr run` renders it, upright and turned by 90, 180 and 270 degrees;
how often OSD is sure, how often it is right when sure, and how often `turn_to_upright` is right
once RapidOCR's line classifier has checked which way up, and how often the classifier alone turns
the pages OSD is unsure of (`lines_turn`, as `turn_to_upright` does; engines/upright.py). Also the
classifier's cost beside OSD's on the same pages (same process: the ratio is what counts).

    python benchmarks/bench_upright.py               # every page with its image (~7 min, 2 cores)
    python benchmarks/bench_upright.py --quick       # the pages VLMOCR_GT has images for, smoke

Prints a table by kind of page and RESULT lines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

os.environ["OMP_THREAD_LIMIT"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gt_reading import GT, over_pages_with_images  # noqa: E402

TURNS = (0, 90, 180, 270)


def one_page(row: dict[str, str]) -> list[dict]:
    """OSD and the classifier on one page in its four turns."""
    from PIL import Image

    from vlmocr.engines.osd import MIN_ORIENTATION_CONFIDENCE, looks_sideways, osd_image
    from vlmocr.engines.upright import lines_turn, second_opinion
    from vlmocr.inputs.render import grey_if_neutral, render_page
    from vlmocr.runfolder.record import Sizing

    upright = grey_if_neutral(render_page(GT / row["image"], 1, Sizing()).image)
    out = []
    for deg in TURNS:
        img = upright.transpose(getattr(Image.Transpose, f"ROTATE_{deg}")) if deg else upright
        t0 = time.perf_counter()
        osd = osd_image(img)
        t1 = time.perf_counter()
        sure = osd.turn_confidence >= MIN_ORIENTATION_CONFIDENCE
        turn = second_opinion(img, osd.turn)[0] if sure else 0
        t2 = time.perf_counter()
        # OSD unsure: the line classifier alone, from both views, as turn_to_upright asks it.
        side = looks_sideways(img)
        if not sure:
            turn = lines_turn(img, side)[0]
        out.append({"kind": row["kind"], "name": row["name"], "need": (360 - deg) % 360, "osd": osd.turn,
                    "sure": sure, "turn": turn, "osd_s": t1 - t0, "cls_s": t2 - t1 if sure else None,
                    "side": side})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one process (with VLMOCR_GT=tests/data/gt: its six pages with an image)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    per_page = over_pages_with_images(one_page, 1 if args.quick else args.workers)
    cases = [c for page in per_page for c in page]

    by_kind: dict[str, Counter] = defaultdict(Counter)
    for c in cases:
        k = by_kind[c["kind"]]
        k["cases"] += 1
        if c["sure"]:
            k["sure"] += 1
            k["osd right"] += c["osd"] == c["need"]
            k["checked right"] += c["turn"] == c["need"]
            k["checked wrong"] += c["turn"] != c["need"]
        else:
            k["lines right"] += c["turn"] == c["need"] and c["turn"] != 0
            k["lines wrong"] += c["turn"] != c["need"] and c["turn"] != 0
            k["lines left"] += c["turn"] == 0 and c["need"] != 0
        k["upright turned"] += c["need"] == 0 and c["turn"] != 0
        k["upright turned by osd"] += c["need"] == 0 and c["sure"] and c["osd"] != 0
    total: Counter = sum(by_kind.values(), Counter())
    print(f"{len(per_page)} pages × 4 turns\n")
    print("| pages | cases | OSD sure | OSD right when sure | checked: right | checked: wrong | upright turned over: OSD alone → checked |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for kind, k in [*sorted(by_kind.items()), ("all", total)]:
        print(f"| {kind} | {k['cases']} | {k['sure']} | {k['osd right']} | {k['checked right']} | "
              f"{k['checked wrong']} | {k['upright turned by osd']} → {k['upright turned']} |")
    print("\nOSD unsure: the line classifier alone (lines_turn)\n")
    print("| pages | OSD unsure | turned: right | turned: wrong | left as they lie (turned) | upright ones left |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, k in [*sorted(by_kind.items()), ("all", total)]:
        unsure = k["cases"] - k["sure"]
        kept = sum(1 for c in cases if not c["sure"] and c["need"] == 0 and c["turn"] == 0
                   and (kind == "all" or c["kind"] == kind))
        print(f"| {kind} | {unsure} | {k['lines right']} | {k['lines wrong']} | {k['lines left']} | {kept} |")
    print(f"RESULT upright unsure: {total['cases'] - total['sure']} cases, turned right {total['lines right']}, "
          f"wrong {total['lines wrong']}, left turned {total['lines left']}")
    osd_s = [c["osd_s"] for c in cases]
    cls_s = [c["cls_s"] for c in cases if c["cls_s"] is not None]
    ratio = statistics.median(cls_s) / statistics.median(osd_s) if cls_s else float("nan")
    print(f"\nRESULT upright: OSD sure on {total['sure']}/{total['cases']}, right {total['osd right']}, "
          f"checked right {total['checked right']}, wrong {total['checked wrong']}")
    print(f"RESULT upright turned over: OSD alone {total['upright turned by osd']}, checked {total['upright turned']}")
    print(f"RESULT upright cost: classifier ÷ OSD {ratio:.3f} (median {1000 * statistics.median(cls_s) if cls_s else 0:.0f} ms "
          f"÷ {1000 * statistics.median(osd_s):.0f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

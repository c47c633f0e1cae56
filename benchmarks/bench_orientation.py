#!/usr/bin/env python3
"""How a page lies, cheaply (issue 33): `vlmocr.engines.osd.looks_sideways` on every page of
../shared/gt (`VLMOCR_GT` overrides) rendered as `vlmocr run` renders it at its default dpi,
upright and turned by 90 and 270 degrees: how many upright pages it would send to OSD for
nothing, how many turned pages it would not see, and its cost beside OSD's on the same pages
(side by side, same process: the ratio is what counts on a noisy machine).

The look runs only for the pages of a document that already had a page turned (the VLM path,
PageTask.look_before): there, a page it does not see is sent as it lies and, its answer failing
its signal, turned by OSD and asked again; a page it sends to OSD for nothing costs OSD's time.

    python benchmarks/bench_orientation.py              # every page; OSD timed on --osd pages
    python benchmarks/bench_orientation.py --osd 0      # the look only (~1 s)
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from pathlib import Path

os.environ["OMP_THREAD_LIMIT"] = "1"

from PIL import Image

from vlmocr.engines.osd import GAP_WEIGHT, SIDEWAYS_BELOW, looks_sideways, osd_image
from vlmocr.inputs.render import render_page
from vlmocr.runfolder.record import Sizing

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
TURNS = {"upright": None, "90": Image.Transpose.ROTATE_90, "270": Image.Transpose.ROTATE_270}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--osd", type=int, default=10, help="pages OSD is timed on beside the look (0: none)")
    args = ap.parse_args()
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    flagged: dict[str, list[str]] = {name: [] for name in TURNS}
    look_s: list[float] = []
    osd_s: list[float] = []
    for i, row in enumerate(rows):
        img = render_page(GT / row["image"], 1, Sizing()).image
        for name, how in TURNS.items():
            page = img.transpose(how) if how is not None else img
            t0 = time.perf_counter()
            sideways = looks_sideways(page)
            look_s.append(time.perf_counter() - t0)
            if sideways:
                flagged[name].append(row["name"])
        if i < args.osd:
            osd_s.append(osd_image(img).seconds)
    n = len(rows)
    print(f"# {n} pages of {GT}; rule: log(rows/cols roughness) + {GAP_WEIGHT} × empty-row excess "
          f"< {SIDEWAYS_BELOW}")
    print("| pages | looked sideways | meaning |")
    print("|---|---:|---|")
    print(f"| upright | {len(flagged['upright'])} of {n} | sent to OSD for nothing: {', '.join(flagged['upright'])} |")
    missed = 2 * n - len(flagged["90"]) - len(flagged["270"])
    print(f"| turned 90 / 270 | {len(flagged['90'])} / {len(flagged['270'])} of {n} | {missed} not seen: sent as they "
          "lie, turned after their answer fails |")
    look = statistics.median(look_s)
    print(f"look: median {look * 1000:.2f} ms a page")
    if osd_s:
        osd = statistics.median(osd_s)
        print(f"RESULT look ÷ OSD on the same pages: {look / osd:.4f} ({look * 1000:.2f} ms ÷ {osd:.2f} s, "
              f"{len(osd_s)} pages)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

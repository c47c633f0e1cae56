#!/usr/bin/env python3
"""Can triage tell a scan's script? Tesseract's OSD (`vlmocr.engines.osd`) on every page of
../shared/gt (`VLMOCR_GT` overrides), rendered as `vlmocr run` renders it: per set, the script
OSD names, how often it is right, how often the page abstains under `MIN_CONFIDENCE`, and the
seconds a page costs (one tesseract process, OMP_THREAD_LIMIT=1). Then per set taken as one
document, the script `vlmocr triage --osd N` would report from N pages spread over it.

    python benchmarks/bench_osd.py                 # every page (~2 s each on one core)
    python benchmarks/bench_osd.py --limit 3       # three pages a set

Each page's answer is cached in benchmarks/data/osd_pages.json under `osd#DIGEST/PAGE`, DIGEST
being what made it (Tesseract's version and data, vlmocr's engines/ and inputs/ code:
gt_reading.made_by): an answer made otherwise is asked again, and the RESULT says how many came
from the cache.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

os.environ["OMP_THREAD_LIMIT"] = "1"

import gt_reading as gt

from vlmocr.engines.osd import PageScript, document_script, osd_image
from vlmocr.inputs.render import render_page
from vlmocr.runfolder.record import Sizing

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
CACHE = REPO / "benchmarks" / "data" / "osd_pages.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="Pages per set (0: all).")
    ap.add_argument("--pages", type=int, default=3, help="N of the per-set `--osd N` vote.")
    ap.add_argument("--cached", action="store_true", help="Only report what the cache holds.")
    args = ap.parse_args()
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_set: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if not args.limit or len(by_set[r["set"]]) < args.limit:
            by_set[r["set"]].append(r)
    stored = json.loads(CACHE.read_text(encoding="utf-8")) if CACHE.exists() else {}
    made = f"osd#{gt.made_by('tesseract')}"
    for set_rows in by_set.values():
        for r in set_rows:
            if f"{made}/{r['name']}" in stored:
                gt.note_cached(made, r["name"])
                continue
            if args.cached:
                continue
            res = osd_image(render_page(GT / r["image"], 1, Sizing()).image)
            stored[f"{made}/{r['name']}"] = {"script": res.script, "confidence": res.confidence, "seconds": res.seconds}
            gt.note_read(made, r["name"])
            CACHE.write_text(json.dumps(stored, sort_keys=True, indent=0), encoding="utf-8")
            print(f"{r['name']}: {res.script} {res.confidence} ({res.seconds} s)", file=sys.stderr, flush=True)
    print("| set | truth | pages | OSD said | right | wrong | abstained | s/page (median) "
          f"| `--osd {args.pages}` over the set |")
    print("|---|---|---:|---|---:|---:|---:|---:|---|")
    cache = {k.split("/", 1)[1]: v for k, v in stored.items() if k.startswith(f"{made}/")}
    totals = Counter()
    seconds = []
    for name, set_rows in by_set.items():
        pages = [(r, PageScript(**cache[r["name"]])) for r in set_rows if r["name"] in cache]
        if not pages:
            continue
        truth = set_rows[0]["script"]
        said = Counter(p.script for _, p in pages)
        right = sum(p.counts and p.script == truth for _, p in pages)
        wrong = sum(p.counts and p.script != truth for _, p in pages)
        abstained = sum(not p.counts for _, p in pages)
        k = min(args.pages, len(pages))
        chosen = [pages[int((i + 0.5) * len(pages) / k)][1] for i in range(k)]
        script, how = document_script(chosen)
        seconds += [p.seconds for _, p in pages]
        totals.update(pages=len(pages), right=right, wrong=wrong, abstained=abstained,
                      docs=1, docs_right=script == truth)
        named = ", ".join(f"{s or '—'} {n}" for s, n in said.most_common())
        print(f"| {name} | {truth} | {len(pages)} | {named} "
              f"| {right} | {wrong} | {abstained} | {statistics.median(p.seconds for _, p in pages):.2f} "
              f"| {script or '—'} ({how}) |")
    print(f"\nRESULT pages: {totals['right']} right, {totals['wrong']} wrong, {totals['abstained']} abstained "
          f"of {totals['pages']}; sets right with --osd {args.pages}: {totals['docs_right']}/{totals['docs']}; "
          f"median {statistics.median(seconds):.2f} s, mean {statistics.mean(seconds):.2f} s a page {gt.tally()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

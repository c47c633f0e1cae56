#!/usr/bin/env python3
"""RapidOCR's settings side by side on a subset of ../shared/gt: which of them stop it losing lines?

Every configuration (RapidOCR parameter names over its defaults, `vlmocr.engines.rapidocr.DEFAULTS`)
reads the same pages, rendered as `vlmocr run` renders them, in this one process (one core).
Readings are cached with the other ground-truth readings (benchmarks/gt_reading.py) under the
configuration's settings tag, so a configuration already measured costs nothing the second time
and the chosen one's readings serve bench_engines.py.

For each configuration: CER (total edits / total truth characters, `vlmocr.evaluation.score`)
per set and overall, its change against the defaults, and seconds per page: wall time, and the
CPU time (what a free core would take; the machine this runs on is usually shared).

    python benchmarks/tune_rapidocr.py                          # 2 pages of each Latin-script set
    python benchmarks/tune_rapidocr.py --per-set 3 --configs defaults,tuned
    python benchmarks/tune_rapidocr.py --cached                 # report on what is cached (the pages
                                                                # every configuration has read)
    python benchmarks/tune_rapidocr.py --cached --configs defaults,tuned --sets tapus,goethe --per-set 99
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from typing import Any

import gt_reading as gt

from vlmocr.engines.rapidocr import DEFAULTS, SETTINGS
from vlmocr.evaluation.score import char_errors

NOCLS = {"Global.use_cls": False}
# name → settings over DEFAULTS. Each one changes one thing against the one before it or the
# defaults, so the table says what each change buys.
CONFIGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "nocls": NOCLS,
    "nocls+score0.3": {**NOCLS, "Global.text_score": 0.3},
    "nocls+box0.4+unclip2.0": {**NOCLS, "Det.box_thresh": 0.4, "Det.unclip_ratio": 2.0},
    "nocls+unclip2.0": {**NOCLS, "Det.unclip_ratio": 2.0},
    "nocls+thresh0.2": {**NOCLS, "Det.thresh": 0.2},
    "nocls+side2400": {**NOCLS, "Global.max_side_len": 2400},
    # Detection at a smaller size than the page (recognition still reads the page's own pixels):
    # DBNet's run is most of a page's time (benchmarks/profile_page.py). "page-size detection" is
    # RapidOCR's own rule, as vlmocr read before detection_rule; the others shrink every page.
    "page-size detection": {**SETTINGS, "vlmocr.det_long_side": None},
    "nocls+det1600max": {**NOCLS, "Det.limit_side_len": 1600, "Det.limit_type": "max"},
    "nocls+det1280max": {**NOCLS, "Det.limit_side_len": 1280, "Det.limit_type": "max"},
    "nocls+det960max": {**NOCLS, "Det.limit_side_len": 960, "Det.limit_type": "max"},
    # RapidOCR's batches of six lines, as vlmocr recognised before it took one line a run.
    "tuned+rec6": {**SETTINGS, "Rec.rec_batch_num": 6},
    "tuned": SETTINGS,
}
# Zonaras is polytonic Greek: no RapidOCR model that ships reads it, so no setting helps.
SETS = ("tapus", "ehri_en", "ehri_de", "ehri_cs", "ehri_da", "grenzboten", "goethe")


def measure(rows: list[dict[str, str]], cache: dict, key: str) -> dict[str, Any] | None:
    """Edits, truth characters and seconds per set (and `all`) for one configuration; None
    when a page is not cached."""
    by: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0, 0.0, 0])
    for row in rows:
        entry = gt.cached(cache, key, row["name"])
        if entry is None:
            return None
        edits, n = char_errors(entry["text"], gt.truth(row))
        for name in (row["set"], "all"):
            acc = by[name]
            acc[0] += edits
            acc[1] += n
            acc[2] += entry["seconds"]
            acc[3] += 1
            if entry.get("cpu_seconds") is not None:
                acc[4] += entry["cpu_seconds"]
                acc[5] += 1
    return by


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)}")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--per-set", type=int, default=2, help="the first N pages of each set")
    ap.add_argument("--cached", action="store_true", help="read nothing: report on the cached readings only")
    args = ap.parse_args(argv)
    names = [c for c in args.configs.split(",") if c]
    unknown = [c for c in names if c not in CONFIGS]
    if unknown:
        print(f"--configs: unknown configuration {', '.join(unknown)} (known: {', '.join(CONFIGS)})", file=sys.stderr)
        return 3
    rows = gt.gt_pages(sets=[s for s in args.sets.split(",") if s], per_set=args.per_set)
    engines: dict[tuple[str, str], Any] = {}
    keys = {name: gt.engine_key("rapidocr", {**DEFAULTS, **CONFIGS[name]}) for name in names}
    for name in names if not args.cached else ():
        gt.read_missing(rows, "rapidocr", settings={**DEFAULTS, **CONFIGS[name]}, engines=engines)
    cache = gt.load_cache()
    if args.cached:
        # Compare on the pages every configuration has read (one with none is left out).
        present = [n for n in names if any(gt.cached(cache, keys[n], r["name"]) for r in rows)]
        rows = [r for r in rows if all(gt.cached(cache, keys[n], r["name"]) for n in present)]
    results = {name: (keys[name], measure(rows, cache, keys[name])) for name in names}
    sets = list(dict.fromkeys(r["set"] for r in rows)) + ["all"]
    base = results.get("defaults", (None, None))[1]
    print(f"\n{len(rows)} pages (at most {args.per_set} per set); CER = edits / truth characters\n")
    print("| configuration | settings tag | " + " | ".join(sets) + " | Δ all vs defaults | s/page | CPU s/page |")
    print("|---|---|" + "---:|" * (len(sets) + 3))
    for name, (key, by) in results.items():
        if by is None:
            print(f"| {name} | {key} | (not cached) |")
            continue
        cells = [f"{by[s][0] / by[s][1]:.1%}" for s in sets]
        all_cer = by["all"][0] / by["all"][1]
        cpu = f"{by['all'][4] / by['all'][5]:.1f}" if by["all"][5] else "–"
        delta = f"{all_cer - base['all'][0] / base['all'][1]:+.1%}" if base else "–"
        print(f"| {name} | `{key.split('@', 1)[1]}` | " + " | ".join(cells) +
              f" | {delta} | {by['all'][2] / by['all'][3]:.1f} | {cpu} |")
    for name, (key, by) in results.items():
        if by is not None and base:
            ratio = (by["all"][0] / by["all"][1]) / (base["all"][0] / base["all"][1])
            print(f"RESULT {name}: CER {by['all'][0] / by['all'][1]:.2%} = {ratio:.2f}x the defaults' {gt.tally()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

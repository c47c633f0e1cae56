#!/usr/bin/env python3
"""Degraded scans: how the default path and Tesseract read pages under the conditions scanners
and microfilm deliver, and whether the quality signal flags what reads badly.

Pages of ../shared/gt (`VLMOCR_GT` overrides; `--per-set N` of each set) are each degraded one way,
reproducibly, by vlmocr/testing/degraded.py (clean, blur, lowres, jpeg, noise, faint, bleed — the
verso being the next page of the same set —, turn90; what each does: that module), and written as
PNG files.

Each condition's pages are read as a user reads them, `vlmocr run --manifest M.csv` (doc_id,
path, language as benchmarks/gt_reading.tess_lang gives it), with the default (`--engine auto`)
and with `--engine tesseract`, each also with `--repair off` side by side (the path without the
repair of inputs/repair.py; `--no-baseline` leaves it out). Per condition and engine: CER (micro, against the
page's truth), the pages over 10 % CER, the pages the run did not call ok (suspect or worse), and
the signal's recall and precision on them. The goal of "Degraded scans read, not only flagged"
(BENCHMARKS): each condition's CER within 3 points of the same pages clean (8 for bleed-through),
the signal still flagging ≥ 90 % of the pages over 10 % at ≥ 80 % precision.

    python benchmarks/bench_degraded.py                       # 2 pages a set, every condition
    python benchmarks/bench_degraded.py --per-set 1 --conditions clean,noise,bleed
    python benchmarks/bench_degraded.py --keep /tmp/degraded  # keep the images and runs to look at
    python benchmarks/bench_degraded.py --keep /tmp/d --images-only   # only make the degraded pages
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.pop("VLMOCR_PLUGINS", None)  # vlmocr's own reading, never a test cache's

from gt_reading import GT, gt_pages, tess_lang, truth  # noqa: E402
from measure import final_records, run_finished  # noqa: E402

from vlmocr.evaluation.score import char_errors  # noqa: E402
from vlmocr.testing.degraded import CONDITIONS, degrade  # noqa: E402

NO_REPAIR = ", no repair"  # a contender's name: `vlmocr run --engine E --repair off`

BAD = 0.10  # a page read worse than this is one the signal should flag


# What each condition is held to, in CER points over the same pages clean (the goal).
ALLOWED = {"bleed": 8.0}


def make_set(rows: list[dict[str, str]], condition: str, out: Path) -> Path:
    """The condition's pages as PNG files and a manifest of them; returns the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    by_set: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_set.setdefault(r["set"], []).append(r)
    manifest = out / "manifest.csv"
    with manifest.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["doc_id", "path", "language"])
        for r in rows:
            img = Image.open(GT / r["image"])
            img.load()
            if CONDITIONS[condition] is not None:
                # The verso: the next page of the same set (the set's only page: itself).
                mates = by_set[r["set"]]
                verso_row = mates[(mates.index(r) + 1) % len(mates)]
                img = degrade(img, condition, r["name"], verso=Image.open(GT / verso_row["image"]))
            path = out / f"{r['name']}.png"
            img.save(path)
            w.writerow([r["name"], str(path), tess_lang(r["language"], r["script"])])
    return manifest


def read(manifest: Path, out: Path, contender: str) -> dict[str, Any]:
    engine = contender.removesuffix(NO_REPAIR)
    args = ["--manifest", str(manifest), "--out", str(out)] + (["--engine", engine] if engine != "auto" else [])
    if contender.endswith(NO_REPAIR):
        args += ["--repair", "off"]
    res = run_finished(args, timeout=7200)
    return {"records": final_records(out), "cpu_s": res["cpu_s"], "wall_s": res["wall_s"]}


def summarise(rows: list[dict[str, str]], got: dict[str, Any]) -> dict[str, Any]:
    edits = chars = bad = flagged = both = 0
    for r in rows:
        rec = got["records"].get(r["name"], {})
        e, n = char_errors(rec.get("text") or "", truth(r))
        edits, chars = edits + e, chars + n
        is_bad = n > 0 and e / n > BAD
        is_flagged = rec.get("status") != "ok"
        bad, flagged, both = bad + is_bad, flagged + is_flagged, both + (is_bad and is_flagged)
    return {"cer": edits / chars if chars else 0.0, "bad": bad, "flagged": flagged, "both": both,
            "recall": both / bad if bad else 1.0, "precision": both / flagged if flagged else 1.0,
            "cpu_page": got["cpu_s"] / max(1, len(rows))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-set", type=int, default=2, help="the first N pages of each set")
    ap.add_argument("--sets", default="", help="comma-separated sets (default: all)")
    ap.add_argument("--conditions", default=",".join(CONDITIONS), help=f"of {', '.join(CONDITIONS)}")
    ap.add_argument("--engines", default="auto,tesseract", help="`vlmocr run --engine` values")
    ap.add_argument("--no-baseline", action="store_true", help="leave out the runs with --repair off")
    ap.add_argument("--keep", type=Path, help="keep the images and run folders here (a new folder)")
    ap.add_argument("--images-only", action="store_true", help="make the degraded pages (with --keep) and read nothing")
    ap.add_argument("--quick", action="store_true", help="one page of each set with an image, clean and bleed, auto only")
    args = ap.parse_args()
    if args.quick:
        args.per_set, args.conditions, args.engines = 1, "clean,bleed", "auto"
    conditions = [c for c in args.conditions.split(",") if c]
    unknown = set(conditions) - set(CONDITIONS)
    if unknown:
        sys.exit(f"--conditions: unknown {', '.join(sorted(unknown))} (known: {', '.join(CONDITIONS)})")
    if "clean" not in conditions:
        conditions.insert(0, "clean")  # every condition is measured against the same pages clean
    engines = [e for e in args.engines.split(",") if e]
    if not args.no_baseline:
        engines = [c for e in engines for c in (e, e + NO_REPAIR)]
    rows = [r for r in gt_pages(sets=[s for s in args.sets.split(",") if s] or None, per_set=args.per_set)
            if (GT / r["image"]).is_file()]
    if not rows:
        sys.exit(f"no pages with images under {GT}")
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        sys.exit(f"--keep {args.keep}: not empty (its runs would resume and measure nothing)")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-degraded-") as tmp:
        work = args.keep or Path(tmp)
        for condition in conditions:
            manifest = make_set(rows, condition, work / condition)
            for engine in engines if not args.images_only else ():
                got = read(manifest, work / f"run-{condition}-{engine.replace(NO_REPAIR, '-no-repair')}", engine)
                results[(condition, engine)] = s = summarise(rows, got)
                print(f"{condition} {engine}: CER {100 * s['cer']:.2f} %, over 10 % {s['bad']}, not ok {s['flagged']}, "
                      f"CPU {s['cpu_page']:.1f} s a page", file=sys.stderr, flush=True)

    if args.images_only:
        print(f"{len(rows)} pages × {len(conditions)} conditions written under {work}")
        return 0
    print(f"\n{len(rows)} pages ({args.per_set} a set), each condition read as `vlmocr run --manifest`; "
          f"CER micro; 'not ok': the run's status; recall/precision of 'not ok' against CER > 10 %\n")
    print("| condition | engine | CER | Δ against clean (points) | over 10 % | not ok | recall | precision | CPU s a page |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for condition in conditions:
        for engine in engines:
            s, clean = results[(condition, engine)], results[("clean", engine)]
            delta = 100 * (s["cer"] - clean["cer"])
            print(f"| {condition} | {engine} | {100 * s['cer']:.2f} % | {delta:+.2f} | {s['bad']} | {s['flagged']} | "
                  f"{100 * s['recall']:.0f} % | {100 * s['precision']:.0f} % | {s['cpu_page']:.1f} |")
    for engine in engines:
        worst = {c: 100 * (results[(c, engine)]["cer"] - results[("clean", engine)]["cer"]) for c in conditions if c != "clean"}
        within = [c for c, d in worst.items() if d <= ALLOWED.get(c, 3.0)]
        bad = sum(results[(c, engine)]["bad"] for c in conditions)
        both = sum(results[(c, engine)]["both"] for c in conditions)
        flagged = sum(results[(c, engine)]["flagged"] for c in conditions)
        print(f"RESULT {engine}: clean CER {100 * results[('clean', engine)]['cer']:.2f} %; within the goal "
              f"{len(within)} of {len(worst)} conditions ({', '.join(within) or 'none'}); signal recall "
              f"{100 * both / bad if bad else 100:.0f} %, precision {100 * both / flagged if flagged else 100:.0f} % "
              f"over all conditions ({both} of {bad} pages over 10 % flagged, {flagged} not ok)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

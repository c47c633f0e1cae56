#!/usr/bin/env python3
"""How much of the Fraktur error is the long s (and its kin)? CER with and without the folds.

The readings are the cached ones of `bench_signal.py` (benchmarks/data/signal_readings.json:
every page of ../shared/gt read as `vlmocr run` reads it, Tesseract with `frk` for Fraktur, under
the key of the engine's current settings, releases and code: gt_reading.engine_key), so nothing is
read again; a page without a current reading is left out and the RESULT says how many were used.
Per set and engine, the CER (Σ edits / Σ truth characters,
`vlmocr.evaluation.score`) under each normalisation:

* ``nfc+whitespace`` — what `vlmocr evaluate` scores by default;
* ``+long_s`` — `vlmocr evaluate --fold long_s` (both texts folded), which here equals the clean
  rule ``[fold] long_s = true`` (the reading folded): the truth has no ``ſ``;
* ``+ocrd2`` / ``+ocrd1`` — OCR-D's levels (`vlmocr.text.historic`).

`--lang NAME` compares Tesseract language data on the same pages: pages not in the cache are
read with `NAME` (rendered as bench_signal renders them) into
benchmarks/data/normalisation_readings.json.

    python benchmarks/bench_normalisation.py                      # goethe, grenzboten
    python benchmarks/bench_normalisation.py --sets zonaras,tapus
    python benchmarks/bench_normalisation.py --lang Fraktur       # the script model against frk
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ["OMP_THREAD_LIMIT"] = "1"

import gt_reading as gt

from vlmocr.evaluation.score import char_errors, normalisation_name

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
CACHE = REPO / "benchmarks" / "data" / "signal_readings.json"
LANG_CACHE = REPO / "benchmarks" / "data" / "normalisation_readings.json"
NORMALISATIONS: list[tuple[str, ...]] = [(), ("long_s",), ("ocrd2",), ("ocrd1",)]


def read_with(lang: str, rows: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Readings of `rows` by Tesseract with `lang`, cached in LANG_CACHE."""
    from vlmocr.engines.base import PageInput
    from vlmocr.engines.tesseract import TesseractEngine
    from vlmocr.inputs.render import render_page
    from vlmocr.runfolder.record import Sizing

    cache = json.loads(LANG_CACHE.read_text(encoding="utf-8")) if LANG_CACHE.exists() else {}
    engine = None
    for i, row in enumerate(rows, 1):
        key = f"tesseract:{lang}#{gt.made_by('tesseract')}/{row['name']}"
        if key in cache:
            gt.note_cached(key, "")
            continue
        engine = engine or TesseractEngine(lang=lang)
        t0 = time.perf_counter()
        rendered = render_page(GT / row["image"], 1, Sizing())
        same = str(rendered.same_as_file) if rendered.same_as_file else None
        reading = engine.read(PageInput(row["name"], 1, rendered.image, None, rendered.dpi, [], same))
        cache[key] = {"text": reading.text, "seconds": round(time.perf_counter() - t0, 2)}
        gt.note_read(key, "")
        LANG_CACHE.write_text(json.dumps(cache, ensure_ascii=False, sort_keys=True, indent=0), encoding="utf-8")
        print(f"[{lang} {i}/{len(rows)}] {row['name']}: {cache[key]['seconds']} s", file=sys.stderr, flush=True)
    prefix = f"tesseract:{lang}#{gt.made_by('tesseract')}/"
    return {k.split("/", 1)[1]: v for k, v in cache.items() if k.startswith(prefix)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="goethe,grenzboten")
    ap.add_argument("--engines", default="tesseract,rapidocr")
    ap.add_argument("--lang", action="append", default=[], help="Also Tesseract with this data (read if not cached).")
    args = ap.parse_args()
    sets = args.sets.split(",")
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["set"] in sets]
    cache = json.loads(CACHE.read_text(encoding="utf-8"))
    readers: dict[str, dict[str, dict[str, Any]]] = {}
    for engine in args.engines.split(","):
        key = gt.engine_key(engine)
        readers[engine] = {r["name"]: entry for r in rows if (entry := gt.cached(cache, key, r["name"])) is not None}
    for lang in args.lang:
        readers[f"tesseract:{lang}"] = read_with(lang, rows)
    names = [normalisation_name(n) for n in NORMALISATIONS]
    labels = ["+".join(n) if n else "nfc+whitespace" for n in NORMALISATIONS]
    print("| set | engine | pages | " + " | ".join(f"CER {label}" for label in labels)
          + f" | error folded away by {labels[-1]} |")
    print("|---|---|---:|" + "---:|" * (len(names) + 1))
    for s in sets:
        for engine, readings in readers.items():
            pages = [r for r in rows if r["set"] == s and r["name"] in readings]
            if not pages:
                continue
            rates = []
            for folds in NORMALISATIONS:
                edits = chars = 0
                for r in pages:
                    e, n = char_errors(readings[r["name"]]["text"], (GT / r["truth"]).read_text(encoding="utf-8"),
                                       folds)
                    edits, chars = edits + e, chars + n
                rates.append(edits / chars)
            folded = 1 - rates[-1] / rates[0] if rates[0] else 0.0
            print(f"| {s} | {engine} | {len(pages)} | " + " | ".join(f"{r * 100:.2f} %" for r in rates)
                  + f" | {folded * 100:.0f} % |")
    print(f"\nRESULT normalisations: {', '.join(names)} {gt.tally()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Library formats (issue 29): what writing ALTO, hOCR, PAGE-XML and the searchable PDF costs beside
the CPU reading that gives their positions, and how many of a VLM's words find a place on a CPU
reading's boxes — on the development pages of ../shared/gt (`VLMOCR_GT` overrides).

Each page is rendered as `vlmocr run` renders it and read by Tesseract (one thread, the language
data a user of that collection would give), timed; then, in the same process, its four formats
are written from the record (`vlmocr.formats`: the PDF over the page's own image file), timed.
The ratio of the two is the cost (goal: under 10 % of the reading).

Alignment (positions/align.py): two answers stand in for a VLM's — the page's human transcription
(what a perfect VLM would answer: other line breaks, none of the CPU's misreadings) and RapidOCR's
reading of the page (what the test server answers: another engine's misreadings) — each aligned to
Tesseract's words; the share of the answer's words aligned, per collection; and the truth's
longest run of words in a row that Tesseract's reading has no trace of (what a VLM answer may hold
before its passage counts as invented, reading/vlm.py UNSUPPORTED_RUN).

    python benchmarks/bench_formats.py --per-set 3     # ~3 min
    python benchmarks/bench_formats.py --quick         # 1 page a set, no RapidOCR
    python benchmarks/bench_formats.py --all --no-rapidocr    # every page, Tesseract only (~5 min)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gt_reading import GT, gt_pages, tess_lang, truth

from vlmocr.engines.base import PageInput
from vlmocr.engines.registry import make_cpu_engine
from vlmocr.formats import write_document
from vlmocr.formats.layout import laid_pages
from vlmocr.inputs.render import render_page
from vlmocr.positions.align import align, shared_words
from vlmocr.runfolder.record import PageRecord, Row, Sizing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-set", type=int, default=3)
    ap.add_argument("--all", action="store_true", help="every page of pages.csv (not --per-set)")
    ap.add_argument("--no-rapidocr", action="store_true", help="align the truth only (not RapidOCR's reading)")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    per_set = None if args.all else 1 if args.quick else args.per_set
    rows = [r for r in gt_pages(per_set=per_set) if (GT / r["image"]).is_file()]
    print(f"# {len(rows)} pages of {GT}")
    rapid = None if args.quick or args.no_rapidocr else make_cpu_engine("rapidocr", {"threads": 1})
    unshared: list[tuple[int, str]] = []  # the truth's longest run of words Tesseract read no trace of
    read_s: list[float] = []
    write_s: dict[str, list[float]] = {f: [] for f in ("alto", "hocr", "pagexml", "pdf")}
    shares: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="vlmocr-formats-") as tmp:
        for i, row in enumerate(rows):
            image = GT / row["image"]
            rendered = render_page(image, 1, Sizing())
            tess = make_cpu_engine("tesseract", {"lang": tess_lang(row["language"], row["script"]), "threads": 1})
            t0 = time.perf_counter()
            reading = tess.read(PageInput(row["name"], 1, rendered.image, "", rendered.dpi, [], None))
            read_s.append(time.perf_counter() - t0)
            assert reading.positions is not None
            rec = Row.of(PageRecord(doc_id=row["name"], source=str(image), page=1, key="k", status="ok",
                                    text=reading.text, engine="tesseract", dpi=rendered.dpi,
                                    positions=reading.positions).to_json_dict())
            for fmt in write_s:
                folder = Path(tmp) / f"{fmt}-{i}"
                folder.mkdir()
                t0 = time.perf_counter()
                write_document(fmt, row["name"], laid_pages([rec], "raw"), image.name, image, folder)
                write_s[fmt].append(time.perf_counter() - t0)
            per = shares.setdefault(row["set"], {"truth": [], "rapidocr": []})
            got = align(truth(row), reading.positions)
            per["truth"].append(got.aligned if got and got.aligned is not None else 0.0)
            support = shared_words(truth(row), reading.text)
            unshared.append((support[2], f"{row['name']}: {support[2] / max(support[1], 1):.0%} of its words, "
                                         f"{support[0]:.0%} shared"))
            if rapid is not None:
                other = rapid.read(PageInput(row["name"], 1, rendered.image, "", rendered.dpi, [], None)).text
                got = align(other, reading.positions)
                per["rapidocr"].append(got.aligned if got and got.aligned is not None else 0.0)
            print(f"  {row['name']}: read {read_s[-1]:.2f} s, formats "
                  f"{sum(v[-1] for v in write_s.values()) * 1000:.0f} ms", file=sys.stderr)
    total_read = sum(read_s)
    print("\n| format | ms/page (median) | share of the Tesseract reading |")
    print("|---|---:|---:|")
    for fmt, times in write_s.items():
        print(f"| {fmt} | {statistics.median(times) * 1000:.1f} | {sum(times) / total_read * 100:.2f} % |")
    all_formats = sum(sum(t) for t in write_s.values())
    print(f"| all four | {statistics.median([sum(v) for v in zip(*write_s.values())]) * 1000:.1f} | "
          f"{all_formats / total_read * 100:.2f} % |")
    print(f"\nTesseract reading: median {statistics.median(read_s):.2f} s a page\n")
    print("| collection | pages | truth aligned (mean, min) | RapidOCR's reading aligned (mean, min) |")
    print("|---|---:|---:|---:|")
    for name, per in shares.items():
        rap = (f"{statistics.mean(per['rapidocr']) * 100:.1f} %, {min(per['rapidocr']) * 100:.1f} %"
               if per["rapidocr"] else "—")
        print(f"| {name} | {len(per['truth'])} | {statistics.mean(per['truth']) * 100:.1f} %, "
              f"{min(per['truth']) * 100:.1f} % | {rap} |")
    every = [s for per in shares.values() for s in per["truth"]]
    longest = max(unshared)
    print("\nLongest runs of the truth's words Tesseract's reading has no trace of: "
          + ", ".join(f"{n} ({name})" for n, name in sorted(unshared, reverse=True)[:8]))
    print(f"\nRESULT formats: all four {all_formats / total_read * 100:.2f} % of the CPU reading time "
          f"(goal < 10 %)")
    print(f"RESULT aligned: truth as the VLM's answer {statistics.mean(every) * 100:.1f} % of its words "
          f"(min {min(every) * 100:.1f} %)")
    print(f"RESULT unshared run: truth as the VLM's answer, its longest run of words Tesseract's reading has no "
          f"trace of: at most {longest[0]} ({longest[1]}; reading/vlm.py UNSUPPORTED_RUN flags 40)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

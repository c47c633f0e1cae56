#!/usr/bin/env python3
"""vlmocr's default path against OCRmyPDF on the same image-only PDFs, side by side in rounds.

The pages of ../shared/gt (`VLMOCR_GT` overrides) are made into image-only PDFs, one a set, split
into documents of at most --per-doc pages (100 pages: 11 PDFs), each scan embedded as it is
(img2pdf: the JPEG's or PNG's own data, at the scan's own resolution; a scan that states none or
less than 100 dpi is given the resolution that makes it an A4 page). Each document's language is
its set's, as a user reading that collection would give it (benchmarks/gt_reading.tess_lang:
`frk` for the Fraktur sets, `grc` for the Greek one).

Contenders, each run as a user runs it, one after the other, the order turned every round:

  * vlmocr    `vlmocr run --manifest M.csv --out RUN` (doc_id, path, language; everything else
              the default: `--engine auto`, the workers the machine holds) — one command over the
              whole collection, a fresh RUN every round.
  * ocrmypdf  `ocrmypdf -j N -l LANG --force-ocr --output-type none --sidecar S.txt IN.pdf -`
              for each PDF in turn (OCRmyPDF reads one PDF an invocation; -j: the cores), text
              only: the same product as vlmocr's records (`--ocrmypdf-output pdf` makes its
              searchable PDF too, its default product).

For each: wall seconds from launch to exit, CPU seconds of the whole process tree
(benchmarks/measure.py: sampled from /proc every 50 ms), and CER per page against the truth
(`vlmocr.evaluation.score.char_errors`, micro over all pages, and per set). Medians over rounds;
ratios vlmocr ÷ OCRmyPDF. The goal (BENCHMARKS, "The default at Tesseract's speed"): vlmocr's wall
time ≤ OCRmyPDF's, its CER ≤ a third of OCRmyPDF's.

    python benchmarks/bench_ocrmypdf.py                     # all pages, 2 rounds
    python benchmarks/bench_ocrmypdf.py --per-set 2 --rounds 1   # a quick look
    python benchmarks/bench_ocrmypdf.py --quick             # smoke: the pages VLMOCR_GT has images of, 1 round
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.pop("VLMOCR_PLUGINS", None)  # vlmocr's own reading, never a test cache's

from gt_reading import GT, gt_pages, tess_lang, truth  # noqa: E402
from measure import run_finished, run_vlmocr  # noqa: E402

from vlmocr.evaluation.score import char_errors  # noqa: E402

A4_LONG_INCHES = 11.69


def scan_dpi(path: Path) -> float:
    """The resolution the scan is embedded at: its own when it states a plausible one, else the one
    that makes it an A4 page (a scan that states 72 dpi or none was scanned at more)."""
    from PIL import Image

    with Image.open(path) as im:
        stated = im.info.get("dpi")
        own = float(stated[0]) if stated else 0.0
        return own if own >= 100 else round(max(im.size) / A4_LONG_INCHES, 1)


def make_pdfs(rows: list[dict[str, str]], out: Path, per_doc: int) -> list[dict[str, Any]]:
    """Image-only PDFs, one a set split into documents of at most `per_doc` pages; each its
    pages' rows and language."""
    import img2pdf
    import pikepdf

    by_set: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_set.setdefault(r["set"], []).append(r)
    docs = []
    for name, pages in by_set.items():
        for k in range(0, len(pages), per_doc):
            chunk = pages[k:k + per_doc]
            doc_id = f"{name}_{k // per_doc + 1:02d}"
            pdf = out / f"{doc_id}.pdf"
            dpis = [scan_dpi(GT / r["image"]) for r in chunk]
            # One layout a page (their resolutions differ): img2pdf takes one function for all, so
            # each page is made alone and the pages joined with pikepdf (OCRmyPDF's own library).
            joined = pikepdf.Pdf.new()
            for r, dpi in zip(chunk, dpis):
                layout = img2pdf.get_fixed_dpi_layout_fun((dpi, dpi))
                one = pikepdf.Pdf.open(io.BytesIO(img2pdf.convert(str(GT / r["image"]), layout_fun=layout)))
                joined.pages.extend(one.pages)
            joined.save(pdf)
            docs.append({"doc_id": doc_id, "pdf": pdf, "rows": chunk, "dpi": statistics.median(dpis),
                         "lang": tess_lang(chunk[0]["language"], chunk[0]["script"])})
    return docs


def errors(texts: dict[tuple[str, int], str], docs: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """(edits, truth characters) per set, and over all ("all"); a page with no text counts all
    its truth's characters as errors."""
    out: dict[str, tuple[int, int]] = {}
    for d in docs:
        for i, r in enumerate(d["rows"], start=1):
            e, n = char_errors(texts.get((d["doc_id"], i), ""), truth(r))
            for key in (r["set"], "all"):
                pe, pn = out.get(key, (0, 0))
                out[key] = (pe + e, pn + n)
    return out


def run_vlmocr_default(docs: list[dict[str, Any]], work: Path, round_no: int, at_scan_dpi: bool = False) -> dict[str, Any]:
    name = "vlmocr-scan-dpi" if at_scan_dpi else "vlmocr"
    manifest = work / f"{name}.csv"
    with manifest.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["doc_id", "path", "language", "dpi"])
        for d in docs:
            w.writerow([d["doc_id"], str(d["pdf"]), d["lang"], f"{d['dpi']:g}" if at_scan_dpi else ""])
    out = work / f"{name}-{round_no}"
    res = run_finished(["--manifest", str(manifest), "--out", str(out)], timeout=3600)
    last: dict[tuple[str, int], dict[str, Any]] = {}  # a page's last record wins (a retried page's)
    with (out / "pages.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            last[(rec["doc_id"], int(rec["page"]))] = rec
    texts = {key: rec.get("text") or "" for key, rec in last.items()}
    statuses: dict[str, int] = {}
    engines: dict[str, int] = {}
    seconds: dict[str, list[float]] = {}  # a page's time in its worker (the record's), by set
    for (doc_id, _), rec in last.items():
        statuses[rec["status"]] = statuses.get(rec["status"], 0) + 1
        engines[rec.get("engine", "?")] = engines.get(rec.get("engine", "?"), 0) + 1
        seconds.setdefault(doc_id.rsplit("_", 1)[0], []).append(float(rec.get("seconds") or 0.0))
    per_set = ", ".join(f"{k} {sum(v) / len(v):.1f}" for k, v in sorted(seconds.items()))
    return {"wall_s": res["wall_s"], "cpu_s": res["cpu_s"], "errors": errors(texts, docs),
            "note": f"statuses {statuses}, engines {engines}; s a page in the worker: {per_set}"}


def run_ocrmypdf(docs: list[dict[str, Any]], work: Path, round_no: int, jobs: int, output: str) -> dict[str, Any]:
    exe = shutil.which("ocrmypdf")
    cmd = [exe] if exe else [sys.executable, "-m", "ocrmypdf"]
    texts: dict[tuple[str, int], str] = {}
    wall = cpu = 0.0
    for d in docs:
        side = work / f"ocrmypdf-{round_no}-{d['doc_id']}.txt"
        target = str(work / f"ocrmypdf-{round_no}-{d['doc_id']}.pdf") if output == "pdf" else "-"
        args = ["-j", str(jobs), "-l", d["lang"], "--force-ocr", "--output-type", output, "--sidecar", str(side),
                "-q", str(d["pdf"]), target]
        res = run_vlmocr(args, timeout=3600, cmd=cmd)
        if res["rc"] != 0:
            sys.exit(f"ocrmypdf exited {res['rc']} on {d['pdf']}:\n{res['stderr'][-3000:]}")
        wall += res["wall_s"]
        cpu += res["cpu_s"]
        # The sidecar: the pages' texts, each ended by a form feed.
        for i, page in enumerate(side.read_text(encoding="utf-8").split("\f")[:len(d["rows"])], start=1):
            texts[(d["doc_id"], i)] = page
    return {"wall_s": wall, "cpu_s": cpu, "errors": errors(texts, docs), "note": f"{len(docs)} invocations"}


def cer_of(errs: tuple[int, int]) -> float:
    return errs[0] / errs[1] if errs[1] else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="one round (a smoke test)")
    ap.add_argument("--per-set", type=int, default=None, help="the first N pages of each set only")
    ap.add_argument("--sets", default="", help="comma-separated sets (default: all)")
    ap.add_argument("--per-doc", type=int, default=10, help="pages a PDF at most")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="OCRmyPDF's -j")
    ap.add_argument("--ocrmypdf-output", choices=("none", "pdf"), default="none",
                    help="OCRmyPDF's --output-type: none (text only, as vlmocr's records) or pdf")
    ap.add_argument("--contenders", default="vlmocr,ocrmypdf",
                    help="of vlmocr, ocrmypdf, vlmocr@scan-dpi (vlmocr with each document's scan resolution "
                    "as its manifest dpi)")
    args = ap.parse_args()
    if args.quick:
        args.rounds = 1

    rows = [r for r in gt_pages(sets=[s for s in args.sets.split(",") if s] or None, per_set=args.per_set)
            if (GT / r["image"]).is_file()]
    if not rows:
        sys.exit(f"no pages with images under {GT}")
    contenders = [c for c in args.contenders.split(",") if c]
    unknown = set(contenders) - {"vlmocr", "ocrmypdf", "vlmocr@scan-dpi"}
    if unknown:
        sys.exit(f"--contenders: unknown {', '.join(sorted(unknown))}")
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in contenders}
    with tempfile.TemporaryDirectory(prefix="bench-ocrmypdf-") as tmp:
        work = Path(tmp)
        docs = make_pdfs(rows, work, args.per_doc)
        print(f"{len(docs)} image-only PDFs, {len(rows)} pages: "
              + ", ".join(f"{d['doc_id']} ({len(d['rows'])}, -l {d['lang']})" for d in docs), file=sys.stderr)
        for k in range(args.rounds):
            order = contenders if k % 2 == 0 else contenders[::-1]
            for c in order:
                res = (run_ocrmypdf(docs, work, k, args.jobs, args.ocrmypdf_output) if c == "ocrmypdf"
                       else run_vlmocr_default(docs, work, k, at_scan_dpi=c == "vlmocr@scan-dpi"))
                results[c].append(res)
                print(f"round {k + 1} {c}: wall {res['wall_s']:.1f} s, CPU {res['cpu_s']:.1f} s, "
                      f"CER {100 * cer_of(res['errors']['all']):.2f} % ({res['note']})", file=sys.stderr, flush=True)

    sets = sorted({r["set"] for r in rows})
    print(f"\n{len(rows)} pages in {len(docs)} PDFs, {args.rounds} round(s), OCRmyPDF "
          f"{_version()} (-j {args.jobs}, --output-type {args.ocrmypdf_output})\n")
    print("| contender | wall s (median) | CPU s (median) | s/page wall | CER all | " + " | ".join(sets) + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(sets))
    summary: dict[str, tuple[float, float, float]] = {}
    for c in contenders:
        wall = statistics.median(r["wall_s"] for r in results[c])
        cpu = statistics.median(r["cpu_s"] for r in results[c])
        errs = results[c][-1]["errors"]
        summary[c] = (wall, cpu, cer_of(errs["all"]))
        print(f"| {c} | {wall:.1f} | {cpu:.1f} | {wall / len(rows):.2f} | {100 * cer_of(errs['all']):.2f} % | "
              + " | ".join(f"{100 * cer_of(errs[s]):.1f} %" for s in sets) + " |")
    for c in contenders:
        wall, cpu, c_cer = summary[c]
        walls = ", ".join(f"{r['wall_s']:.1f}" for r in results[c])
        print(f"RESULT {c}: wall {wall:.1f} s, CPU {cpu:.1f} s, CER {100 * c_cer:.2f} % "
              f"({len(rows)} pages, walls {walls})")
    if len(contenders) == 2:
        (vw, vc, ve), (ow, oc, oe) = summary["vlmocr"], summary["ocrmypdf"]
        print(f"RESULT vlmocr ÷ OCRmyPDF: wall {vw / ow:.2f} (goal ≤ 1), CPU {vc / oc:.2f}, "
              f"CER {ve / oe if oe else float('inf'):.2f} (goal ≤ 0.33)")
    return 0


def _version() -> str:
    try:
        return subprocess.run(["ocrmypdf", "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())

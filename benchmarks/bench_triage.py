#!/usr/bin/env python3
"""Triage throughput: documents/s and pages/s of `vlmocr.corpus.triage.triage` on a generated corpus,
side by side with plain `vlmocr.inputs.render.count_pages` over the same files (the floor: opening
each document and counting its pages, nothing else).

The corpus (built once per invocation, in a temporary folder or --workdir):

  templates/   ~40 distinct documents: born-digital reportlab PDFs of 1–150 pages with real
               transcription text from ../shared/gt (Latin-1 only), scanned PDFs of 1–8 pages
               embedding the real ground-truth JPEGs as they are (pypdfium2 load_jpeg, no
               re-encoding: ~1 MB a page, 200–220 dpi), mixed PDFs (text + scans), JPEG and
               PNG page images, a corrupt and an encrypted PDF
  corpus/      --docs hard links cycling through the templates (every file is hashed and
               analysed like any other; the duplicate column marks them, which costs nothing)

Variants, each run once per round (order alternating between rounds), files in the page
cache (a warm-cache measurement: on a cold network file system hashing reads dominate). Wall
time and CPU time (this process and its finished children, i.e. the pool's workers) are both
reported: on a busy machine the CPU figure ("documents per CPU-second") is the stable one.

  count_pages floor           one process, count_pages() for every file
  triage 1 worker             the default: 32 checked pages per document
  triage 2 workers            the same through the process pool (includes starting it)
  triage 2 workers, all pages --check-pages 0: every page's text layer and images looked at
  triage 2 workers + sheets   contact sheets for every page (on the first --sheet-docs docs)

    python benchmarks/bench_triage.py                # 500 documents, 3 rounds (~2 min)
    python benchmarks/bench_triage.py --quick        # smoke run: 60 documents, 1 round
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from vlmocr.corpus.triage import TriageOptions, triage
from vlmocr.exceptions import BadInput
from vlmocr.inputs.render import count_pages
from vlmocr.inputs.sources import discover

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))

BORN_PAGES = [1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 10, 12, 16, 24, 60, 150]
SCAN_PAGES = [1, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6, 8]


def gt_text() -> list[str]:
    lines = []
    for p in sorted(GT.glob("*/*.txt")):
        for line in p.read_text(encoding="utf-8").splitlines():
            line = line.encode("latin-1", "ignore").decode("latin-1").strip()
            if len(line) > 20:
                lines.append(line[:95])
    return lines or [f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(500)]


def gt_jpegs() -> list[Path]:
    jpgs = sorted(GT.glob("*/*.jpg"))
    if not jpgs:
        raise SystemExit(f"no ground-truth page images in {GT} (set VLMOCR_GT)")
    return jpgs


def born_pdf(path: Path, pages: int, lines: list[str], start: int) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    k = start
    for _ in range(pages):
        c.setFont("Helvetica", 10)
        y = 800
        while y > 60:
            c.drawString(60, y, lines[k % len(lines)])
            k += 1
            y -= 13
        c.showPage()
    c.save()


def scan_pdf(path: Path, jpegs: list[Path], text_pages: int = 0, lines: list[str] | None = None) -> None:
    """Real JPEGs embedded as they are, one a page, each page sized from the JPEG's dpi."""
    import pypdfium2 as pdfium
    from PIL import Image

    pdf = pdfium.PdfDocument.new()
    for jpg in jpegs:
        with Image.open(jpg) as im:
            w, h = im.size
            dpi = float((im.info.get("dpi") or (200, 200))[0]) or 200.0
            if dpi < 100:
                dpi = 200.0
        wpt, hpt = w * 72 / dpi, h * 72 / dpi
        page = pdf.new_page(wpt, hpt)
        img = pdfium.PdfImage.new(pdf)
        img.load_jpeg(str(jpg), inline=False)
        img.set_matrix(pdfium.PdfMatrix().scale(wpt, hpt))
        page.insert_obj(img)
        page.gen_content()
    pdf.save(str(path))
    pdf.close()
    if text_pages and lines:
        born = path.with_suffix(".text.pdf")
        born_pdf(born, text_pages, lines, 7)
        a, b = pdfium.PdfDocument(str(path)), pdfium.PdfDocument(str(born))
        a.import_pages(b, list(range(text_pages)), index=1)
        mixed = path.with_suffix(".mixed.pdf")
        a.save(str(mixed))
        a.close()
        b.close()
        born.unlink()
        os.replace(mixed, path)


def build(base: Path, docs: int) -> Path:
    templates, corpus = base / "templates", base / f"corpus-{docs}"
    ready = corpus / ".ready"
    if ready.exists():
        return corpus
    shutil.rmtree(templates, ignore_errors=True)
    shutil.rmtree(corpus, ignore_errors=True)
    templates.mkdir(parents=True)
    lines, jpgs = gt_text(), gt_jpegs()
    n = 0
    for i, pages in enumerate(BORN_PAGES):
        born_pdf(templates / f"born{i:02d}.pdf", pages, lines, i * 97)
    for i, pages in enumerate(SCAN_PAGES):
        pick = [jpgs[(i * 5 + k) % len(jpgs)] for k in range(pages)]
        scan_pdf(templates / f"scan{i:02d}.pdf", pick)
    for i in range(4):
        scan_pdf(templates / f"mixed{i}.pdf", [jpgs[(i * 3 + k) % len(jpgs)] for k in range(2)], 3, lines)
    shutil.copy(jpgs[1], templates / "photo.jpg")
    from PIL import Image

    with Image.open(jpgs[2]) as im:
        im.convert("L").save(templates / "page.png", dpi=(200, 200))
    (templates / "corrupt.pdf").write_bytes(b"not a pdf\n" * 100)
    from reportlab.lib import pdfencrypt
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(templates / "locked.pdf"), encrypt=pdfencrypt.StandardEncryption("pw", ownerPassword="o"))
    c.drawString(72, 700, "locked")
    c.showPage()
    c.save()
    files = sorted(templates.iterdir())
    corpus.mkdir(parents=True)
    for k in range(docs):
        src = files[k % len(files)]
        sub = corpus / f"box{k // 100:02d}"
        sub.mkdir(exist_ok=True)
        os.link(src, sub / f"d{k:05d}{src.suffix}")
        n += 1
    ready.write_text("ok")
    return corpus


def floor(corpus: Path) -> tuple[int, int]:
    docs = pages = 0
    for d in discover([str(corpus)]):
        docs += 1
        try:
            pages += count_pages(d.path)
        except BadInput:
            pass
    return docs, pages


def cpu_seconds() -> float:
    """CPU of this process, its waited-for children and the forkserver's (the pool's workers
    are the forkserver's children, which it reaps: /proc/PID/stat cutime + cstime)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if pid:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks = os.sysconf("SC_CLK_TCK")
            # after ")": state is field 3, so utime/stime/cutime/cstime (14–17) are [11:15]
            total += sum(int(x) for x in fields[11:15]) / ticks
        except (OSError, ValueError, IndexError):
            pass
    return total


def run_triage(corpus: Path, out: Path, workers: int, **opts) -> tuple[int, int]:
    s = triage([str(corpus)], out, opts=TriageOptions(**opts), workers=workers)
    return s.docs, s.pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--sheet-docs", type=int, default=100, help="documents for the contact-sheet variant")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", type=Path, help="keep the generated corpus here and reuse it")
    ap.add_argument("--quick", action="store_true", help="smoke run: 60 documents, 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.docs, args.sheet_docs, args.rounds = 60, 12, 1
    tmp = tempfile.TemporaryDirectory(prefix="bench_triage_")
    base = args.workdir or Path(tmp.name)
    base.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    corpus = build(base, args.docs)
    sheet_corpus = build(base, args.sheet_docs)
    size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
    n_docs, n_pages = floor(corpus)  # also warms the page cache
    print(f"# bench_triage: {n_docs} documents, {n_pages} pages, {size / 1e6:.0f} MB (hard links to "
          f"{len(list((base / 'templates').iterdir()))} templates from {GT}); built in {time.monotonic() - t0:.0f} s")
    from importlib.metadata import version

    print(f"# python {platform.python_version()}, pypdfium2 {version('pypdfium2')}, nproc {os.cpu_count()}, "
          f"rounds {args.rounds}, workers {args.workers}")
    out = base / "out"
    out.mkdir(exist_ok=True)
    w = args.workers
    variants = {
        "count_pages floor": lambda: floor(corpus),
        "triage 1 worker": lambda: run_triage(corpus, out / "t1.csv", 1),
        f"triage {w} workers": lambda: run_triage(corpus, out / "t2.csv", w),
        f"triage {w} workers, all pages": lambda: run_triage(corpus, out / "t3.csv", w, check_pages=0),
        f"triage {w} workers + sheets": lambda: run_triage(
            sheet_corpus, out / "t4.csv", w, sheets_dir=str(out / "sheets")),
    }
    timings: dict[str, list[tuple[float, float, int, int]]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            c0 = cpu_seconds()
            t = time.perf_counter()
            docs, pages = variants[name]()
            timings[name].append((time.perf_counter() - t, cpu_seconds() - c0, docs, pages))
    print()
    print("| variant | documents | pages | wall s (median) | documents/s | pages/s | CPU ms/document "
          "| documents per CPU-s | × floor (per CPU-s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    med: dict[str, tuple[float, float, float, float]] = {}
    for name in names:
        secs = statistics.median(t for t, _, _, _ in timings[name])
        cpu = statistics.median(c for _, c, _, _ in timings[name])
        _, _, docs, pages = timings[name][0]
        med[name] = (secs, docs / secs, pages / secs, docs / max(cpu, 1e-9))
    floor_cpu = med["count_pages floor"][3]
    for name in names:
        secs, dps, pps, dpc = med[name]
        _, _, docs, pages = timings[name][0]
        print(f"| {name} | {docs} | {pages} | {secs:.2f} | {dps:.1f} | {pps:.0f} | {1e3 / dpc:.2f} | {dpc:.1f} | "
              f"{dpc / floor_cpu:.3f} |")
    print()
    print(f"RESULT count_pages floor: {med['count_pages floor'][1]:.0f} documents/s, "
          f"{med['count_pages floor'][2]:.0f} pages/s")
    for name in names[1:]:
        secs, dps, pps, dpc = med[name]
        print(f"RESULT {name}: {dps:.1f} documents/s, {pps:.0f} pages/s wall; {dpc:.1f} documents per CPU-s "
              f"({dpc / floor_cpu:.3f}× the count_pages floor)")
    one, two = med["triage 1 worker"][1], med[f"triage {w} workers"][1]
    print(f"RESULT pool scaling: {w} workers ×{two / one:.2f} documents/s over 1 worker")
    t1 = (out / "t1.csv").read_text(encoding="utf-8").splitlines()
    t2 = (out / "t2.csv").read_text(encoding="utf-8").splitlines()
    same = len(t1) == len(t2) and all(a.rsplit(",", 1)[0] == b.rsplit(",", 1)[0] for a, b in zip(t1, t2))
    print(f"RESULT identical rows from 1 and {w} workers (seconds column aside): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

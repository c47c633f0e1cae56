#!/usr/bin/env python3
"""What finding a page's master image (inputs/master.py) adds to rendering it.

render_page now asks PDFium, for every PDF page it draws, which image the page shows and how the
rendering maps onto it (the page's objects walked, images' matrices composed). Timed side by side
in rounds on the same pages, medians: `pdf_page_master` alone against the page's render at 200
dpi, on bench_render's mixed PDF (scans from ../shared/gt on A4, born-digital text pages) and on
a page of 4 000 small text objects (the most a scan's earlier OCR layer holds). Prints the cost
as a share of the render.

    python benchmarks/bench_master.py            # 12 pages, 5 rounds (~1 min)
    python benchmarks/bench_master.py --quick    # 4 pages, 1 round
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_render import DPI200, make_pdf  # noqa: E402

from vlmocr.inputs.master import pdf_page_master  # noqa: E402
from vlmocr.inputs.render import open_pdf, render_page  # noqa: E402


def dense_text_pdf(path: Path) -> Path:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(595, 842))
    for i in range(4000):  # one text object a word, as some OCR layers write them
        c.setFont("Helvetica", 4 + i % 3)
        c.drawString(20 + (i % 40) * 14, 20 + (i // 40) * 8, "word")
    c.showPage()
    c.save()
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    pages, rounds = (4, 1) if args.quick else (12, 5)
    with tempfile.TemporaryDirectory() as tmp:
        mixed = Path(tmp) / "mixed.pdf"
        make_pdf(mixed, pages)
        dense = dense_text_pdf(Path(tmp) / "dense.pdf")
        for name, path, n in (("mixed (scans + text)", mixed, pages), ("4 000 text objects", dense, 1)):
            master_s, render_s = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                for p in range(1, n + 1):
                    pg = open_pdf(path)[p - 1]
                    pdf_page_master(pg)
                    pg.close()
                master_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                for p in range(1, n + 1):
                    render_page(path, p, DPI200)
                render_s.append(time.perf_counter() - t)
            m, r = statistics.median(master_s) / n, statistics.median(render_s) / n
            print(f"{name:22s} master {m * 1000:7.2f} ms/page   render (master included) {r * 1000:7.1f} ms/page"
                  f"   master/render {m / r:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Render + encode pages/s on one core with pypdfium2: the ceiling the VLM client is held to.

A VLM client must render and encode every page before it can send it; one CPU core can feed the
GPU no faster than this. The benchmark builds a realistic mixed PDF (image-only "scanned" pages
made from ../shared/gt page images interleaved with born-digital text pages made with
reportlab), then times, side by side in one process and in rounds (every variant once per
round, medians over rounds):

  * vlmocr's own path, `vlmocr.inputs.render.render_page` + `vlmocr.inputs.render.encode`, at olmOCR's sizing
    (longest side 1288 px) and at 200 dpi, as PNG (compress_level=1) and JPEG (quality 90);
  * the 1288 px PNG as 8-bit gray (`.convert("L")` before `encode`): what a grayscale option
    would buy (pdfium renders RGB even for a gray scan);
  * raw pypdfium2 render + `PIL.Image.save(format="PNG")` with Pillow's defaults
    (compress_level=6): what `encode`'s fast compression level buys;
  * vlmocr's path through a ProcessPoolExecutor with 2 workers: pages/s and the scaling ratio.

Single-core variants are pinned to one CPU (sched_setaffinity); the pool is not pinned.

    python benchmarks/bench_render.py            # 40 pages, 5 rounds
    python benchmarks/bench_render.py --quick    # smoke run: 4 pages, 1 round
"""

from __future__ import annotations

import argparse
import io
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pypdfium2 as pdfium
from PIL import Image

from vlmocr.inputs.render import Sizing, encode, render_page

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
A4 = (595.2756, 841.8898)  # points

OLMOCR = Sizing(dpi=None, longest_side=1288)
DPI200 = Sizing(dpi=200.0, longest_side=None)


# ---------------------------------------------------------------- the document

def _gt_pages() -> list[tuple[Path, str]]:
    """(image, transcription) pairs from the ground truth, sorted for determinism."""
    pairs = []
    for img in sorted(list(GT.glob("*/*.jpg")) + list(GT.glob("*/*.png"))):
        txt = img.with_suffix(".txt")
        pairs.append((img, txt.read_text(encoding="utf-8") if txt.exists() else ""))
    if not pairs:
        sys.exit(f"no ground-truth page images under {GT} (set VLMOCR_GT)")
    return pairs


def _font() -> str:
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    for candidate in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                      "/usr/share/fonts/dejavu/DejaVuSans.ttf"):
        if os.path.exists(candidate):
            pdfmetrics.registerFont(TTFont("DejaVuSans", candidate))
            return "DejaVuSans"
    return "Helvetica"


def make_pdf(path: Path, pages: int) -> dict[str, int]:
    """A mixed PDF: odd pages are scans (a gt image filling an A4 page, no text layer), even
    pages are born-digital text (a gt transcription typeset with reportlab, plus some rules)."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    gt = _gt_pages()
    step = max(1, len(gt) // max(1, (pages + 1) // 2))  # spread over every collection
    scans = gt[::step]
    font = _font()
    c = canvas.Canvas(str(path), pagesize=A4, pageCompression=1)
    counts = {"scan": 0, "text": 0}
    for i in range(pages):
        src_img, src_text = scans[(i // 2) % len(scans)]
        if i % 2 == 0:
            with Image.open(src_img) as im:
                im.load()
                if im.mode == "1":
                    im = im.convert("L")  # bitonal scans embed as 8-bit gray (Flate)
                w, h = im.size
                scale = min(A4[0] / w, A4[1] / h)
                dw, dh = w * scale, h * scale
                # JPEGs are embedded as they are (DCTDecode), like a scanner's PDF.
                reader = ImageReader(str(src_img)) if src_img.suffix.lower() == ".jpg" and im.mode != "L" \
                    else ImageReader(im)
                c.drawImage(reader, (A4[0] - dw) / 2, (A4[1] - dh) / 2, dw, dh)
            counts["scan"] += 1
        else:
            c.setFont(font, 14)
            c.drawString(56, A4[1] - 60, f"{src_img.parent.name} — {src_img.stem}")
            c.setLineWidth(0.5)
            c.line(56, A4[1] - 68, A4[0] - 56, A4[1] - 68)
            c.setFont(font, 10)
            y = A4[1] - 90
            lines = [ln for ln in src_text.splitlines() if ln.strip()] or ["(no text)"]
            k = 0
            while y > 60:
                c.drawString(56, y, lines[k % len(lines)][:95])
                y -= 13
                k += 1
            c.rect(56, 40, A4[0] - 112, 12)
            c.drawString(60, 43, f"page {i + 1}")
            counts["text"] += 1
        c.showPage()
    c.save()
    return counts


# ---------------------------------------------------------------- one page, each way

def vlmocr_page(path: str, page: int, sizing: Sizing, fmt: str) -> tuple[float, float, int, int]:
    """(render s, encode s, bytes, pixels) through vlmocr's own functions."""
    t0 = time.perf_counter()
    img = render_page(Path(path), page, sizing).image
    t1 = time.perf_counter()
    data = encode(img, fmt)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(data), img.width * img.height


def vlmocr_gray_page(path: str, page: int, sizing: Sizing, fmt: str) -> tuple[float, float, int, int]:
    """As vlmocr_page, but the image is converted to 8-bit gray before encoding: what a
    grayscale option would save (pdfium renders RGB even for a gray scan)."""
    t0 = time.perf_counter()
    img = render_page(Path(path), page, sizing).image
    t1 = time.perf_counter()
    data = encode(img.convert("L"), fmt)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(data), img.width * img.height


_raw_docs: dict[str, pdfium.PdfDocument] = {}


def raw_page(path: str, page: int, sizing: Sizing, fmt: str) -> tuple[float, float, int, int]:
    """Plain pypdfium2 + Pillow defaults (PNG compress_level=6), no vlmocr code."""
    t0 = time.perf_counter()
    pdf = _raw_docs.get(path)
    if pdf is None:
        pdf = _raw_docs[path] = pdfium.PdfDocument(path)
    pg = pdf[page - 1]
    w, h = pg.get_size()
    scale = sizing.longest_side / max(w, h) if sizing.longest_side else sizing.dpi / 72.0
    img = pg.render(scale=scale).to_pil()
    t1 = time.perf_counter()
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, len(buf.getvalue()), img.width * img.height


def pool_task(args: tuple[str, int, Sizing, str]) -> tuple[int, float]:
    """(bytes, CPU seconds this worker spent on the page)."""
    path, page, sizing, fmt = args
    c0 = time.process_time()
    n = len(encode(render_page(Path(path), page, sizing).image, fmt))
    return n, time.process_time() - c0


# ---------------------------------------------------------------- measuring

VARIANTS = [
    # name, function, sizing, format
    ("vlmocr 1288px PNG (level 1)", vlmocr_page, OLMOCR, "png"),
    ("raw    1288px PNG (Pillow default)", raw_page, OLMOCR, "png"),
    ("vlmocr 1288px JPEG q90", vlmocr_page, OLMOCR, "jpeg"),
    ("vlmocr 1288px PNG gray (L)", vlmocr_gray_page, OLMOCR, "png"),
    ("vlmocr 200dpi PNG (level 1)", vlmocr_page, DPI200, "png"),
    ("raw    200dpi PNG (Pillow default)", raw_page, DPI200, "png"),
    ("vlmocr 200dpi JPEG q90", vlmocr_page, DPI200, "jpeg"),
]
POOL_VARIANTS = [
    ("pool×2 1288px PNG (level 1)", OLMOCR, "png", "vlmocr 1288px PNG (level 1)"),
    ("pool×2 200dpi PNG (level 1)", DPI200, "png", "vlmocr 200dpi PNG (level 1)"),
]


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def pin_one_core() -> set[int] | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    return before


def unpin(before: set[int] | None) -> None:
    if before is not None:
        os.sched_setaffinity(0, before)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=40, help="pages in the generated PDF (half scans, half text)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; every variant runs once per round")
    ap.add_argument("--workers", type=int, default=2, help="pool size for the pool rows")
    ap.add_argument("--pdf", type=Path, help="use this PDF instead of generating one")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 pages, 1 round")
    args = ap.parse_args(argv)
    if args.quick:
        args.pages, args.rounds = 4, 1

    tmp = tempfile.TemporaryDirectory(prefix="bench_render_")
    if args.pdf:
        pdf_path = args.pdf
        desc = str(pdf_path)
    else:
        pdf_path = Path(tmp.name) / "mixed.pdf"
        counts = make_pdf(pdf_path, args.pages)
        desc = (f"generated {args.pages}-page PDF: {counts['scan']} image-only pages from {GT} "
                f"+ {counts['text']} born-digital reportlab pages, {pdf_path.stat().st_size / 1e6:.1f} MB")
    n_pages = len(pdfium.PdfDocument(str(pdf_path)))
    pages = list(range(1, n_pages + 1))

    print(f"# bench_render: {desc}")
    print(f"# python {platform.python_version()}, pypdfium2 {_version('pypdfium2')}, Pillow {Image.__version__}, "
          f"nproc {os.cpu_count()}, affinity {sorted(os.sched_getaffinity(0))}, rounds {args.rounds}")

    # Warm up: caches, lazy imports, the first-touch cost of pdfium.
    for _, fn, sizing, fmt in VARIANTS:
        fn(str(pdf_path), 1, sizing, fmt)

    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {name: [] for name, *_ in VARIANTS}  # wall pages/s per round
    rates.update({name: [] for name, *_ in POOL_VARIANTS})
    cpu: dict[str, list[float]] = {name: [] for name in rates}  # CPU s per page, per round
    busy: dict[str, list[float]] = {name: [] for name, *_ in POOL_VARIANTS}  # cores busy, per round
    # per variant: one (page, render s, encode s, bytes, pixels) tuple per page per round
    samples: dict[str, list[tuple[int, float, float, int, int]]] = {name: [] for name, *_ in VARIANTS}
    ctx = multiprocessing.get_context("forkserver")  # as vlmocr's own WorkerPool
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=ctx) as pool:
        # Warm every worker (imports, open PDF) before timing.
        list(pool.map(pool_task, [(str(pdf_path), p, OLMOCR, "png") for p in pages[: 2 * args.workers]]))
        for rnd in range(args.rounds):
            order = VARIANTS if rnd % 2 == 0 else list(reversed(VARIANTS))
            saved = pin_one_core()
            try:
                for name, fn, sizing, fmt in order:
                    t0, c0 = time.perf_counter(), time.process_time()
                    for p in pages:
                        samples[name].append((p, *fn(str(pdf_path), p, sizing, fmt)))
                    rates[name].append(len(pages) / (time.perf_counter() - t0))
                    cpu[name].append((time.process_time() - c0) / len(pages))
            finally:
                unpin(saved)
            for name, sizing, fmt, _ in POOL_VARIANTS:
                t0 = time.perf_counter()
                done = list(pool.map(pool_task, [(str(pdf_path), p, sizing, fmt) for p in pages]))
                wall = time.perf_counter() - t0
                rates[name].append(len(pages) / wall)
                cpu[name].append(sum(c for _, c in done) / len(pages))
                busy[name].append(sum(c for _, c in done) / wall)
    load_after = os.getloadavg()

    med = {name: statistics.median(v) for name, v in rates.items()}
    cpu_ms = {name: statistics.median(v) * 1e3 for name, v in cpu.items()}

    def mean_of(name: str, col: int, kind: str | None = None) -> float:
        rows = samples[name]
        if kind == "scan":
            rows = [r for r in rows if r[0] % 2 == 1]
        elif kind == "text":
            rows = [r for r in rows if r[0] % 2 == 0]
        if col == 0:  # render + encode
            return statistics.mean(r[1] + r[2] for r in rows)
        return statistics.mean(r[col] for r in rows)

    by_kind = not args.pdf  # the generated PDF alternates scan (odd) and text (even) pages
    print(f"# load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (a busy machine lowers wall-clock "
          f"rates and pool scaling; CPU ms/page is what a free core would see)")
    print()
    print("| variant | pages/s wall (median) | min–max | CPU ms/page | pages/s per CPU-s | render ms/page "
          "| encode ms/page | scan page ms | text page ms | KB/page | MP/page |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, *_ in VARIANTS:
        kinds = (f"{mean_of(name, 0, 'scan') * 1e3:.1f} | {mean_of(name, 0, 'text') * 1e3:.1f}"
                 if by_kind else " | ")
        print(f"| {name} | {med[name]:.2f} | {min(rates[name]):.2f}–{max(rates[name]):.2f} | {cpu_ms[name]:.1f} "
              f"| {1e3 / cpu_ms[name]:.2f} | {mean_of(name, 1) * 1e3:.1f} | {mean_of(name, 2) * 1e3:.1f} | {kinds} "
              f"| {mean_of(name, 3) / 1024:.0f} | {mean_of(name, 4) / 1e6:.2f} |")
    for name, *_ in POOL_VARIANTS:
        print(f"| {name} | {med[name]:.2f} | {min(rates[name]):.2f}–{max(rates[name]):.2f} | {cpu_ms[name]:.1f} "
              f"| {1e3 / cpu_ms[name]:.2f} | | | | | | |")

    def ratio(a: str, b: str) -> float:
        return med[a] / med[b]

    def size_ratio(a: str, b: str) -> float:
        return mean_of(a, 3) / mean_of(b, 3)

    def enc_ratio(a: str, b: str) -> float:
        return mean_of(b, 2) / mean_of(a, 2)

    print()
    for tag in ("1288px", "200dpi"):
        v, r, j = (f"vlmocr {tag} PNG (level 1)", f"raw    {tag} PNG (Pillow default)", f"vlmocr {tag} JPEG q90")
        print(f"RESULT {tag}: one core {med[v]:.2f} pages/s ({med[v] * 3600:,.0f} pages/h; {1e3 / cpu_ms[v]:.2f} per CPU-s) "
              f"with vlmocr PNG; vs raw pypdfium2+Pillow-default PNG ×{ratio(v, r):.2f} pages/s, "
              f"encode ×{enc_ratio(v, r):.2f} faster, bytes ×{size_ratio(v, r):.2f}; "
              f"JPEG q90 ×{ratio(j, v):.2f} pages/s, bytes ×{size_ratio(j, v):.2f}")
    g, v = "vlmocr 1288px PNG gray (L)", "vlmocr 1288px PNG (level 1)"
    print(f"RESULT 1288px gray: PNG of the 8-bit gray image ×{ratio(g, v):.2f} pages/s "
          f"(CPU ×{cpu_ms[v] / cpu_ms[g]:.2f}), bytes ×{size_ratio(g, v):.2f} of RGB PNG")
    for name, _, _, single in POOL_VARIANTS:
        per_round = [p / s for p, s in zip(rates[name], rates[single])]
        print(f"RESULT {name.split(' ', 1)[1]}: pool of {args.workers} workers {med[name]:.2f} pages/s, "
              f"scaling ×{statistics.median(per_round):.2f} over one core (median of rounds; best ×{max(per_round):.2f}; "
              f"ideal ×{args.workers}), {statistics.median(busy[name]):.2f} cores busy, "
              f"CPU per page ×{cpu_ms[name] / cpu_ms[single]:.2f} of one core's")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

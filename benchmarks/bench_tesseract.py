#!/usr/bin/env python3
"""Figure 4: the embedded Tesseract engine against OCRmyPDF and the bare `tesseract` CLI.

The same real pages (English typewritten scans with .txt truth, ../shared/gt/ehri_en, the first
10 in sorted order) go through three contenders, side by side in one script, in interleaved
rounds (the order rotates every round), all with OMP_THREAD_LIMIT=1 and N = --workers (2):

  * vlmocr   `vlmocr run PAGES... --out RUN --engine tesseract --lang eng --workers N`
             (a fresh --out every round). pages.jsonl is polled every 10 ms, so the time to
             the first page record (start-up + one page) and the per-page finish times are known.
  * ocrmypdf `ocrmypdf -j N --sidecar out.txt --output-type pdf --force-ocr IN.pdf OUT.pdf` on
             one multi-page PDF made from the same JPEGs at their native resolution (img2pdf:
             lossless, the JPEG stream is embedded as is); the sidecar is split on form feeds.
  * bare     `tesseract IMG OUT -l eng`, N at a time (a pool of N threads that each run one
             subprocess at a time, i.e. `xargs -P N`): the physical limit for this engine.

For each: end-to-end pages/min (wall clock from launch to exit), time to first page, steady
pages/min ((pages - 1) / (last finish - first finish), vlmocr and bare only), and CER
(`vlmocr.evaluation.cer`) against each page's .txt. Medians over rounds; ratios to the bare CLI.

A diagnosis pass follows (skipped with --quick or --no-diagnose): the bare CLI fed what
vlmocr feeds it (its --dpi hint, and the PNG pytesseract writes), to attribute any CER gap,
and the in-process cost per page of what vlmocr adds around the tesseract process.

    python benchmarks/bench_tesseract.py            # 10 pages, 3 rounds + diagnosis
    python benchmarks/bench_tesseract.py --quick    # smoke run: 2 pages, 1 round
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from vlmocr.evaluation import cer

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt")) / "ehri_en"
ENV = {**os.environ, "OMP_THREAD_LIMIT": "1"}


def vlmocr_cmd() -> list[str]:
    """The installed entry point next to this interpreter (not a pyenv shim, which adds ~50 ms)."""
    exe = Path(sys.executable).parent / "vlmocr"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "vlmocr"]


def pages(n: int) -> list[tuple[Path, str]]:
    pairs = [(p, p.with_suffix(".txt").read_text(encoding="utf-8")) for p in sorted(GT.glob("*.jpg"))]
    if len(pairs) < n:
        sys.exit(f"need {n} pages with truth under {GT}, found {len(pairs)}")
    return pairs[:n]


def make_pdf(imgs: list[Path], out: Path) -> str:
    """One multi-page PDF at the images' native resolution. img2pdf embeds each JPEG as is."""
    if shutil.which("img2pdf"):
        subprocess.run(["img2pdf", *map(str, imgs), "-o", str(out)], check=True)
        return "img2pdf"
    from PIL import Image  # fallback: re-encodes, and one resolution for all pages

    ims = [Image.open(p).convert("RGB") for p in imgs]
    ims[0].save(out, save_all=True, append_images=ims[1:], resolution=float(ims[0].info.get("dpi", (300,))[0]))
    return "Pillow"


# ---------------------------------------------------------------- contenders

def run_vlmocr(imgs: list[Path], work: Path, n: int) -> dict:
    out = work / "run"
    cmd = [*vlmocr_cmd(), "run", *map(str, imgs), "--out", str(out), "--engine", "tesseract",
           "--lang", "eng", "--workers", str(n)]
    jsonl = out / "pages.jsonl"
    finishes: list[float] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = 0
    while True:
        done = proc.poll() is not None
        try:
            with jsonl.open("rb") as fh:
                now_lines = fh.read().count(b"\n")
        except FileNotFoundError:
            now_lines = 0
        t = time.perf_counter() - t0
        finishes += [t] * (now_lines - lines)
        lines = now_lines
        if done:
            break
        time.sleep(0.01)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"vlmocr exited {proc.returncode}: {stderr[-2000:]}")
    texts, dpis = {}, {}
    for line in jsonl.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        texts[rec["source"]] = rec["text"]
        dpis[rec["source"]] = rec.get("dpi")
    return {"wall": wall, "finishes": finishes, "texts": [texts[str(p)] for p in imgs],
            "dpis": [dpis[str(p)] for p in imgs]}


def run_bare(imgs: list[Path], work: Path, n: int, extra: list[str] | None = None,
             inputs: list[Path] | None = None) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    inputs = inputs or imgs
    t0 = time.perf_counter()
    finishes: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        base = work / f"p{i:03d}"
        cmd = ["tesseract", str(inputs[i]), str(base), "-l", "eng", *(extra[i] if extra else [])]
        subprocess.run(cmd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with lock:
            finishes.append(time.perf_counter() - t0)

    with ThreadPoolExecutor(n) as pool:
        list(pool.map(one, range(len(imgs))))
    wall = time.perf_counter() - t0
    texts = [(work / f"p{i:03d}.txt").read_text(encoding="utf-8").strip("\n\x0c") for i in range(len(imgs))]
    return {"wall": wall, "finishes": sorted(finishes), "texts": texts}


def run_ocrmypdf(pdf: Path, npages: int, work: Path, n: int) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    side, outpdf = work / "out.txt", work / "out.pdf"
    cmd = ["ocrmypdf", "-j", str(n), "--sidecar", str(side), "--output-type", "pdf", "--force-ocr",
           str(pdf), str(outpdf)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"ocrmypdf exited {proc.returncode}: {proc.stderr[-2000:]}")
    parts = side.read_text(encoding="utf-8").split("\f")
    texts = [p.strip("\n") for p in parts[:npages]]
    if len(texts) != npages:
        raise RuntimeError(f"ocrmypdf sidecar has {len(parts)} parts for {npages} pages")
    return {"wall": wall, "finishes": [], "texts": texts}


# ---------------------------------------------------------------- report

def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarise(name: str, runs: list[dict], refs: list[str]) -> dict:
    n = len(refs)
    walls = [r["wall"] for r in runs]
    ttfp = [r["finishes"][0] for r in runs if r["finishes"]]
    steady = [(n - 1) * 60 / (r["finishes"][-1] - r["finishes"][0]) for r in runs
              if len(r["finishes"]) == n and n > 1 and r["finishes"][-1] > r["finishes"][0]]
    cers = [cer(h, ref) for h, ref in zip(runs[-1]["texts"], refs)]
    total_err = sum(cer(h, ref) * len(ref) for h, ref in zip(runs[-1]["texts"], refs))  # ≈ char-weighted
    stable = all(r["texts"] == runs[0]["texts"] for r in runs)
    return {"name": name, "wall": med(walls), "walls": walls, "ppm": n * 60 / med(walls),
            "ttfp": med(ttfp), "steady": med(steady), "cer_mean": statistics.mean(cers),
            "cer_median": med(cers), "cers": cers, "stable": stable,
            "cer_pooled": total_err / sum(len(r) for r in refs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 2 pages, 1 round, no diagnosis")
    ap.add_argument("--pages", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-diagnose", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.pages, args.rounds, args.no_diagnose = 2, 1, True
    for tool in ("tesseract", "ocrmypdf"):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found (Debian: apt-get install -y tesseract-ocr ocrmypdf img2pdf)")

    pairs = pages(args.pages)
    imgs, refs = [p for p, _ in pairs], [t for _, t in pairs]
    n = args.workers
    tess_ver = subprocess.run(["tesseract", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    ocrm_ver = subprocess.run(["ocrmypdf", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# {len(imgs)} pages from {GT}, {args.rounds} rounds, N={n}, {tess_ver}, ocrmypdf {ocrm_ver}, "
          f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench_tess_") as tmp:
        tmp = Path(tmp)
        pdf = tmp / "in.pdf"
        maker = make_pdf(imgs, pdf)
        contenders = {
            "vlmocr": lambda w: run_vlmocr(imgs, w, n),
            "ocrmypdf": lambda w: run_ocrmypdf(pdf, len(imgs), w, n),
            "bare tesseract CLI": lambda w: run_bare(imgs, w, n),
        }
        names = list(contenders)
        results: dict[str, list[dict]] = {k: [] for k in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                res = contenders[name](tmp / f"r{r}_{name.split()[0]}")
                results[name].append(res)
                print(f"round {r + 1} {name}: {res['wall']:.2f} s"
                      + (f", first page {res['finishes'][0]:.2f} s" if res["finishes"] else "")
                      + f" (load {os.getloadavg()[0]:.2f})", flush=True)

        rows = [summarise(k, results[k], refs) for k in names]
        bare = rows[names.index("bare tesseract CLI")]
        vl = rows[names.index("vlmocr")]
        om = rows[names.index("ocrmypdf")]
        # vlmocr's start-up: its time to first page minus the bare CLI's (one page either way).
        startup = vl["ttfp"] - bare["ttfp"]
        steady_e2e = len(imgs) * 60 / (vl["wall"] - startup)

        print(f"\nPDF for OCRmyPDF made with {maker}")
        print("| contender | pages | wall s (median) | pages/min end-to-end | × bare CLI | first page s | "
              "pages/min steady | × bare CLI (steady) | CER mean | CER median | CER pooled |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            fp = f"{row['ttfp']:.2f}" if row["ttfp"] == row["ttfp"] else "–"
            st = f"{row['steady']:.1f}" if row["steady"] == row["steady"] else "–"
            xs = f"{row['steady'] / bare['steady']:.2f}" if row["steady"] == row["steady"] else "–"
            print(f"| {row['name']} | {len(imgs)} | {row['wall']:.2f} | {row['ppm']:.1f} | {row['ppm'] / bare['ppm']:.2f} "
                  f"| {fp} | {st} | {xs} | {row['cer_mean']:.4f} | {row['cer_median']:.4f} | {row['cer_pooled']:.4f} |")
        print()
        print("per-page CER (last round):")
        print("| page | vlmocr dpi hint | " + " | ".join(names) + " |")
        print("|---|---:|" + "---:|" * len(names))
        for i, p in enumerate(imgs):
            print(f"| {p.stem} | {results['vlmocr'][-1]['dpis'][i]} | "
                  + " | ".join(f"{row['cers'][i]:.4f}" for row in rows) + " |")
        print()
        for row in rows:
            print(f"RESULT {row['name']}: {row['ppm']:.1f} pages/min end-to-end (walls "
                  + ", ".join(f"{w:.2f}" for w in row["walls"]) + f" s), CER mean {row['cer_mean']:.4f}, "
                  f"same text every round: {row['stable']}")
        print(f"RESULT vlmocr ÷ bare CLI: {vl['ppm'] / bare['ppm']:.3f} end-to-end (goal ≥ 0.95), "
              f"{vl['steady'] / bare['steady']:.3f} steady (first→last page)")
        print(f"RESULT vlmocr ÷ OCRmyPDF: {vl['ppm'] / om['ppm']:.3f} end-to-end (goal ≥ 1.25)")
        print(f"RESULT vlmocr start-up (first page {vl['ttfp']:.2f} s − bare CLI first page {bare['ttfp']:.2f} s): "
              f"{startup:.2f} s; vlmocr without it: {steady_e2e:.1f} pages/min = "
              f"{steady_e2e / bare['ppm']:.3f} × bare CLI")
        print(f"RESULT bare CLI ÷ OCRmyPDF: {bare['ppm'] / om['ppm']:.3f}")

        if not args.no_diagnose:
            diagnose(imgs, refs, results, tmp, n)


def diagnose(imgs: list[Path], refs: list[str], results: dict, tmp: Path, n: int) -> None:
    """Attribute a CER gap: bare CLI with vlmocr's --psm/--dpi hint, then on the PNG pytesseract
    writes; and the in-process cost per page of vlmocr's render + pytesseract's temp PNG."""
    from PIL import Image

    from vlmocr.inputs.render import Sizing, render_page

    dpis = results["vlmocr"][-1]["dpis"]
    hints = [["--psm", "3", "--dpi", str(int(d) if d else 300)] for d in dpis]
    print("\n## diagnosis")
    variants = {"bare CLI, JPEG": results["bare tesseract CLI"][-1]}
    variants["bare CLI, JPEG + vlmocr's --psm 3 --dpi hint"] = run_bare(imgs, tmp / "d_hint", n, extra=hints)
    pngs, t_render, t_png, t_sha = [], [], [], []
    for i, p in enumerate(imgs):
        t0 = time.perf_counter()
        img = render_page(p, 1, Sizing()).image
        t1 = time.perf_counter()
        out = tmp / f"d_png_{i:03d}.png"
        img.save(out, format="PNG")  # what pytesseract.save() does (default compress_level)
        t2 = time.perf_counter()
        hashlib.sha256(img.tobytes()).hexdigest()
        t3 = time.perf_counter()
        t_render.append(t1 - t0), t_png.append(t2 - t1), t_sha.append(t3 - t2)
        pngs.append(out)
    variants["bare CLI, pytesseract's PNG + --dpi hint (= vlmocr's tesseract call)"] = run_bare(
        imgs, tmp / "d_png", n, extra=hints, inputs=pngs)
    variants["vlmocr"] = results["vlmocr"][-1]
    print("| variant | wall s | CER mean | per-page CER |")
    print("|---|---:|---:|---|")
    for name, res in variants.items():
        cers = [cer(h, r) for h, r in zip(res["texts"], refs)]
        print(f"| {name} | {res['wall']:.2f} | {statistics.mean(cers):.4f} | " + " ".join(f"{c:.3f}" for c in cers) + " |")
    same = sum(a == b for a, b in zip(variants["vlmocr"]["texts"], variants[list(variants)[2]]["texts"]))
    print(f"\nRESULT vlmocr text identical to the bare CLI on pytesseract's PNG + hint: {same}/{len(imgs)} pages")
    print(f"RESULT in-process per page (one core): render_page {1000 * med(t_render):.0f} ms, "
          f"PNG save {1000 * med(t_png):.0f} ms, sha256 of pixels {1000 * med(t_sha):.0f} ms (medians)")
    print("RESULT image sizes: " + ", ".join(f"{Image.open(p).size[0]}x{Image.open(p).size[1]}" for p in imgs))


if __name__ == "__main__":
    main()

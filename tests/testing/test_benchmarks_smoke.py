"""The benchmark scripts still run: each in --quick mode as a subprocess, checked for its result
lines. Nothing here is timed; the numbers live in BENCHMARKS.md."""

from __future__ import annotations

import os
import subprocess
import sys

from support.components import GT, REPO

BENCH = REPO / "benchmarks"


def run_bench(name: str, *args: str, timeout: float = 300) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCH / name), "--quick", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False,
        env={**os.environ, "VLMOCR_GT": str(GT)},  # the pages in the repository, never ../shared/gt
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_bench_render_quick() -> None:
    out = run_bench("bench_render.py")
    results = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert any(ln.startswith("RESULT 1288px: one core ") and "pages/s" in ln for ln in results), out
    assert any(ln.startswith("RESULT 200dpi: one core ") for ln in results), out
    assert sum("scaling ×" in ln for ln in results) == 2, out
    assert "| vlmocr 1288px PNG (level 1) |" in out and "| raw    200dpi PNG (Pillow default) |" in out


def test_bench_slurm_status_quick(tmp_path) -> None:
    out = run_bench("bench_slurm_status.py", "--workdir", str(tmp_path))
    assert "RESULT slurm status: " in out and "at 4 shards × 500 records" in out, out
    # The benchmark exits non-zero unless both paths report the same totals; the summaries are
    # the ones real `vlmocr run`s wrote.
    assert (tmp_path / "run-4x500" / "shards" / "1" / "summary.json").exists()


def test_bench_resume_quick(tmp_path) -> None:
    out = run_bench("bench_resume.py", "--workdir", str(tmp_path))
    assert "RESULT resume wall: " in out and "RESULT resume RSS: " in out, out
    assert "| nothing to do, 2,000 records |" in out, out
    # The benchmark exits non-zero unless every run said "Nothing to do" with all records found.
    assert (tmp_path / "run-2000" / "run.json").exists()


def test_bench_scale_quick() -> None:
    """Issue 27, point 4: resume, report, evaluate and export on run folders of 200 and 2 000 records."""
    out = run_bench("bench_scale.py")
    for name in ("resume", "report", "evaluate", "export", "clean"):
        for n in (200, 2000):
            assert f"RESULT scale {name} {n}: " in out, out
        assert f"RESULT scale {name} RSS ×" in out, out


def test_bench_pages_as_scanned_quick() -> None:
    out = run_bench("bench_pages_as_scanned.py", timeout=600)
    assert "RESULT tesseract: worst turned" in out and "RESULT cost on 1 upright pages" in out


def test_bench_formats_quick() -> None:
    """Issue 29: the four library formats' cost beside the reading, and the share of words aligned."""
    out = run_bench("bench_formats.py", timeout=600)
    assert "RESULT formats: all four" in out and "RESULT aligned: truth as the VLM's answer" in out, out
    assert "RESULT unshared run: truth as the VLM's answer" in out, out
    assert "| pdf |" in out and "| alto |" in out


def test_bench_upright_quick() -> None:
    """Issue 33: OSD's second opinion on the repository's pages with an image, four turns each."""
    out = run_bench("bench_upright.py", timeout=600)
    assert "RESULT upright: OSD sure on " in out and "RESULT upright cost: classifier ÷ OSD " in out, out
    # The Danish typescript OSD takes for upside down (tests/data/gt) is turned over by OSD alone, not once checked.
    assert "RESULT upright turned over: OSD alone 1, checked 0" in out, out


def test_bench_cascade_quick() -> None:
    """Issue 30, point 4: `auto`, the cascade and Tesseract run as a user runs them, then a VLM
    tier after each that takes every CPU reading from its run (none read again)."""
    out = run_bench("bench_cascade.py", timeout=900)
    assert "RESULT cascade: CER " in out and "| `tesseract,rapidocr` |" in out, out
    assert "RESULT bound: a switch that knew the truth would send " in out, out
    for name in ("auto", "cascade", "tesseract"):
        assert f"VLM tier after {name}: " in out, out
        assert "'taken': 2, 'read_again': 0" in out.split(f"VLM tier after {name}: ")[1].splitlines()[0], out


def test_bench_ocrmypdf_quick() -> None:
    """Issue 50: vlmocr's default and OCRmyPDF on the same image-only PDFs (the repository's pages
    with an image), each read for real, with each contender's CER and the ratios."""
    out = run_bench("bench_ocrmypdf.py", timeout=600)
    results = {ln.split(":")[0]: ln for ln in out.splitlines() if ln.startswith("RESULT ")}
    assert {"RESULT vlmocr", "RESULT ocrmypdf", "RESULT vlmocr ÷ OCRmyPDF"} <= set(results), out
    for name in ("vlmocr", "ocrmypdf"):
        cer = float(results[f"RESULT {name}"].split("CER ")[1].split(" %")[0])
        assert 0 < cer < 30, out  # read, not empty: every page has its truth
    header = next(ln for ln in out.splitlines() if ln.startswith("| contender |"))
    assert all(f"| {s} " in header for s in ("goethe", "zonaras", "ehri_en", "ehri_da")), out  # a column a set
    assert "| vlmocr |" in out and "| ocrmypdf |" in out, out


def test_bench_degraded_quick(tmp_path) -> None:
    """Issue 49, point 4: the repository's pages degraded reproducibly (here: the verso bleeding
    through) and read as a user reads them, with the repair and without it (`--repair off`) side
    by side, each condition against the same pages clean."""
    keep = tmp_path / "kept"
    out = run_bench("bench_degraded.py", "--keep", str(keep), timeout=600)
    for row in ("| clean | auto |", "| bleed | auto |", "| clean | auto, no repair |", "| bleed | auto, no repair |"):
        assert row in out, out
    assert "RESULT auto: clean CER " in out and "RESULT auto, no repair: clean CER " in out, out
    # Reproducible: the same pages and condition give the same pixels.
    from PIL import Image

    bled = sorted((keep / "bleed").glob("*.png"))
    assert bled and all(Image.open(p).size == Image.open(keep / "clean" / p.name).size for p in bled)
    again = tmp_path / "again"
    run_bench("bench_degraded.py", "--keep", str(again), "--images-only")
    assert all(p.read_bytes() == (again / "bleed" / p.name).read_bytes() for p in bled)


def test_a_benchmark_reads_again_what_its_cache_holds_from_other_settings_or_code(tmp_path):
    """benchmarks/gt_reading.py keys every cached reading by the engine's settings and what made
    it (versions, vlmocr's code): a reading made otherwise is read again, and RESULT says how many
    came from the cache."""
    import csv
    import json
    import shutil

    pages = tmp_path / "gt"
    with open(GT / "pages.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["name"] in ("goethe_0014", "zonaras_0054")]
    for r in rows:
        for kind in ("image", "truth"):
            (pages / r[kind]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(GT / r[kind], pages / r[kind])
    with open(pages / "pages.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    cache = tmp_path / "readings.json"

    def bench() -> str:
        proc = subprocess.run([sys.executable, str(BENCH / "bench_signal.py"), "--engines", "tesseract",
                               "--cache", str(cache)], capture_output=True, text=True, timeout=300, cwd=REPO,
                              env={**os.environ, "VLMOCR_GT": str(pages)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        (result,) = [line for line in proc.stdout.splitlines() if line.startswith("RESULT tesseract")]
        return result

    assert bench().endswith("[readings: 0 from the cache, 2 read now]")
    assert bench().endswith("[readings: 2 from the cache, 0 read now]")
    keys = list(json.loads(cache.read_text(encoding="utf-8")))
    assert len(keys) == 2 and all(k.startswith("tesseract#") for k in keys)
    # The same readings as if made by another Tesseract or other vlmocr code: not taken.
    cache.write_text(json.dumps({k.replace("#", "#another-", 1): v
                                 for k, v in json.loads(cache.read_text(encoding="utf-8")).items()}), encoding="utf-8")
    assert bench().endswith("[readings: 0 from the cache, 2 read now]")

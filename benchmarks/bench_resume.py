#!/usr/bin/env python3
"""Resume at scale: how long `vlmocr run` takes to find that there is nothing to do, and how
much memory it needs for it, with 1 000 and with 100 000 finished page records.

Goal (issue 2): "Nothing to do" in under 3 s at 100 000 records; peak RSS at 100 000 records
≤ 1.2 × peak RSS at 1 000 records.

For each size the benchmark builds, once:

  in-N/doc0000.pdf …    N/100 hard links to ONE real 100-page PDF (reportlab, text pages)
  run-N/pages.jsonl     N finished records: `vlmocr.runfolder.record.PageRecord(...).to_json_dict()`
                        written with `vlmocr.runfolder.store.RecordWriter`, ~1.5 KB of real transcription
                        text each (../shared/gt), status ok, engine textlayer, doc_pages 100
  run-N/docs/<id>.md    assembled with `vlmocr.runfolder.assemble.write_document`, so nothing is owed

`doc_id` and `source` come from `vlmocr.inputs.sources.discover` and the settings key from
`RunPlan(RunConfig(engine="textlayer")).settings_key()` (vlmocr.reading.plan): exactly what `vlmocr run` derives.

Then it runs `vlmocr run in-N --out run-N --engine textlayer` as a subprocess, once per size to
warm the page cache and write run.json, then `--repeats` rounds of (small, large, large with pages.jsonl evicted from the page cache)
side by side (order alternating), measuring the wall time until exit and the child's peak RSS (os.wait4
rusage of that child alone). Each run must exit 0 and print "Nothing to do".

    python benchmarks/bench_resume.py                       # 1 000 vs 100 000 records, 3 repeats
    python benchmarks/bench_resume.py --quick               # smoke run: 200 vs 2 000, 1 repeat
    python benchmarks/bench_resume.py --workdir /tmp/br --keep --profile   # keep data, cProfile
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vlmocr.inputs.sources import discover
from vlmocr.reading.plan import RunPlan
from vlmocr.runfolder.assemble import write_document
from vlmocr.runfolder.record import PageRecord, Row, Status
from vlmocr.runfolder.store import PAGES_FILE, RecordWriter
from vlmocr.settings.config import RunConfig

REPO = Path(__file__).resolve().parent.parent
GT = Path(os.environ.get("VLMOCR_GT", REPO.parent / "shared" / "gt"))
PAGES_PER_DOC = 100
READY = ".bench_ready"  # written last: a half-built directory is rebuilt, never measured


# ---------------------------------------------------------------- building a finished run

def corpus_text() -> str:
    """Real transcriptions (Fraktur German, Greek, typewritten EN/DE/CS/DA/FR) to slice from."""
    parts = [p.read_text(encoding="utf-8") for p in sorted(GT.glob("*/*.txt"))]
    text = "\n".join(parts)
    if len(text) < 20_000:  # no ground truth here: fall back to something text-like
        text = " ".join(f"Zeile {i}: Die Grenzboten, Zeitschrift für Politik und Literatur." for i in range(2000))
    return text


def make_pdf(path: Path, pages: int) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for p in range(1, pages + 1):
        c.setFont("Helvetica", 11)
        c.drawString(72, 780, f"Benchmark document, page {p}")
        c.drawString(72, 760, "The quick brown fox jumps over the lazy dog.")
        c.showPage()
    c.save()


def build(base: Path, records: int, master_pdf: Path, text: str, text_bytes: int) -> tuple[Path, Path]:
    """in-N/ and run-N/ for N records (reused when already complete)."""
    inputs, run_dir = base / f"in-{records}", base / f"run-{records}"
    if (run_dir / READY).exists() and inputs.is_dir():
        return inputs, run_dir
    shutil.rmtree(inputs, ignore_errors=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    inputs.mkdir(parents=True)
    n_docs = records // PAGES_PER_DOC
    for d in range(n_docs):
        target = inputs / f"doc{d:05d}.pdf"
        try:
            os.link(master_pdf, target)
        except OSError:
            shutil.copyfile(master_pdf, target)

    cfg = RunConfig(inputs=[str(inputs)], out=run_dir, engine="textlayer")
    docs = discover(cfg.inputs, cfg.manifest)  # the doc_id and source `vlmocr run` will derive
    assert len(docs) == n_docs, (len(docs), n_docs)
    t0 = time.perf_counter()
    span = len(text) - text_bytes - 1
    with RecordWriter(run_dir / PAGES_FILE) as writer:
        for i, doc in enumerate(docs):
            key = RunPlan(cfg).settings_key(doc.dpi)
            recs = []
            for page in range(1, PAGES_PER_DOC + 1):
                start = ((i * PAGES_PER_DOC + page) * 7919) % span
                rec = PageRecord(
                    doc_id=doc.doc_id, source=doc.source, page=page, doc_pages=PAGES_PER_DOC, key=key,
                    status=Status.ok, text=text[start:start + text_bytes], engine="textlayer",
                    finish_reason="stop", seconds=0.0123, flags=["textlayer"],
                ).to_json_dict()
                writer.append(rec)
                recs.append(Row.of(rec))
            write_document(run_dir, doc.doc_id, recs)
    (run_dir / READY).write_text(f"{records}\n")
    size = (run_dir / PAGES_FILE).stat().st_size
    print(f"# built {records:,} records in {n_docs:,} docs: pages.jsonl {size / 1e6:.0f} MB "
          f"({size / records:,.0f} B/record), {time.perf_counter() - t0:.1f} s", flush=True)
    return inputs, run_dir


# ---------------------------------------------------------------- measuring

def vlmocr_command() -> list[str]:
    exe = Path(sys.executable).with_name("vlmocr")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("vlmocr")
    return [found] if found else [sys.executable, "-m", "vlmocr"]


def clean_env() -> dict[str, str]:
    """The settings key must not pick up a VLMOCR_* setting from the caller's environment."""
    return {k: v for k, v in os.environ.items() if not k.startswith("VLMOCR_")}


def measure(argv: list[str], timeout: float = 600) -> tuple[float, float, float, int, str]:
    """(wall s, peak RSS MiB, CPU s, exit code, stdout+stderr) of one fresh child process."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=clean_env())
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, proc.returncode, text


def evict(run_dir: Path) -> None:
    """Drop pages.jsonl (only that file) from the page cache: a resubmitted job on a fresh node."""
    fd = os.open(run_dir / PAGES_FILE, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run_argv(inputs: Path, run_dir: Path) -> list[str]:
    return [*vlmocr_command(), "run", str(inputs), "--out", str(run_dir), "--engine", "textlayer"]


def check(records: int, result: tuple[float, float, float, int, str]) -> None:
    code, text = result[3], result[4]
    done = [ln for ln in text.splitlines() if ln.startswith("Done:")]
    if code != 0 or "Nothing to do" not in text or not done or f"records={records} " not in done[-1]:
        sys.exit(f"vlmocr run at {records} records did not find 'nothing to do' (exit {code}):\n{text[-3000:]}")


def profile(inputs: Path, run_dir: Path, top: int) -> None:
    """cProfile one nothing-to-do run in a child, print where the time goes."""
    prof = run_dir.parent / f"resume-{run_dir.name}.prof"
    argv = [sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "vlmocr", "run", str(inputs),
            "--out", str(run_dir), "--engine", "textlayer"]
    subprocess.run(argv, capture_output=True, env=clean_env(), check=False)
    buf = io.StringIO()
    stats = pstats.Stats(str(prof), stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    buf.write("\n--- by own time ---\n")
    stats.sort_stats("tottime").print_stats(top)
    print(f"\n# cProfile of `vlmocr run` at {run_dir.name} (saved to {prof})")
    print(buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000, help="records in the large run (multiple of 100)")
    ap.add_argument("--small", type=int, default=1_000, help="records in the small run (multiple of 100)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--text-bytes", type=int, default=1500, help="characters of text per record")
    ap.add_argument("--workdir", type=Path, help="build here and reuse on the next call (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--profile", action="store_true", help="cProfile one run at the large size")
    ap.add_argument("--quick", action="store_true", help="smoke run: 200 vs 2 000 records, 1 repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.small, args.repeats = 2_000, 200, 1
    for n in (args.records, args.small):
        if n <= 0 or n % PAGES_PER_DOC:
            ap.error(f"record counts must be positive multiples of {PAGES_PER_DOC}")

    tmp = None
    if args.workdir:
        base = args.workdir.resolve()
        base.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="bench_resume_")
        base = Path(tmp)
    try:
        master = base / "master-100p.pdf"
        if not master.exists():
            make_pdf(master, PAGES_PER_DOC)
        text = corpus_text()
        sizes = {"small": args.small, "large": args.records}
        dirs = {name: build(base, n, master, text, args.text_bytes) for name, n in sizes.items()}

        cmd = " ".join(run_argv(*dirs["large"])).replace(str(base), "$W")
        print(f"# python {platform.python_version()}, nproc {os.cpu_count()}, command: {cmd}", flush=True)
        baseline_argv = [*vlmocr_command(), "run", "--help"]  # interpreter + every import of the CLI
        for name in ("small", "large"):  # warm-up: page cache, run.json; and the key check
            check(sizes[name], measure(run_argv(*dirs[name])))
        measure(baseline_argv)

        load_before = os.getloadavg()
        results: dict[str, list[tuple[float, float, float]]] = {"small": [], "large": [], "cold": [], "imports": []}
        for rep in range(args.repeats):
            order = ["small", "large", "cold"] if rep % 2 == 0 else ["cold", "large", "small"]
            for name in order:
                size = "large" if name == "cold" else name
                if name == "cold":
                    evict(dirs[size][1])
                res = measure(run_argv(*dirs[size]))
                check(sizes[size], res)
                results[name].append(res[:3])
            results["imports"].append(measure(baseline_argv)[:3])
        load_after = os.getloadavg()

        med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in results.items()}
        print(f"# load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
              f"(CPU s = user+sys of the child: what a free core would take)")
        print()
        print("| run | records | wall s (median) | wall min–max | CPU s (median) | peak RSS MiB (median) | RSS min–max |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        labels = {"small": f"nothing to do, {args.small:,} records", "large": f"nothing to do, {args.records:,} records",
                  "cold": f"nothing to do, {args.records:,} records, pages.jsonl not in page cache",
                  "imports": "`vlmocr run --help` (startup floor)"}
        counts = {"small": f"{args.small:,}", "large": f"{args.records:,}", "cold": f"{args.records:,}", "imports": "–"}
        for k in ("small", "large", "cold", "imports"):
            ws = [x[0] for x in results[k]]
            rs = [x[1] for x in results[k]]
            print(f"| {labels[k]} | {counts[k]} | {med[k][0]:.2f} | {min(ws):.2f}–{max(ws):.2f} | {med[k][2]:.2f} "
                  f"| {med[k][1]:.1f} | {min(rs):.1f}–{max(rs):.1f} |")
        print()
        wall_l, rss_l, cpu_l = med["large"]
        wall_s, rss_s, _ = med["small"]
        rss_ratio = rss_l / rss_s
        print(f"RESULT resume wall: {wall_l:.2f} s at {args.records:,} records (goal < 3 s at 100,000: "
              f"{'PASS' if wall_l < 3 else 'MISS'}; CPU {cpu_l:.2f} s); {wall_s:.2f} s at {args.small:,}; "
              f"ratio ×{wall_l / wall_s:.2f}; "
              f"{med['cold'][0]:.2f} s with pages.jsonl out of the page cache")
        print(f"RESULT resume RSS: {rss_l:.1f} MiB at {args.records:,} vs {rss_s:.1f} MiB at {args.small:,}: "
              f"ratio ×{rss_ratio:.2f} (goal ≤ 1.2: {'PASS' if rss_ratio <= 1.2 else 'MISS'})")
        if args.profile:
            profile(*dirs["large"], top=30)
    finally:
        if tmp and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp:
            print(f"# kept {tmp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

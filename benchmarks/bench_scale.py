#!/usr/bin/env python3
"""The run folder at scale (issue 27, point 4): how long `run` (resume), `report`, `evaluate`,
`export` and `clean` take, and how much memory they need, on a run of 1 000, 10 000 and 100 000 page records.

The run folders are bench_resume.py's (N records of ~1.5 KB of real transcription, N/100
documents of 100 pages, hard links to one real PDF, docs/ assembled), made once and reused with
--workdir. Truth for `evaluate` is a CSV naming every page (`doc_id,page,text`: the record's text
with every 40th character changed, so the CER is real work, ~2.5 %). Each command is a fresh
subprocess; its wall time, CPU time and peak RSS come from `os.wait4` on that child alone.

    python benchmarks/bench_scale.py                         # 1k, 10k, 100k records (~5 min)
    python benchmarks/bench_scale.py --sizes 1000,10000 --workdir /tmp/bs
    python benchmarks/bench_scale.py --quick                 # smoke: 200 and 2 000 records

A size's line for each command: `RESULT scale <command> <N>: <wall> s, CPU <cpu> s, peak RSS
<rss> MiB`, then the RSS ratio between the largest and the smallest size.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
from pathlib import Path

# The script's own folder is on sys.path when it runs: bench_resume.py's run folders and its
# child measurement are imported from beside it.
import bench_resume

from vlmocr.runfolder.store import PAGES_FILE, iter_records


def truth_csv(run_dir: Path, path: Path) -> Path:
    if path.exists():
        return path
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["doc_id", "page", "text"])
        for rec in iter_records(run_dir / PAGES_FILE):
            text = rec["text"]
            changed = "".join("#" if i % 40 == 39 and not c.isspace() else c for i, c in enumerate(text))
            w.writerow([rec["doc_id"], rec["page"], changed])
    return path


def commands(base: Path, n: int, inputs: Path, run_dir: Path, truth: Path) -> dict[str, list[str]]:
    vl = bench_resume.vlmocr_command()
    return {
        "resume": bench_resume.run_argv(inputs, run_dir),
        "report": [*vl, "report", str(run_dir), "--out", str(base / f"report-{n}")],
        "evaluate": [*vl, "evaluate", str(run_dir), "--truth", str(truth), "--json"],
        "export": [*vl, "export", str(run_dir), "--format", "jsonl", "--out", str(base / f"export-{n}.jsonl")],
        "clean": [*vl, "clean", str(run_dir)],
    }


def check(name: str, n: int, result: tuple[float, float, float, int, str]) -> None:
    code, text = result[3], result[4]
    if code != 0:
        sys.exit(f"{name} at {n} records: exit {code}\n{text[-3000:]}")
    if name == "evaluate":
        data = json.loads(text[text.index("{"):text.rindex("}") + 1])
        if data["corpus"]["scored"] != n:
            sys.exit(f"evaluate at {n} records scored {data['corpus']['scored']} pages")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="records per run folder (multiples of 100)")
    ap.add_argument("--workdir", type=Path, help="build here and reuse on the next call (default: a temp dir)")
    ap.add_argument("--only", default="resume,report,evaluate,export,clean", help="commands to measure")
    ap.add_argument("--quick", action="store_true", help="smoke run: 200 and 2 000 records")
    args = ap.parse_args(argv)
    sizes = [200, 2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    only = args.only.split(",")
    base = args.workdir or Path(tempfile.mkdtemp(prefix="vlmocr-bench-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    master = base / "master.pdf"
    if not master.exists():
        bench_resume.make_pdf(master, bench_resume.PAGES_PER_DOC)
    text = bench_resume.corpus_text()
    rows = []
    try:
        for n in sizes:
            inputs, run_dir = bench_resume.build(base, n, master, text, 1500)
            truth = truth_csv(run_dir, base / f"truth-{n}.csv")
            bench_resume.measure(bench_resume.run_argv(inputs, run_dir))  # warm-up: run.json, page cache
            for name, cmd in commands(base, n, inputs, run_dir, truth).items():
                if name not in only:
                    continue
                for leftover in (base / f"report-{n}", base / f"export-{n}.jsonl"):
                    shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
                result = bench_resume.measure(cmd, timeout=1800)
                check(name, n, result)
                wall, rss, cpu = result[0], result[1], result[2]
                rows.append((name, n, wall, cpu, rss))
                print(f"RESULT scale {name} {n}: {wall:.2f} s, CPU {cpu:.2f} s, peak RSS {rss:.1f} MiB", flush=True)
        print("\n| command | records | wall s | CPU s | peak RSS MiB |\n|---|---:|---:|---:|---:|")
        for name, n, wall, cpu, rss in sorted(rows, key=lambda r: (only.index(r[0]), r[1])):
            print(f"| {name} | {n:,} | {wall:.2f} | {cpu:.2f} | {rss:.1f} |")
        lo, hi = min(sizes), max(sizes)
        for name in only:
            by = {n: rss for c, n, _, _, rss in rows if c == name}
            if lo in by and hi in by:
                print(f"RESULT scale {name} RSS ×{by[hi] / by[lo]:.2f} from {lo:,} to {hi:,} records")
    finally:
        if not args.workdir:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

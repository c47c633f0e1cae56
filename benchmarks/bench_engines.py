#!/usr/bin/env python3
"""The CPU engines on ../shared/gt: CER per set, seconds per page and memory per worker.

Each engine (RapidOCR with the settings vlmocr reads with; Tesseract with the page's language
data: `frk` for the Fraktur sets, `grc` for Zonaras, else the page's language) reads the pages
as a `vlmocr run` worker does (benchmarks/gt_reading.py: the same rendering and sizing, one
thread, OMP_THREAD_LIMIT=1), in a fresh process of its own, one engine at a time, so that the
process's peak resident set (ru_maxrss) is what one worker of that engine holds. Readings are
cached (benchmarks/data/signal_readings.json, shared with bench_signal.py): only pages the
cache lacks are read. When an engine's process found everything cached, it still reads the
first page of every set (not stored) to measure its memory; `--cached` reads nothing at all
and reports the memory a previous invocation recorded.

CER is micro-averaged: the total edits over the total truth characters of the set
(`vlmocr.evaluation.score.char_errors`: NFC, whitespace collapsed); "all but Greek" leaves out
the polytonic Greek set (no RapidOCR model that ships reads polytonic Greek). Seconds per page include
rendering, as in a run: wall time (what the machine's load allowed when the page was read) and
CPU time of the worker and its children (what a free core takes). Tesseract's CLI runs as a child of the worker: its own peak is not in the
worker's figure (the largest finished child's peak is recorded beside it, `child_rss_kb`).

    python benchmarks/bench_engines.py                                  # every page, both engines
    python benchmarks/bench_engines.py --engines rapidocr --sets tapus,goethe --limit 3
    python benchmarks/bench_engines.py --cached                         # report on the cache only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import gt_reading as gt

from vlmocr.evaluation.score import char_errors

HERE = Path(__file__).resolve().parent


def worker(engine: str, rows: list[dict[str, str]], cache_path: Path) -> dict[str, Any]:
    """In the engine's own process: read what the cache lacks, then (if that was nothing) one
    page per set for the memory figure. Returns the process's peak memory and what it read."""
    engines: dict[tuple[str, str], Any] = {}
    key = gt.engine_key(engine)
    cache = gt.load_cache(cache_path)
    todo = [r for r in rows if gt.cached(cache, key, r["name"]) is None]
    for i, row in enumerate(todo, 1):
        entry = gt.read_one(engine, row, engines)
        gt.store(cache_path, key, row["name"], entry)
        print(f"[{key} {i}/{len(todo)}] {row['name']}: {entry['seconds']:.1f} s", file=sys.stderr, flush=True)
    if not todo:
        firsts = {r["set"]: r for r in reversed(rows)}
        for row in firsts.values():
            gt.read_one(engine, row, engines)
    rss, child = gt.peak_rss_kb()
    return {"engine": key, "read": [r["name"] for r in todo], "rss_kb": rss, "child_rss_kb": child}


def run_worker(engine: str, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, "--engines", engine,
           "--cache", str(args.cache)]
    if args.sets:
        cmd += ["--sets", args.sets]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def memory_file(cache_path: Path) -> Path:
    return cache_path.with_name("engine_memory.json")


def table(rows: list[dict[str, str]], engines: list[str], cache: dict, memory: dict[str, Any]) -> None:
    sets = list(dict.fromkeys(r["set"] for r in rows))
    print("| engine | " + " | ".join(sets) + " | **all** | all but Greek | pages | s/page | CPU s/page | worker RSS |")
    print("|---|" + "---:|" * (len(sets) + 6))
    for engine in engines:
        key = gt.engine_key(engine)
        by: dict[str, list[float]] = defaultdict(lambda: [0, 0])
        seconds: list[float] = []
        cpu: list[float] = []
        for row in rows:
            entry = gt.cached(cache, key, row["name"])
            if entry is None:
                continue
            edits, n = char_errors(entry["text"], gt.truth(row))
            for name in (row["set"], "all") + (("latin",) if row["script"] != "Grek" else ()):
                by[name][0] += edits
                by[name][1] += n
            seconds.append(entry["seconds"])
            if entry.get("cpu_seconds") is not None:
                cpu.append(entry["cpu_seconds"])
        cells = [f"{by[s][0] / by[s][1]:.1%}" if by[s][1] else "–" for s in sets + ["all", "latin"]]
        mem = memory.get(key)
        rss = "–"
        if mem:
            rss = f"{mem['rss_kb'] / 1024:.0f} MB"
        spp = sum(seconds) / len(seconds) if seconds else float("nan")
        cpp = f"{sum(cpu) / len(cpu):.1f}" if cpu else "–"
        print(f"| {key} | " + " | ".join(cells[:-2]) + f" | **{cells[-2]}** | {cells[-1]} | {len(seconds)} | {spp:.1f} | {cpp} | {rss} |")
        if by["all"][1]:
            print(f"RESULT {engine}: CER {by['all'][0] / by['all'][1]:.2%} on {len(seconds)} pages "
                  f"({cells[-1]} without the polytonic Greek set), "
                  f"{spp:.1f} s/page ({cpp} s CPU), worker RSS {rss} {gt.tally()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(gt.ENGINES), help="of rapidocr, tesseract")
    ap.add_argument("--sets", default="", help="comma-separated sets of pages.csv (default: all)")
    ap.add_argument("--limit", type=int, default=None, help="the first N pages of each set")
    ap.add_argument("--cached", action="store_true", help="read nothing: report on the cached readings only")
    ap.add_argument("--cache", type=Path, default=gt.CACHE)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in gt.ENGINES]
    if unknown:
        print(f"--engines: unknown engine {', '.join(unknown)} (known: {', '.join(gt.ENGINES)})", file=sys.stderr)
        return 3
    rows = gt.gt_pages(sets=[s for s in args.sets.split(",") if s] or None, per_set=args.limit)
    if args.worker:
        print(json.dumps(worker(args.worker, rows, args.cache)))
        return 0
    memory = json.loads(memory_file(args.cache).read_text()) if memory_file(args.cache).exists() else {}
    if not args.cached:
        for engine in engines:
            result = run_worker(engine, args)
            memory[result["engine"]] = {k: result[k] for k in ("rss_kb", "child_rss_kb")}
            for name in result["read"]:  # read in the worker's process: counted here as read now
                gt.note_read(result["engine"], name)
            memory_file(args.cache).write_text(json.dumps(memory, indent=1, sort_keys=True) + "\n")
    print(f"\n{len(rows)} pages of {gt.GT}; CER = edits / truth characters per set\n")
    table(rows, engines, gt.load_cache(args.cache), memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())

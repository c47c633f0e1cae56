#!/usr/bin/env python3
"""`vlmocr slurm status` on a large cluster run: shard summaries (summary.json) against parsing
every record (the path of runs older than summary.json), side by side.

Goal (issue 18, point 2; seed 000: nothing heavy on the login node): a 64-shard run of about a
million pages reports in about a second.

The benchmark builds, once (kept in --workdir; a half-built directory is rebuilt):

  RUN/staged/bulk.csv      64 × 150 documents of 100 pages (every row names one real 1-page PDF:
                           a started shard's page counts come from its records, never from the PDF)
  RUN/shards/K/pages.jsonl 15 000 records per shard (`PageRecord(...).to_json_dict()` written with
                           `vlmocr.runfolder.store.RecordWriter`; mostly ok, some fallback / empty / bad_input)
  RUN/shards/K/docs/*.md   assembled with `vlmocr.runfolder.assemble.write_document`
  RUN/shards/K/run.json, summary.json   written by a real `vlmocr run --shard K/64 --engine
                           textlayer` over the staged manifest (nothing owed: it only tallies)
  RUN/slurm/jobs.json      one bulk submission of 64 tasks (`record_job`)

Then `--repeats` rounds of `vlmocr slurm status RUN --json` as a subprocess (the whole command,
interpreter start-up included), new path (summaries present) and old path (every summary.json
renamed away, so status parses the records), order alternating, with stand-in squeue/sacct that know
no job (the figure is the run directory's cost, not the controller's). Both must report the same
totals. Last, `status()` alone, in-process, once per path.

    python benchmarks/bench_slurm_status.py                      # 64 × 15 000, 3 repeats
    python benchmarks/bench_slurm_status.py --quick              # smoke: 4 × 500, 1 repeat
    python benchmarks/bench_slurm_status.py --workdir /tmp/bss --keep
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vlmocr.cluster.slurm.jobs import record_job
from vlmocr.cluster.slurm.status import status
from vlmocr.inputs.sources import from_manifest, shard_of
from vlmocr.reading.plan import RunPlan
from vlmocr.runfolder.assemble import write_document
from vlmocr.runfolder.record import PageRecord, Row, Status
from vlmocr.runfolder.rundir import RunDir
from vlmocr.runfolder.store import RecordWriter
from vlmocr.settings.config import RunConfig
from vlmocr.testing.pagecode import make_coded_pdf

PAGES_PER_DOC = 100
READY = ".bench_ready"
TEXT = ("The committee met on the fourth of March and agreed that the archive should be opened to "
        "readers in the autumn, once the inventory of the letters and the photographs is complete. ") * 3


def status_of(i: int) -> Status:
    """A plausible mix: 1 in 50 fallback, 1 in 200 empty, 1 in 1000 bad_input, the rest ok."""
    return (Status.bad_input if i % 1000 == 999 else Status.empty if i % 200 == 199
            else Status.fallback if i % 50 == 49 else Status.ok)


def build(root: Path, shards: int, per_shard: int) -> Path:
    run = root / f"run-{shards}x{per_shard}"
    if (run / READY).exists():
        return run
    shutil.rmtree(run, ignore_errors=True)
    t0 = time.perf_counter()
    docs_per_shard = per_shard // PAGES_PER_DOC
    pdf = root / "one.pdf"
    make_coded_pdf(pdf, [1])
    by_shard: dict[int, list[str]] = {k: [] for k in range(1, shards + 1)}
    i = 0
    while any(len(v) < docs_per_shard for v in by_shard.values()):
        doc_id = f"d{i:07d}"
        i += 1
        k = shard_of(doc_id, shards)
        if len(by_shard[k]) < docs_per_shard:
            by_shard[k].append(doc_id)
    staged = RunDir(run).staged
    staged.mkdir(parents=True)
    (staged / "bulk.csv").write_text("doc_id,path\n" + "".join(
        f"{d},{pdf}\n" for k in sorted(by_shard) for d in by_shard[k]), encoding="utf-8")
    docs = {d.doc_id: d for d in from_manifest(staged / "bulk.csv")}
    key = RunPlan(RunConfig(engine="textlayer")).settings_key(next(iter(docs.values())).dpi)
    n = 0
    for k, ids in by_shard.items():
        shard = RunDir(run).shard(k)
        shard.path.mkdir(parents=True)
        with RecordWriter(shard.pages) as writer:
            for doc_id in ids:
                recs = []
                for page in range(1, PAGES_PER_DOC + 1):
                    rec = PageRecord(doc_id=doc_id, source=docs[doc_id].source, page=page, doc_pages=PAGES_PER_DOC,
                                     key=key, status=status_of(n), text=TEXT, engine="textlayer",
                                     finish_reason="stop", seconds=0.0123, flags=["textlayer"]).to_json_dict()
                    n += 1
                    writer.append(rec)
                    recs.append(Row.of(rec))
                write_document(shard.path, doc_id, recs)
    print(f"# wrote {n:,} records in {shards} shards, {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    # run.json and summary.json as a real run writes them: every shard resumed with nothing owed.
    for k in by_shard:
        res = subprocess.run([sys.executable, "-m", "vlmocr", "run", "--manifest", str(staged / "bulk.csv"),
                              "--shard", f"{k}/{shards}", "--engine", "textlayer",
                              "--out", str(RunDir(run).shard(k).path)],
                             check=False, capture_output=True, text=True)
        # 0, 2 (empty pages for review) or 9 (the bad_input records: unreadable inputs) are outcomes.
        if res.returncode not in (0, 1, 2, 9) or not RunDir(run).shard(k).summary_json.exists():
            raise SystemExit(f"vlmocr run of shard {k} failed ({res.returncode}): {res.stderr[-2000:]}")
    record_job(run, {"kind": "bulk", "job_id": "1000", "array": f"1-{shards}", "shards": shards})
    (run / READY).write_text(f"{n}\n")
    print(f"# built in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return run


def no_queue(root: Path) -> dict[str, str]:
    """squeue and sacct that know no job: the queue forgot the run."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("squeue", "sacct"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def set_summaries(run: Path, present: bool) -> None:
    for shard in sorted((run / "shards").iterdir()):
        on, off = shard / "summary.json", shard / "summary.json.off"
        if present and off.exists():
            off.rename(on)
        elif not present and on.exists():
            on.rename(off)


def timed_status(run: Path, env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "vlmocr", "slurm", "status", str(run), "--json"],
                         check=False, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"slurm status failed ({res.returncode}): {res.stderr[-2000:]}")
    return seconds, json.loads(res.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--records", type=int, default=15_000, help="records per shard (multiple of 100)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="4 shards × 500 records, 1 repeat")
    ap.add_argument("--workdir", type=Path, help="keep the built run here (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="do not delete a temporary --workdir")
    args = ap.parse_args(argv)
    if args.quick:
        args.shards, args.records, args.repeats = 4, 500, 1
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench_slurm_status-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        run = build(root, args.shards, args.records)
        env = no_queue(root)
        times: dict[str, list[float]] = {"summary": [], "records": []}
        totals: dict[str, dict] = {}
        for r in range(args.repeats):
            order = ("summary", "records") if r % 2 == 0 else ("records", "summary")
            for path in order:
                set_summaries(run, present=path == "summary")
                seconds, st = timed_status(run, env)
                assert (st["from_records"] == []) if path == "summary" else len(st["from_records"]) == args.shards
                times[path].append(seconds)
                totals[path] = st["totals"]
        # The function alone, in this process (no interpreter start-up, which dominates the new path).
        os.environ["PATH"] = env["PATH"]
        inproc: dict[str, float] = {}
        for path in ("records", "summary"):
            set_summaries(run, present=path == "summary")
            t0 = time.perf_counter()
            status(run)
            inproc[path] = time.perf_counter() - t0
        set_summaries(run, present=True)
        if totals["summary"] != totals["records"]:
            raise SystemExit(f"totals differ: summary {totals['summary']} vs records {totals['records']}")
        t = totals["summary"]
        print(f"slurm status, {args.shards} shards × {args.records:,} records = {t['pages']:,} pages "
              f"(ok {t['ok']:,}, fallback {t['fallback']:,}, review {t['review']:,}, failed {t['failed']:,}), "
              f"{os.cpu_count()} cores")
        old, new = statistics.median(times["records"]), statistics.median(times["summary"])
        print(f"  records (old path):  median {old:6.2f} s  {[f'{x:.2f}' for x in times['records']]}")
        print(f"  summary (new path):  median {new:6.2f} s  {[f'{x:.2f}' for x in times['summary']]}")
        print(f"  ratio old/new: {old / new:.1f}×")
        print(f"  status() in-process: records {inproc['records']:.2f} s, summary {inproc['summary']:.3f} s, "
              f"ratio {inproc['records'] / inproc['summary']:.0f}×")
        print(f"RESULT slurm status: {new:.2f} s from summaries, {old:.2f} s from records "
              f"({old / new:.1f}×) at {args.shards} shards × {args.records:,} records "
              f"(goal: about a second at 64 × 15,000)")
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

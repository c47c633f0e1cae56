"""Soak: N coded pages through `vlmocr run` against the fake VLM server injecting every fault,
with K `kill -9` of the run at seeded random moments and resumes until the run is complete.

Then the invariants every page record must keep (issue 10, figure 5):

* zero pages lost: every (doc, page) has a final record;
* none duplicated: each page has exactly one record with status ok/fallback, and its records'
  attempt numbers are 1..n without gaps or repeats;
* every line of pages.jsonl parses and passes its CRC-32 check (`store.line_intact`);
* every ok page's text equals ``expected_text(code)`` of the code drawn on it;
* every exit code seen is explainable: -9 for the kills, 0 or 2 for the last run, and 1 (pages
  in error/refused: resubmit) or 5 (endpoint judged unavailable) only on intermediate resumes.

    python benchmarks/bench_soak.py                      # 10 000 pages, 20 kills (~10 min)
    python benchmarks/bench_soak.py --pages 2000 --kills 10
    python benchmarks/bench_soak.py --quick              # 600 pages, 5 kills (~1 min)

Prints a Markdown table of counts and ``RESULT …`` lines; exits 1 if an invariant fails.
``tests/reading/test_soak.py`` runs the reduced version through :func:`soak`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vlmocr.runfolder.store import line_intact
from vlmocr.testing.pagecode import expected_text, make_coded_pdf

ROOT = Path(__file__).resolve().parents[1]
# Every fault kind, each at a rate within 1–10 %. At most one fault fires per request (the first
# in the server's order that matches), so about a third of the requests go wrong in some way.
FAULT_RATES: dict[str, float] = {
    "drop": 0.02,
    "timeout": 0.01,
    "429": 0.05,
    "500": 0.05,
    "malformed": 0.03,
    "loop": 0.03,
    "truncate": 0.03,
    "repetition": 0.02,
    "empty": 0.03,
    "refuse": 0.02,
}
PAGE_SIZE = (300, 400)  # small pages: rendering is cheap, the soak is about the plumbing
CODE_BASE = 1000  # code of doc d, page p = d * CODE_BASE + p: distinct across the corpus


@dataclass
class SoakResult:
    pages: int = 0
    docs: int = 0
    kills_asked: int = 0
    kills: int = 0
    runs: int = 0
    resumes: int = 0
    exit_codes: list[int] = field(default_factory=list)
    records: int = 0
    statuses_all: dict[str, int] = field(default_factory=dict)
    statuses_final: dict[str, int] = field(default_factory=dict)
    ladder_records: int = 0  # records with attempt > 1
    server_requests: int = 0
    server_outcomes: dict[str, int] = field(default_factory=dict)
    http_retries: int = 0  # requests beyond one per record written by the VLM engine
    torn_lines_seen: int = 0  # unparseable lines found right after a kill (repaired later)
    orphans_after_kill: int = 0  # processes of a killed run's group still alive 1 s later
    locked_retries: int = 0  # resumes refused with exit 6 (run directory still locked)
    wall_s: float = 0.0
    generate_s: float = 0.0
    violations: list[str] = field(default_factory=list)


def _make_doc(args: tuple[str, list[int]]) -> None:
    make_coded_pdf(args[0], args[1], size=PAGE_SIZE)


def make_corpus(folder: Path, pages: int, per_doc: int = 100) -> dict[tuple[str, int], int]:
    """PDFs of ``per_doc`` coded pages (the last may be shorter); returns {(doc_id, page): code}."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs, expected = [], {}
    for d in range(-(-pages // per_doc)):
        n = min(per_doc, pages - d * per_doc)
        codes = [d * CODE_BASE + p for p in range(1, n + 1)]
        doc_id = f"doc{d:04d}"
        if not (folder / f"{doc_id}.pdf").exists():  # a kept --workdir reuses its corpus
            jobs.append((str(folder / f"{doc_id}.pdf"), codes))
        expected.update({(doc_id, p): c for p, c in enumerate(codes, 1)})
    with ProcessPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        list(pool.map(_make_doc, jobs, chunksize=4))
    return expected


def start_server(seed: int, faults: dict[str, float], log: Path) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable, "-m", "vlmocr.testing.openai_server", "--port", "0", "--slots", "32", "--latency", "0",
        "--seed", str(seed), "--hang-seconds", "3", "--retry-after", "0.2",
        "--faults", json.dumps(faults),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log.open("wb"), text=True)
    url = proc.stdout.readline().strip()  # type: ignore[union-attr]
    if not url.startswith("http"):
        proc.kill()
        raise RuntimeError(f"server did not start: {url!r}; see {log}")
    return proc, url


def server_stats(url: str) -> dict[str, Any]:
    import urllib.request

    with urllib.request.urlopen(url.removesuffix("/v1") + "/_stats", timeout=30) as resp:
        data = json.load(resp)
    data.pop("requests", None)
    data.pop("page_attempts", None)
    data.pop("faults_fired", None)
    return data


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def torn_lines(path: Path) -> int:
    if not path.exists():
        return 0
    bad = 0
    for line in path.read_bytes().split(b"\n"):
        if line.strip():
            try:
                json.loads(line)
            except ValueError:
                bad += 1
    return bad


def group_alive(pgid: int) -> int:
    """How many processes are left in process group ``pgid`` (ours: started with a new session)."""
    n = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rfind(")") + 2:].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    n += 1
            except (OSError, IndexError, ValueError):
                pass
    return n


def verify(run: Path, expected: dict[tuple[str, int], int], res: SoakResult) -> None:
    raw = (run / "pages.jsonl").read_bytes()
    recs = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            recs.append(json.loads(line))
        except ValueError:
            res.violations.append(f"line {n} does not parse: {line[:80]!r}")
            continue
        if not line_intact(line + b"\n"):
            res.violations.append(f"line {n} fails its CRC-32 check: {line[:80]!r}")
    if raw and not raw.endswith(b"\n"):
        res.violations.append("pages.jsonl does not end with a newline")
    res.records = len(recs)
    res.statuses_all = dict(Counter(r["status"] for r in recs))
    res.ladder_records = sum(1 for r in recs if r.get("attempt", 1) > 1)
    by_page: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for r in recs:
        by_page[(r["doc_id"], r["page"])].append(r)
    missing = set(expected) - set(by_page)
    extra = set(by_page) - set(expected)
    if missing:
        res.violations.append(f"{len(missing)} pages lost, e.g. {sorted(missing)[:5]}")
    if extra:
        res.violations.append(f"{len(extra)} unexpected pages, e.g. {sorted(extra)[:5]}")
    final: Counter[str] = Counter()
    dup = gaps = wrong = 0
    for key, rs in by_page.items():
        final[rs[-1]["status"]] += 1
        good = [r for r in rs if r["status"] in ("ok", "fallback")]
        if len(good) != 1:
            dup += 1
            if dup <= 5:
                res.violations.append(f"{key}: {len(good)} ok/fallback records")
        attempts = [r.get("attempt") for r in rs]
        if sorted(attempts) != list(range(1, len(rs) + 1)):
            gaps += 1
            if gaps <= 5:
                res.violations.append(f"{key}: attempts {attempts}")
        if key in expected:
            for r in good:
                if r["status"] == "ok" and r["text"] != expected_text(expected[key]):
                    wrong += 1
                    if wrong <= 5:
                        res.violations.append(f"{key}: ok text differs: {r['text'][:60]!r}")
    if dup > 5 or gaps > 5 or wrong > 5:
        res.violations.append(f"totals: {dup} pages without exactly one ok/fallback record, "
                              f"{gaps} with attempt gaps/repeats, {wrong} with wrong ok text")
    res.statuses_final = dict(final)


def soak(
    workdir: Path, pages: int = 10_000, kills: int = 20, seed: int = 1,
    faults: dict[str, float] | None = None, max_resumes: int = 12, per_doc: int = 100,
    log=print,
) -> SoakResult:
    res = SoakResult(pages=pages, kills_asked=kills)
    rng = random.Random(seed)
    t0 = time.monotonic()
    expected = make_corpus(workdir / "docs", pages, per_doc)
    res.docs = len({d for d, _ in expected})
    res.generate_s = time.monotonic() - t0
    log(f"corpus: {pages} pages in {res.docs} PDFs ({res.generate_s:.1f} s)")
    server, url = start_server(seed, faults if faults is not None else FAULT_RATES,
                               workdir / "server.log")
    run = workdir / "run"
    jsonl = run / "pages.jsonl"
    cmd = [
        sys.executable, "-m", "vlmocr", "run", str(workdir / "docs"), "--out", str(run),
        "--endpoint", url, "--request-timeout", "2", "--max-retries", "8",
        "--concurrency", "32", "--workers", "2",
    ]
    # Kill moments: after a seeded random number of records (spread over the whole run, a few
    # before the first record, i.e. during start-up), plus a random 0–0.5 s, so kills land at
    # start-up, mid-pass-1, mid-ladder and mid-write.
    # The upper bound stays under the records a run writes (~1.13 per page with these rates), so
    # every kill lands before the run finishes by itself.
    expected_records = int(pages * 1.05)
    thresholds = sorted(rng.randint(0, expected_records) for _ in range(kills))
    errlog = (workdir / "runs.stderr").open("ab")
    # The checkout's own package, whatever `pip install -e` points at.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    t_run = time.monotonic()
    try:
        for threshold in thresholds:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errlog,
                                    start_new_session=True, env=env)
            res.runs += 1
            limit = time.monotonic() + 600
            while (count_lines(jsonl) < threshold and proc.poll() is None
                   and time.monotonic() < limit):
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.5))
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                res.kills += 1
            rc = proc.wait()
            res.exit_codes.append(rc)
            time.sleep(1.0)
            left = group_alive(proc.pid)
            if left:
                res.orphans_after_kill += left
                os.killpg(proc.pid, signal.SIGKILL)  # our own group: the run's pool workers
                time.sleep(0.2)
            res.torn_lines_seen += torn_lines(jsonl)
            log(f"run {res.runs}: threshold {threshold}, lines {count_lines(jsonl)}, rc {rc}"
                + (f", {left} orphaned processes" if left else ""))
            if rc in (0, 2) and len(_final_pages(jsonl)) >= len(expected):
                break
        # Resume until done.
        while res.resumes < max_resumes:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errlog,
                                    start_new_session=True, env=env)
            res.runs += 1
            res.resumes += 1
            rc = proc.wait()
            res.exit_codes.append(rc)
            log(f"resume {res.resumes}: rc {rc}, lines {count_lines(jsonl)}")
            if rc == 6:
                res.locked_retries += 1
                time.sleep(1)
                continue
            if rc in (0, 2) and len(_final_pages(jsonl)) >= len(expected):
                break
        res.wall_s = time.monotonic() - t_run
        stats = server_stats(url)
        res.server_requests = stats["total"]
        res.server_outcomes = stats.get("counts", {})
    finally:
        errlog.close()
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    verify(run, expected, res)
    vlm_records = res.records - res.statuses_all.get("bad_input", 0)
    res.http_retries = max(0, res.server_requests - vlm_records)
    explain = {-9, 0, 1, 2, 5, 6}
    odd = [c for c in res.exit_codes if c not in explain]
    if odd:
        res.violations.append(f"unexplained exit codes {odd}")
    if res.exit_codes and res.exit_codes[-1] not in (0, 2):
        res.violations.append(f"last exit code {res.exit_codes[-1]} (not 0/2)")
    return res


def _final_pages(jsonl: Path) -> set[tuple[str, int]]:
    got = set()
    if jsonl.exists():
        for line in jsonl.read_bytes().split(b"\n"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            got.add((r["doc_id"], r["page"]))
    return got


def report(res: SoakResult) -> str:
    rows = [
        ("pages (documents)", f"{res.pages} ({res.docs})"),
        ("kills -9 (asked)", f"{res.kills} ({res.kills_asked})"),
        ("runs / resumes after the kills", f"{res.runs} / {res.resumes}"),
        ("exit codes seen", " ".join(str(c) for c in res.exit_codes)),
        ("records in pages.jsonl", res.records),
        ("records with attempt > 1 (retry ladder)", res.ladder_records),
        ("statuses, all records", json.dumps(res.statuses_all, sort_keys=True)),
        ("statuses, last record per page", json.dumps(res.statuses_final, sort_keys=True)),
        ("server requests", res.server_requests),
        ("server outcomes", json.dumps(res.server_outcomes, sort_keys=True)),
        ("requests beyond one per record (HTTP retries + killed in flight)", res.http_retries),
        ("torn lines seen right after kills (repaired)", res.torn_lines_seen),
        ("orphaned processes 1 s after a kill", res.orphans_after_kill),
        ("resumes refused as locked (exit 6)", res.locked_retries),
        ("wall s (runs only; corpus generation)", f"{res.wall_s:.1f} ({res.generate_s:.1f})"),
        ("pages/s overall", f"{res.pages / res.wall_s:.1f}" if res.wall_s else "-"),
        ("invariant violations", len(res.violations)),
    ]
    lines = ["| measure | value |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="600 pages, 5 kills")
    ap.add_argument("--workdir", type=Path,
                    help="keep everything here (default: a temp dir); its corpus is reused")
    ap.add_argument("--json", action="store_true", help="also print the result as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.pages, args.kills = 600, 5
    tmp = None
    if args.workdir is None:
        tmp = tempfile.mkdtemp(prefix="vlmocr-soak-")
        workdir = Path(tmp)
    else:
        workdir = args.workdir
        for old in ("run", "server.log", "runs.stderr"):
            shutil.rmtree(workdir / old, ignore_errors=True)
            (workdir / old).unlink(missing_ok=True) if (workdir / old).is_file() else None
        workdir.mkdir(parents=True, exist_ok=True)
    try:
        res = soak(workdir, args.pages, args.kills, args.seed,
                   log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"faults: {json.dumps(FAULT_RATES)}")
    print(report(res))
    for v in res.violations:
        print(f"VIOLATION {v}")
    lost = res.pages - sum(res.statuses_final.values())
    print(f"RESULT soak: {res.pages} pages, {res.kills} kills -9, {res.resumes} resumes, "
          f"{res.records} records, {res.server_requests} requests; lost={max(lost, 0)} "
          f"violations={len(res.violations)}; {res.wall_s:.0f} s")
    if args.json:
        print(json.dumps(asdict(res)))
    return 1 if res.violations else 0


if __name__ == "__main__":
    sys.exit(main())

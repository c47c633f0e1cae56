"""kill -9 and SIGTERM at several points of a real run; the rerun must finish the rest with
every page exactly once and every line parseable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from support.cli import run_cli
from support.documents import make_scan_pdf, page_lines
from support.records import read_records

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("real_readings")]


def corpus(tmp_path: Path, docs: int = 4, pages: int = 6) -> Path:
    c = tmp_path / "corpus"
    c.mkdir()
    for d in range(docs):
        make_scan_pdf(c / f"doc{d}.pdf", [page_lines(d, p) for p in range(1, pages + 1)], size=(600, 800))
    return c


def start(c: Path, run: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vlmocr", "run", str(c), "--out", str(run), "--workers", "2", "--dpi", "72"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def lines(run: Path) -> int:
    p = run / "pages.jsonl"
    return p.read_bytes().count(b"\n") if p.exists() else 0


def wait_for(run: Path, n: int, proc: subprocess.Popen, limit: float = 120) -> None:
    t0 = time.monotonic()
    while lines(run) < n and proc.poll() is None and time.monotonic() - t0 < limit:
        time.sleep(0.02)


def check_complete(run: Path, expected: set) -> None:
    raw = (run / "pages.jsonl").read_text(encoding="utf-8")
    recs = [json.loads(line) for line in raw.splitlines()]  # every line parses
    counts = Counter((r["doc_id"], r["page"]) for r in recs)
    assert set(counts) == expected
    assert max(counts.values()) == 1, [k for k, v in counts.items() if v > 1]
    assert all(r["status"] == "ok" for r in recs)


def test_kill_9_at_several_points_then_resume(tmp_path, real_readings):
    # The killed runs read for real (pages in the workers' hands); the baseline and the final
    # resume may take their readings from the suite's cache: a reading is the engine's either way.
    c = corpus(tmp_path)
    baseline = tmp_path / "baseline"
    assert run_cli("run", str(c), "--out", str(baseline), "--workers", "2", "--dpi", "72",
                   env=real_readings).returncode == 0
    expected = {(r["doc_id"], r["page"]) for r in read_records(baseline)}
    assert len(expected) == 24
    run = tmp_path / "run"
    kills = 0
    for threshold in (0, 3, 9, 15, 21):
        proc = start(c, run)
        if threshold == 0:
            time.sleep(1.0)  # while workers start, before any page is written
        else:
            wait_for(run, threshold, proc)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(timeout=30)
        if threshold == 9:
            # As if the kill had landed in the middle of a write.
            with (run / "pages.jsonl").open("ab") as fh:
                fh.write(b'{"schema":1,"doc_id":"doc1","page":')
    assert kills >= 3
    final = run_cli("run", str(c), "--out", str(run), "--workers", "2", "--dpi", "72", env=real_readings)
    assert final.returncode == 0, final.stderr
    check_complete(run, expected)
    # The text of each page equals the uninterrupted run's (same pages, same engine).
    base = {(r["doc_id"], r["page"]): r["text"] for r in read_records(baseline)}
    got = {(r["doc_id"], r["page"]): r["text"] for r in read_records(run)}
    assert got == base
    for d in range(4):
        assert (run / "docs" / f"doc{d}.md").read_text().count("<!-- page ") == 6


def test_sigterm_stops_cleanly_with_130_and_resumes(tmp_path, real_readings):
    c = corpus(tmp_path, docs=2, pages=8)
    run = tmp_path / "run"
    proc = start(c, run)
    wait_for(run, 3, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "SIGTERM" in err and "Done:" in out and "missing=" in out
    done = lines(run)
    assert 3 <= done < 16
    assert (run / "pages.jsonl").read_bytes().endswith(b"\n")
    info = json.loads((run / "run.json").read_text())
    assert info["summary"]["interrupted"] is True and info["summary"]["exit_code"] == 130
    final = run_cli("run", str(c), "--out", str(run), "--workers", "2", "--dpi", "72", env=real_readings)
    assert final.returncode == 0, final.stderr
    check_complete(run, {(f"doc{d}", p) for d in range(2) for p in range(1, 9)})


def test_the_done_line_of_a_run_stopped_early_says_the_runs_own_size(tmp_path):
    # Issue 47, point 5: after Ctrl-C, `Done:` said "7 pages … missing=4" of a 25-page run — the
    # documents not yet opened counted one page each. It says the run's pages now.
    c = corpus(tmp_path, docs=5, pages=5)
    run = tmp_path / "run"
    proc = start(c, run)
    wait_for(run, 2, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    done = next(line for line in out.splitlines() if line.startswith("Done:"))
    read = lines(run)
    assert done.startswith("Done: 25 pages in 5 docs") and f"missing={25 - read}" in done, (done, read)
    assert json.loads((run / "run.json").read_text())["summary"]["pages"] == 25


def catches_sigterm(pid: int) -> bool:
    """Has process `pid` a handler for SIGTERM yet (bit 15 of SigCgt in /proc)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.parametrize("how", ["signal during start-up", "signal during start-up, console script",
                                 "stop requested by the batch shell"])
def test_a_stop_before_the_first_page_still_records_an_interrupted_run(tmp_path, how):
    """SIGTERM while Python imports and the pool starts (SLURM's early signal) or a stop file
    written by the batch shell (VLMOCR_STOP_FILE): exit 130, run.json says interrupted, no page
    read, and the next run reads everything."""
    c = corpus(tmp_path, docs=1, pages=3)
    run = tmp_path / "run"
    stop_file = tmp_path / "stop-requested"
    if how.startswith("stop"):
        stop_file.touch()
    env = {**os.environ, "VLMOCR_STOP_FILE": str(stop_file)}
    exe = [str(Path(sys.executable).parent / "vlmocr")] if how.endswith("console script") else [sys.executable, "-m", "vlmocr"]
    proc = subprocess.Popen(
        [*exe, "run", str(c), "--out", str(run), "--workers", "1", "--dpi", "72"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    if how.startswith("signal"):
        # The first moment vlmocr can hear it: right after Python started, in the imports,
        # long before the event loop's handlers. (Before that no Python program can: the
        # batch shell does not signal such a process, see test_slurm_submit.)
        deadline = time.monotonic() + 30
        while not catches_sigterm(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "SIGTERM" in err
    assert lines(run) == 0
    summary = json.loads((run / "run.json").read_text())["summary"]
    assert summary["interrupted"] is True and summary["exit_code"] == 130
    assert summary["records"] == 0 and summary["missing"] >= 1
    final = run_cli("run", str(c), "--out", str(run), "--workers", "1", "--dpi", "72")
    assert final.returncode == 0, final.stderr
    check_complete(run, {("doc0", p) for p in range(1, 4)})


def test_a_second_run_on_the_same_directory_is_refused(tmp_path):
    c = corpus(tmp_path, docs=1, pages=8)
    run = tmp_path / "run"
    proc = start(c, run)
    wait_for(run, 1, proc)
    other = run_cli("run", str(c), "--out", str(run))
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert other.returncode == 6 and "in use by pid" in other.stderr


def descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            for k in kids:
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_leaves_no_orphaned_workers(tmp_path):
    c = corpus(tmp_path, docs=1, pages=8)
    run = tmp_path / "run"
    proc = start(c, run)
    wait_for(run, 1, proc)
    kids = descendants(proc.pid)
    assert kids, "the run should have worker processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    t0 = time.monotonic()
    while any(alive(k) for k in kids) and time.monotonic() - t0 < 20:
        time.sleep(0.1)
    assert not [k for k in kids if alive(k)]

"""kill -9 in the middle of a run against the released vLLM, then the same command again: the rest
is read, no page lost, none read twice — with requests still in flight at the real server when
the client died (the server finishes or aborts them; nothing of theirs reaches the run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

from support.cli import run_cli
from vlmocr.testing.pagecode import make_coded_pdf


def test_kill_9_mid_run_then_resume_reads_each_page_once(tmp_path, qwen25_server):
    doc = make_coded_pdf(tmp_path / "d.pdf", list(range(1, 41)))
    run = tmp_path / "r"
    argv = ["run", str(doc), "--out", str(run), "--endpoint", qwen25_server.url, "--model", qwen25_server.model,
            "--profile", "olmocr-2", "--workers", "1", "--concurrency", "2"]
    env = {**os.environ, "VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}
    proc = subprocess.Popen([sys.executable, "-m", "vlmocr", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    pages = run / "pages.jsonl"
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < 300:
        if pages.exists() and pages.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # vlmocr and its worker pool, mid-run
    proc.wait()
    before = pages.read_bytes().count(b"\n")
    assert 3 <= before < 40
    res = run_cli(*argv, env={"VLMOCR_API_KEY": "", "OPENAI_API_KEY": ""}, timeout=600)
    assert res.returncode in (0, 2), res.stderr[-2000:]
    recs = [json.loads(line) for line in pages.read_text(encoding="utf-8").splitlines()]
    counts = Counter(r["page"] for r in recs)
    assert set(counts) == set(range(1, 41)) and max(counts.values()) == 1, counts
    assert all(r["status"] not in ("error", "bad_input") for r in recs)

"""Issue 26, point 3: Ctrl-C stops at once. A CPU run took 26 s to exit after Ctrl-C, and pages
started after "taking no more tasks". Now SIGINT — and SIGTERM on a CPU run, whose pages are read
again on resume sooner than waited for — abandons the pages in flight: the run exits 130 with no
page finished after the signal, starts nothing after the stop message, ends with one line saying how to resume, and the
resume reads exactly the pages left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from support.documents import make_scan_pdf

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("stop")
    words = ("river mountain letter harvest council window garden school market bridge winter "
             "station printer railway meadow village doctor teacher museum library").split()

    def line(i: int, j: int) -> str:  # prose that varies, so no reading of it is a loop
        return " ".join(words[(i * 7 + j * k * 3 + k) % len(words)] for k in range(8))

    # Ten lines a page: RapidOCR on one core reads a line in ~0.5 s here, so each page is still in
    # a worker's hands 2 s after the reading starts, and the resume costs seconds, not a minute.
    return make_scan_pdf(folder / "big.pdf", [[f"Page {i} of the long report", *(line(i, j) for j in range(10))]
                                              for i in range(6)], size=(1400, 1800))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_cpu_run_stops_at_once_and_resumes(tmp_path, big, sig, real_readings):
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "vlmocr", "run", str(big), "--out", str(run), "--engine", "rapidocr", "--workers", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "VLMOCR_PROGRESS_EVERY": "0.5"})
    lines: list[tuple[float, str]] = []
    t0 = time.monotonic()

    def collect() -> None:
        for line in proc.stderr:
            lines.append((time.monotonic(), line.rstrip()))

    reader = threading.Thread(target=collect, daemon=True)
    reader.start()
    while not any("reading" in text for _, text in lines) and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    time.sleep(2.0)  # pages in the workers hands
    sent = time.monotonic()
    sent_wall = datetime.now(timezone.utc)
    proc.send_signal(sig)
    proc.wait(timeout=60)
    out = proc.stdout.read()
    reader.join(5)
    assert proc.returncode == 130, (out, lines[-5:])
    assert "run the same command to resume" in out.strip().splitlines()[-1]
    # It stopped at once, told by what it did, not by a clock (two loaded cores stretch any
    # duration): the pages in the workers' hands — seconds of reading left each — were abandoned,
    # so no page was finished after the signal (a second allowed for a result already on its way),
    # and some are left for the resume. A stop that waited for them would have recorded them.
    records = run / "pages.jsonl"
    stopped = [json.loads(x) for x in records.read_text().splitlines()] if records.exists() else []
    late = [r["page"] for r in stopped if datetime.fromisoformat(r["finished_at"]) > sent_wall + timedelta(seconds=1)]
    assert not late, late
    assert len({r["page"] for r in stopped}) < 6
    stop = next(t for t, text in lines if "stopping now" in text)
    assert stop >= sent
    # Nothing started after the stop message: no page line of progress moves on after it.
    after = [text for t, text in lines if t > stop and "reading" in text and "ok=" in text]
    before = [text for t, text in lines if t <= stop and "reading" in text]
    assert not after or after[-1].split(",")[0] == (before[-1].split(",")[0] if before else after[-1].split(",")[0])
    # The resume reads what is left, each page once.
    # (Its readings may come from the suite's cache: only the stopped run needed its pages in hand.)
    res = subprocess.run(argv, capture_output=True, text=True, timeout=240, env={**os.environ, **real_readings})
    assert res.returncode in (0, 2), res.stderr  # every page final (its signal may ask for review)
    pages = [json.loads(x)["page"] for x in (run / "pages.jsonl").read_text().splitlines()]
    assert sorted(pages) == list(range(1, 7))

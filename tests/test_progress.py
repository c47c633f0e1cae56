"""Progress tells the truth (issue 19, point 8): the total is the pages this run owes, pages
earlier runs read are shown apart, the ETA comes from the completions of the last minute, and
progress goes to stderr only. The estimator is driven by a fake clock; the whole line by a real
`vlmocr run` against the fake vLLM server (real HTTP on 127.0.0.1), resumed."""

from __future__ import annotations

import re
import shutil

import pytest

from support.cli import run_cli
from vlmocr.progress import RATE_WINDOW, RecentRate, RunProgress, eta_seconds, format_eta
from vlmocr.testing.openai_server import ServerConfig, serve_in_process
from vlmocr.testing.pagecode import make_coded_pdf

LINE = re.compile(r"\[vlmocr\] (?P<phase>\w+) (?P<done>\d+)/(?P<total>\d+) pages(?: read)?"
                  r"(?: \(already read: (?P<already>\d+)\))?, (?P<rate>[\d.]+) pages/s(?:, (?P<eta>ETA [^,]+))?")


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# ---------------------------------------------------------------- the rate estimator


def test_rate_is_the_last_minute_not_the_average_since_start():
    rate = RecentRate(start=0.0)
    t = 0.0
    for _ in range(600):  # a fast first minute: 10 pages/s
        t += 0.1
        rate.add(t)
    for _ in range(120):  # then the server slows down: 1 page/s for two minutes
        t += 1.0
        rate.add(t)
    since_start = 720 / t
    assert since_start > 3.9  # what the old estimate (done / elapsed) would say
    assert rate.rate(t) == pytest.approx(1.0, abs=0.05)
    assert eta_seconds(300, rate.rate(t)) == pytest.approx(300, rel=0.05)


def test_rate_in_the_first_minute_spans_the_time_since_the_phase_began():
    rate = RecentRate(start=100.0)
    for i in range(16):  # sixteen pages in flight finish together 8 s after the start
        rate.add(108.0 + i * 0.001)
    # Not 16 pages in 16 ms: 16 pages in the 8 s the phase has lasted.
    assert rate.rate(108.016) == pytest.approx(16 / 8.016, rel=1e-3)


def test_rate_falls_to_zero_when_nothing_finished_lately_and_the_eta_is_unknown():
    rate = RecentRate(start=0.0)
    for i in range(100):
        rate.add(i * 0.5)
    assert rate.rate(50.0) > 0
    later = 50.0 + RATE_WINDOW + 2
    assert rate.rate(later) == 0.0
    assert format_eta(eta_seconds(10, rate.rate(later))) == "ETA ?"
    assert format_eta(eta_seconds(0, 0.0)) == "ETA 0 s"


def test_eta_reads_as_a_person_would_say_it():
    assert format_eta(42.4) == "ETA 42 s"
    assert format_eta(3 * 60 + 5) == "ETA 3 min 05 s"
    assert format_eta(2 * 3600 + 7 * 60) == "ETA 2 h 07 min"
    assert format_eta(3 * 86400 + 4 * 3600) == "ETA 3 d 04 h"


# ---------------------------------------------------------------- the progress line


def test_line_counts_documents_until_the_total_is_known_then_pages_owed(capsys):
    clock = FakeClock()
    progress = RunProgress(enabled=True, clock=clock, every=0.0)
    progress.start()
    progress.count_documents(3)
    progress.counted(owed=0, already=40)  # finished by an earlier run
    progress.counted(owed=10, already=2)
    clock.t += 2
    progress.advance("ok")
    assert progress.line().startswith("1 pages of 10+ (documents 2/3 counted)")
    assert "ETA" not in progress.line()  # a lower bound of the total gives no ETA
    progress.counted(owed=5, already=0)
    assert progress.line().startswith("1/15 pages (already read: 42), 0.50 pages/s, ETA 28 s, ok=1")
    err = capsys.readouterr()
    assert err.out == ""  # never stdout
    assert "[vlmocr] reading 1/15 pages (already read: 42)" in err.err


def test_eta_follows_the_recent_rate_after_a_slow_start():
    clock = FakeClock()
    progress = RunProgress(enabled=False, clock=clock)
    progress.start()
    progress.count_documents(1)
    progress.counted(owed=1000, already=0)
    clock.t += 120  # two minutes of start-up (a model loading, a resume walking done documents)
    for _ in range(600):  # then 5 pages/s
        clock.t += 0.2
        progress.advance("ok")
    assert progress.rate() == pytest.approx(5.0, rel=0.05)
    assert format_eta(eta_seconds(400, progress.rate())) in progress.line()
    assert "ETA 1 min 2" in progress.line()  # 400 pages at 5/s; done/elapsed would say 3 min 47 s


def test_a_new_phase_starts_at_zero_of_its_own_pages():
    clock = FakeClock()
    progress = RunProgress(enabled=False, clock=clock)
    progress.start()
    progress.count_documents(1)
    progress.counted(owed=2, already=0)
    for status in ("ok", "loop"):
        clock.t += 1
        progress.advance(status)
    progress.start_phase("retrying", 1)
    assert progress.line().startswith("0/1 pages, 0.00 pages/s, ETA ?")
    clock.t += 3
    progress.advance("ok")
    assert progress.line().startswith("1/1 pages") and progress.line().endswith("ok=1")


# ---------------------------------------------------------------- a real resumed run


def test_resumed_run_shows_the_pages_owed_now_with_an_eta_from_its_rate(tmp_path):
    """Six documents of two pages; an earlier run read three. The resumed run owes six pages:
    every line says x/6 (the old total, done + in flight, said 1/2, 3/4 …), the pages read before
    are apart, one review page climbs the ladder as a phase of its own, nothing on stdout."""
    first, every = tmp_path / "first", tmp_path / "all"
    first.mkdir()
    every.mkdir()
    for d in range(6):
        pdf = make_coded_pdf(every / f"doc{d}.pdf", [10 * d + 1, 10 * d + 2])
        if d < 3:
            shutil.copy(pdf, first / pdf.name)
    run = tmp_path / "run"
    env = {"VLMOCR_API_KEY": "", "OPENAI_API_KEY": "", "VLMOCR_PROGRESS_EVERY": "0"}
    with serve_in_process(ServerConfig(latency=0.15, faults={"loop": {"pages": [41], "times": 1}})) as srv:
        args = ("--out", str(run), "--endpoint", srv.url, "--request-timeout", "5", "--workers", "1",
                "--concurrency", "2", "--fixed-concurrency")
        assert run_cli("run", str(first), *args, env=env).returncode == 0
        res = run_cli("run", str(every), *args, env=env)
    assert res.returncode == 0, res.stderr
    assert "[vlmocr]" not in res.stdout and "pages/s" not in res.stdout

    lines = [m for m in map(LINE.search, res.stderr.splitlines()) if m]
    reading = [m for m in lines if m["phase"] == "reading"]
    assert reading, res.stderr
    assert {int(m["total"]) for m in reading} == {6}, res.stderr  # the pages owed, from the first line on
    assert {m["already"] for m in reading} == {"6"}
    done = [int(m["done"]) for m in reading]
    assert done == sorted(done) and done[-1] == 6
    retrying = [m for m in lines if m["phase"] == "retrying"]
    assert retrying and (retrying[-1]["done"], retrying[-1]["total"]) == ("1", "1"), res.stderr

    checked = 0
    for m in reading:  # the ETA is the pages still owed at the rate shown on the same line
        rate, owed = float(m["rate"]), int(m["total"]) - int(m["done"])
        if rate >= 0.5 and owed:
            eta = int(re.fullmatch(r"ETA (\d+) s", m["eta"])[1])
            slack = owed / (rate - 0.005) - owed / (rate + 0.005) + 1  # the rate is shown rounded
            assert abs(eta - owed / rate) <= slack, m[0]
            checked += 1
    assert checked, res.stderr

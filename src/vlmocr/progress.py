"""Progress on stderr (never stdout: stdout carries results and --json).

What a person sees must be true: the total is the number of pages this run owes (counted before
or while reading: "documents 120/5000 counted" until it is known), pages earlier runs finished
are shown apart ("already read: N") and never as progress of this run, and the rate and the ETA
come from the completions of the last minute (`RecentRate`), not from the rate since start,
which holds start-up, model checks and a resume's walk over finished documents."""

from __future__ import annotations

import sys
import time
from collections import Counter, deque
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from . import envvars

console = Console(stderr=True, highlight=False, soft_wrap=True)

RATE_WINDOW = 60.0  # seconds of completions the rate is measured over
REDRAW_EVERY = 0.1  # seconds between two renderings of the line (a page may finish every ms)


class RecentRate:
    """Completions per second over the last `window` seconds, from one-second buckets (so a run
    of a million pages keeps at most `window` numbers). Until `window` seconds have passed since
    `start` the rate is over the time since `start`: a burst of the first pages in flight
    finishing together is not mistaken for the pace."""

    def __init__(self, start: float, window: float = RATE_WINDOW) -> None:
        self.start = start
        self.window = window
        self._buckets: deque[list[float]] = deque()  # [second, completions]
        self._sum = 0.0

    def add(self, now: float, n: int = 1) -> None:
        second = float(int(now))
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += n
        else:
            self._buckets.append([second, float(n)])
        self._sum += n

    def rate(self, now: float) -> float:
        horizon = now - self.window
        while self._buckets and self._buckets[0][0] + 1 <= horizon:
            self._sum -= self._buckets.popleft()[1]
        span = min(self.window, now - self.start)
        return self._sum / span if span > 0 else 0.0


def eta_seconds(remaining: int, rate: float) -> float | None:
    """Seconds to read `remaining` pages at `rate` pages/s; None when nothing moved lately."""
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate > 0 else None


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    s = round(seconds)
    if s < 60:
        return f"ETA {s} s"
    if s < 3600:
        return f"ETA {s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"ETA {s // 3600} h {s % 3600 // 60:02d} min"
    return f"ETA {s // 86400} d {s % 86400 // 3600:02d} h"


class RunProgress:
    """The pages owed, done, their rate and ETA, and the statuses so far, phase by phase
    ("reading": the first reads; "retrying": the retry ladder). A no-op when disabled (library
    use, tests). On a terminal a rich bar; elsewhere (a SLURM log, a pipe) one plain line every
    VLMOCR_PROGRESS_EVERY seconds (default 10), and one when the total is known and when a
    phase ends."""

    def __init__(self, enabled: bool = True, *, clock: Callable[[], float] = time.monotonic,
                 every: float | None = None) -> None:
        self.enabled = enabled
        self.clock = clock
        if every is None:  # read only when shown: library use never trips on the environment
            every = envvars.env_float(envvars.PROGRESS_EVERY, 10.0, minimum=0.0) if enabled else 10.0
        self.every = every
        self.phase = "reading"
        self.counts: Counter[str] = Counter()
        self.total = 0  # pages owed in this phase (those known so far while counting)
        self.done = 0
        self.already = 0  # pages earlier runs read: shown apart, never as this run's progress
        self.docs_total = 0
        self.docs_counted = 0
        self.counting = False
        self.extra = ""
        self._rate = RecentRate(clock())
        self._last_plain = clock()
        self._last_draw = float("-inf")
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    # ------------------------------------------------------------------ what happens

    def start(self) -> None:
        self._rate = RecentRate(self.clock())
        self._last_plain = self.clock()
        if not self.enabled:
            return
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[line]}", markup=False),
                console=console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.phase, total=None, line="")

    def count_documents(self, n: int) -> None:
        """`n` documents will be counted; until they are, the total is a lower bound."""
        self.docs_total, self.docs_counted, self.counting = n, 0, n > 0
        self._refresh()

    def counted(self, owed: int, already: int) -> None:
        """One more document counted: `owed` pages to read now, `already` read before."""
        self.docs_counted += 1
        self.total += owed
        self.already += already
        if self.docs_counted >= self.docs_total:
            self.counting = False
            self._refresh(milestone=True)
        else:
            self._refresh()

    def start_phase(self, phase: str, total: int) -> None:
        """A new phase of `total` pages: its own count, statuses and rate."""
        self.phase, self.total, self.done, self.already = phase, total, 0, 0
        self.counting = False
        self.counts.clear()
        self._rate = RecentRate(self.clock())
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=phase)
        self._refresh(milestone=True)

    def advance(self, status: str) -> None:
        """One page of this phase finished with `status`."""
        self.done += 1
        self.counts[status] += 1
        self._rate.add(self.clock())
        self._refresh(milestone=not self.counting and self.done == self.total)

    # ------------------------------------------------------------------ what is shown

    def rate(self) -> float:
        return self._rate.rate(self.clock())

    def status_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))

    def line(self) -> str:
        """The line a person reads, e.g. `12/40 pages (already read: 960), 0.52 pages/s,
        ETA 54 s, ok=12`; while counting `12 pages of 40+ (documents 120/5000 counted), …`."""
        rate = self.rate()
        if not self.counting and not self.total:  # nothing owed in this phase: no rate, no ETA
            return f"0/0 pages (already read: {self.already})" if self.already else "0/0 pages"
        if self.counting:
            parts = [f"{self.done} pages of {self.total}+ (documents {self.docs_counted}/{self.docs_total} counted)"]
        else:
            parts = [f"{self.done}/{self.total} pages" + (f" (already read: {self.already})" if self.already else "")]
        parts.append(f"{rate:.2f} pages/s")
        if not self.counting:
            parts.append(format_eta(eta_seconds(self.total - self.done, rate)))
        text = ", ".join(parts)
        statuses = " ".join(s for s in (self.status_text(), self.extra) if s)
        return f"{text}, {statuses}" if statuses else text

    def _refresh(self, milestone: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if self._progress is not None and self._task is not None:
            if milestone or now - self._last_draw >= REDRAW_EVERY:
                self._last_draw = now
                # total None: a pulsing bar while counting; an empty phase shows full.
                total = None if self.counting else max(self.total, 1)
                completed = self.done if self.total else (0 if self.counting else 1)
                self._progress.update(self._task, total=total, completed=completed, line=self.line())
        elif milestone or now - self._last_plain >= self.every:
            self._last_plain = now
            print(f"[vlmocr] {self.phase} {self.line()}", file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        if self.enabled:
            console.print(message)

    def stop(self) -> None:
        if self._progress is not None:
            if self._task is not None:
                self._last_draw = float("-inf")
                self._refresh(milestone=True)
            self._progress.stop()
            self._progress = None

"""Progress on stderr (never stdout: stdout carries results and --json)."""

from __future__ import annotations

import sys
import time
from collections import Counter

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

console = Console(stderr=True, highlight=False, soft_wrap=True)


class RunProgress:
    """pages/s, ETA and the statuses so far; a no-op when disabled (library use, tests)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.counts: Counter[str] = Counter()
        self.total = 0
        self.done = 0
        self.before = 0
        self._t0 = time.monotonic()
        self._last_plain = 0.0
        self._progress: Progress | None = None
        self._task = None
        self.extra = ""

    def start(self) -> None:
        if not self.enabled:
            return
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[statuses]}"),
                console=console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("reading", total=0, rate="", statuses="")

    def add_total(self, n: int) -> None:
        self.total += n
        self._refresh()

    def add_before(self, n: int) -> None:
        self.before += n

    def advance(self, status: str) -> None:
        self.done += 1
        self.counts[status] += 1
        self._refresh()

    def rate(self) -> float:
        elapsed = time.monotonic() - self._t0
        return self.done / elapsed if elapsed > 0 else 0.0

    def status_text(self) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))

    def _refresh(self) -> None:
        if not self.enabled:
            return
        rate = f"{self.rate():.2f} pages/s"
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, total=self.total, completed=self.done, rate=rate,
                statuses=(self.status_text() + (" " + self.extra if self.extra else "")),
            )
        else:
            # Not a terminal (a SLURM log, a pipe): a plain line every 10 s is enough.
            now = time.monotonic()
            if now - self._last_plain > 10 or (self.total and self.done == self.total):
                self._last_plain = now
                print(f"[vlmocr] {self.done}/{self.total} pages read, {rate}, {self.status_text()} {self.extra}",
                      file=sys.stderr, flush=True)

    def note(self, message: str) -> None:
        if self.enabled:
            console.print(message)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

"""What every scheduler of vlmocr shares, whatever its tasks are (pages, figures): a bounded
number of tasks in flight, a graceful stop on SIGTERM (stop taking tasks, let those in flight
finish for a grace period; a second signal abandons them), a stop at once on SIGINT (Ctrl-C: the
tasks in flight are abandoned and done again on resume), one fatal error that stops
the run, and a failed write that stops it at once.

A task's own failures are its business (it writes a record naming them); what escapes a task
is a bug, which stops the run and is raised once the tasks in flight have ended: never
"Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import signal
from typing import Any, AsyncIterator, Awaitable, Callable

from ..exceptions import StoreFailed, VlmocrError
from .limiter import Limiter


class TaskRunner:
    def __init__(self, note: Callable[[str], None], stop_grace: float = 60.0) -> None:
        self.note = note
        self.stop_grace = stop_grace
        self.stop = asyncio.Event()
        self.abandon = asyncio.Event()
        self.fatal: VlmocrError | None = None
        self.signals = 0
        self._installed: list[tuple[int, Any]] = []  # (signal, the handler it had before listen)

    @property
    def interrupted(self) -> bool:
        """Stopped by a signal (not by a fatal error)."""
        return self.stop.is_set() and self.fatal is None

    # ------------------------------------------------------------------ signals

    def listen(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self.on_signal, sig)
                self._installed.append((sig, previous))
            except (NotImplementedError, RuntimeError):
                pass

    def stop_listening(self) -> None:
        """Remove the graceful handlers and put back the ones they replaced. asyncio would leave
        SIGTERM's default action behind, and a SIGTERM from then until the command ends (the
        event loop closing, a grid's next cell being scored) would kill vlmocr outright: with
        ``--serve`` (running._sigterm_raises was there) its server would outlive it. Both
        signals are held while the handlers change hands, so none meets the default action."""
        if not self._installed:
            return
        loop = asyncio.get_running_loop()
        installed, self._installed = self._installed, []
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {sig for sig, _ in installed})
        try:
            for sig, previous in installed:
                loop.remove_signal_handler(sig)
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # one held meanwhile is delivered now

    def on_signal(self, signum: int) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        # Ctrl-C is a person waiting, and a runner without grace (a CPU run) has nothing worth
        # waiting for: stop now. The tasks in flight write nothing and are done again on
        # resume; SIGTERM on a VLM run (SLURM's early warning) keeps its grace below.
        if signum == signal.SIGINT or self.stop_grace <= 0:
            self.stop.set()
            if not self.abandon.is_set():
                self.note(f"[yellow]{name}: stopping now; the tasks in flight are abandoned (read again on resume)")
            self.abandon.set()
        elif self.signals == 1:
            self.stop.set()
            self.note(f"[yellow]{name}: taking no more tasks; finishing those in flight "
                      f"(up to {self.stop_grace:.0f} s; signal again to abandon them)")
            asyncio.get_running_loop().call_later(self.stop_grace, self.abandon.set)
        else:
            self.note(f"[red]{name}: abandoning the tasks in flight")
            self.abandon.set()

    # ------------------------------------------------------------------ failures

    def fail(self, exc: VlmocrError) -> None:
        """Stop taking tasks because of `exc`; the first such error is the run's."""
        if self.fatal is None:
            self.fatal = exc
            self.note(f"[red]{exc}: taking no more tasks")
        self.stop.set()

    def store_failed(self, what: str, exc: OSError) -> None:
        """A record could not be written (disk full, read-only, I/O error): stop at once, and
        abandon the tasks in flight, whose records could not be written either."""
        if not isinstance(self.fatal, StoreFailed):
            self.fatal = None
            self.fail(StoreFailed(f"cannot write {what}: {exc.strerror or exc}; free space (or fix the "
                                  f"file system) and resubmit: the run resumes"))
        self.abandon.set()

    @property
    def store_broken(self) -> bool:
        return isinstance(self.fatal, StoreFailed)

    # ------------------------------------------------------------------ running

    async def drain(self, jobs: AsyncIterator[Any], work: Callable[[Any], Awaitable[None]], limiter: Limiter,
                    describe: Callable[[Any], str] = str) -> None:
        """Run `work(job)` for every job with at most `limiter.limit` in flight; on abandon,
        cancel those in flight (they write nothing, so a resubmit does them again)."""
        inflight: set[asyncio.Task] = set()

        async def one(job: Any) -> None:
            try:
                await work(job)
            except Exception as exc:
                self.fail(VlmocrError(f"internal error in {describe(job)}: {type(exc).__name__}: {exc}"))
            finally:
                limiter.release()

        async def produce() -> None:
            async for job in jobs:
                await limiter.acquire()
                if self.stop.is_set():
                    limiter.release()
                    return
                task = asyncio.create_task(one(job))
                inflight.add(task)
                task.add_done_callback(inflight.discard)

        producer = asyncio.create_task(produce())
        abandon_wait = asyncio.create_task(self.abandon.wait())
        try:
            await asyncio.wait({producer, abandon_wait}, return_when=asyncio.FIRST_COMPLETED)
            if producer.done() and not producer.cancelled() and producer.exception() is not None:
                exc = producer.exception()
                self.fail(VlmocrError(f"internal error while planning: {type(exc).__name__}: {exc}"))
            while inflight and not self.abandon.is_set():
                await asyncio.wait(set(inflight) | {abandon_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            abandon_wait.cancel()
            if not producer.done():
                producer.cancel()
            pending = list(inflight)
            for task in pending:
                task.cancel()
            await asyncio.gather(producer, abandon_wait, *pending, return_exceptions=True)

"""The worker pool every reader renders in: forkserver processes that preload the page code and
the engines' libraries, and survive a page that crashes its worker."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..engines.base import EngineOptions
from ..engines.registry import preload_modules
from . import worker as pagework
from .context import PageContext


def _short_socket_dir() -> None:
    """The forkserver listens on a Unix socket under $TMPDIR, and socket paths are limited to
    ~107 bytes. Cluster jobs get long per-job TMPDIRs (/scratch/slurm_tmpdir/job_…/…): put
    multiprocessing's own directory under /tmp then, or the pool cannot start."""
    import tempfile
    from multiprocessing import process, util

    if getattr(process.current_process(), "_config", {}).get("tempdir") or len(tempfile.gettempdir()) <= 60:
        return
    if not os.access("/tmp", os.W_OK):
        return
    old = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        util.get_temp_dir()  # created now and cached for this process
    finally:
        tempfile.tempdir = old




def _context(engines: tuple[str, ...] = (), modules: tuple[str, ...] = ()) -> multiprocessing.context.BaseContext:
    # forkserver: workers never inherit the scheduler's event loop, threads or sockets. The
    # server imports the page code (and the engines' libraries) once, so every worker, and
    # every replacement after a crash, starts with them loaded instead of importing anew.
    _short_socket_dir()
    ctx = multiprocessing.get_context("forkserver")
    preload = ["vlmocr.reading.worker", "vlmocr.text.quality", "numpy", "PIL.Image", "pypdfium2"]
    preload += preload_modules(engines) + list(modules)
    ctx.set_forkserver_preload(preload)
    return ctx


class WorkerPool:
    """A process pool that survives a worker crash (a page that segfaults pdfium).

    Pages in flight when a worker dies are re-run one at a time in a quarantine process, so
    the page that crashes is identified and gets a `bad_input` record while the others
    succeed."""

    def __init__(self, workers: int, options: EngineOptions) -> None:
        self.workers = workers
        self.options: EngineOptions = {**options, "scheduler_pid": os.getpid()}
        # What every page is read under: handed to the workers with each page (worker.py).
        self.context = PageContext.of(options)
        self._pool = self._new_pool(workers)
        self._generation = 0
        self._quarantine_lock = asyncio.Lock()

    def _new_pool(self, n: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=n, mp_context=_context(tuple(self.options.get("preload", ())),
                                               tuple(self.options.get("preload_modules", ()))),
            initializer=pagework.init_worker, initargs=(self.options.get("scheduler_pid"),),
        )

    def warm(self) -> None:
        """Start the workers in the background. A worker process starts on the first task
        submitted for it, and submit() waits while the forkserver imports its preload (~0.5 s):
        a thread does that wait, overlapping it with the scheduler's own start-up."""
        import threading

        pool = self._pool

        def start() -> None:
            try:
                for _ in range(self.workers):
                    pool.submit(pagework.warm)
            except RuntimeError:
                pass  # shut down before it started: nothing to warm

        threading.Thread(target=start, name="vlmocr-pool-warm", daemon=True).start()

    async def call(self, fn, *args) -> Any:
        loop = asyncio.get_running_loop()
        generation = self._generation
        try:
            return await loop.run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            if generation == self._generation:
                # First to notice: replace the broken pool for everyone else.
                self._generation += 1
                old, self._pool = self._pool, self._new_pool(self.workers)
                old.shutdown(wait=False, cancel_futures=True)
            raise

    async def call_isolated(self, fn, *args) -> Any:
        """Run alone in a fresh single-process pool; raises BrokenProcessPool if it crashes."""
        async with self._quarantine_lock:
            pool = self._new_pool(1)
            try:
                return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
            finally:
                pool.shutdown(wait=False, cancel_futures=True)

    async def call_safely(self, fn, *args) -> tuple[bool, Any]:
        """(True, result), or (False, None) when the call crashed its process twice."""
        try:
            return True, await self.call(fn, *args)
        except BrokenProcessPool:
            pass
        try:
            return True, await self.call_isolated(fn, *args)
        except BrokenProcessPool:
            return False, None

    def shutdown(self, abandon: bool = False) -> None:
        if abandon:
            # Kill workers outright: a second signal means the user wants out now.
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                try:
                    proc.kill()
                except Exception:
                    pass
        self._pool.shutdown(wait=not abandon, cancel_futures=True)
        if abandon:
            # Let the executor's manager thread finish closing its wake-up pipe (the workers are
            # dead: it takes milliseconds) before the interpreter exits: Python 3.11's exit hook
            # writes to that pipe and, racing the thread's close, printed "Exception ignored …
            # OSError: [Errno 9] Bad file descriptor" after a run stopped by a full disk.
            manager = getattr(self._pool, "_executor_manager_thread", None)
            if manager is not None:
                manager.join(timeout=5)

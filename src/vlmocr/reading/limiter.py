"""How many pages are in flight: a semaphore whose size can change while it is held, and the
controller that sizes it from the server's own queue gauges.

A fixed concurrency is either too low (the GPU idles between batches) or too high (requests
pile up in the server's waiting queue, where they time out and are retried). vLLM and SGLang
export how many requests run and how many wait; keeping `waiting` small but not zero keeps the
server's batch full without a deep queue."""

from __future__ import annotations

import asyncio
import math
from collections import deque


class Limiter:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.in_use = 0
        self._waiters: deque[asyncio.Future] = deque()
        self.history: list[int] = [self.limit]

    async def acquire(self) -> None:
        while self.in_use >= self.limit:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut in self._waiters:
                    self._waiters.remove(fut)
                raise
        self.in_use += 1

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    async def __aenter__(self) -> "Limiter":
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def set_limit(self, limit: int) -> None:
        limit = max(1, int(limit))
        if limit != self.limit:
            self.limit = limit
            self.history.append(limit)
            self._wake()

    def _wake(self) -> None:
        free = self.limit - self.in_use
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1


def render_ahead(requests: int, workers: int) -> int:
    """Pages rendered and waiting for a request slot, beyond the requests at the server. When a
    wave of answers arrives together, their successors are already encoded, so the server is
    refilled at once instead of after a round of rendering (without it, K = C kept only
    0.87-0.91 of C requests at the server: BENCHMARKS.md, saturation). Bounded so that the
    waiting data URLs (about 1 MB each at 1288 px) stay near 100 MB."""
    return min(96, max(2 * workers, -(-requests // 4)))


def next_limit(limit: int, in_use: int, running: float, waiting: float, lo: int, hi: int) -> int:
    """One control step. Shrink when the server queues more than a small margin; grow when we
    use our whole allowance and the server queues nothing (it has free slots)."""
    margin = max(2.0, 0.1 * running)
    if waiting > margin:
        return max(lo, limit - math.ceil((waiting - margin) / 2))
    if waiting <= 0.5 and in_use >= limit - 1:
        return min(hi, limit + max(1, limit // 4))
    return limit

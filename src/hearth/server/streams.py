"""Streamed replies: a synchronous body closed where it runs, not wherever it is collected.

Starlette reads a synchronous body one item at a time on worker threads. When the client goes away
(the person pressed Stop) it abandons the iteration, and the body would be closed by the garbage
collector on whichever thread happens to collect it, perhaps one inside another request's
transaction. ``closing`` closes it at once, on a worker thread of its own, so the reply's clean-up
(what the assembly searched is written, the reply is marked ended, W2/A3) runs in a transaction
of its own.
"""

from __future__ import annotations

from typing import AsyncIterator, Generator, TypeVar

import anyio
from starlette.concurrency import iterate_in_threadpool

SSE_MEDIA_TYPE = "text/event-stream"

T = TypeVar("T")


async def closing(body: Generator[T, None, None]) -> AsyncIterator[T]:
    """``body``'s items; however the response ends, ``body`` is closed on a worker thread."""
    try:
        async for item in iterate_in_threadpool(body):
            yield item
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(body.close)

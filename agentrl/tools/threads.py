"""Running blocking tool functions off the event loop, in a way a timeout can abandon."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a blocking `fn` in a fresh daemon thread and await its result.

    Unlike `asyncio.to_thread`, a call abandoned by a timeout neither holds a slot of the loop's shared
    executor (which would starve other work) nor keeps the interpreter from exiting. The thread itself cannot
    be killed: a hung function keeps running until it returns.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            result = context.run(fn, *args, **kwargs)
        except BaseException as exc:
            _deliver(loop, future, None, exc)
        else:
            _deliver(loop, future, result, None)

    # A low-level thread: unlike threading.Thread it is never joined at exit and starts without a handshake.
    _thread.start_new_thread(target, ())
    return await future


def _deliver(
    loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], result: Any, exc: BaseException | None
) -> None:
    def settle() -> None:
        if future.done():  # cancelled by a timeout meanwhile
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop closed while fn ran; nobody waits for the result
        loop.call_soon_threadsafe(settle)

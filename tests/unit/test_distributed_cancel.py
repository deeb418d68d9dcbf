"""A Ctrl-C that lands as the rollout workers finish starting (or closing) must still stop the rollout.

Python 3.11's `asyncio.wait_for` returns the result when its task is cancelled in the same loop iteration as the
awaited future completes, and the cancellation is lost: in a CI run the interrupt came as the workers' sandboxes
came up, and `agentrl rollout` ran on to the end and exited 0."""

import asyncio
from types import SimpleNamespace

import pytest

from agentrl.loops.distributed import DistributedRolloutManager, _all_started, _close


def worker_answering(future: asyncio.Future) -> SimpleNamespace:
    call = SimpleNamespace(remote=lambda: future)
    return SimpleNamespace(actor=SimpleNamespace(start=call, close=call), name="w0")


async def cancelled_as_it_completes(make_call) -> None:
    future = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(make_call(worker_answering(future)))
    await asyncio.sleep(0)  # the task now waits for the worker's answer
    future.set_result("w0")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_cancel_as_the_workers_finish_starting_is_not_lost():
    asyncio.run(cancelled_as_it_completes(lambda worker: _all_started([worker])))


def test_a_cancel_as_a_worker_is_revived_is_not_lost():
    asyncio.run(cancelled_as_it_completes(DistributedRolloutManager._revived))


def test_a_cancel_as_the_workers_finish_closing_is_not_lost():
    asyncio.run(cancelled_as_it_completes(lambda worker: _close([worker])))

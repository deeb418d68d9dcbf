"""`agentrl train` stopped by SIGTERM shuts down the servers it started instead of leaving them orphaned."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from agentrl.cli import Terminated, _raise_interrupted, _raise_terminated, _stop_cleanly_on_signals

# `train` is replaced by one that starts a server process and waits, as the real one does while training.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    import agentrl.trainer.loop as loop
    from agentrl.rollout.servers.process import ServerProcess

    def train(cfg, **_):
        with ServerProcess([sys.executable, "-c", "import time; time.sleep(120)"], name="child") as server:
            print(server.pid, flush=True)
            time.sleep(120)

    loop.train = train
    from agentrl.cli import main
    sys.exit(main(["train", "recipe=quickstart"]))
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sigterm_stops_the_servers_train_started_and_exits_143():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        server_pid = int(proc.stdout.readline())
        assert _alive(server_pid)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert "terminated" in proc.stderr.read()
        deadline = time.monotonic() + 10
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server_pid), "the server outlived agentrl train"
    finally:
        proc.kill()


def test_sigterm_landing_in_a_finalizer_still_stops_the_event_loop():
    """A signal handler can run inside any `__del__`, where a raised exception is only printed; the handler must
    stop `asyncio.run` all the same (the gateway once served on after SIGTERM that way)."""

    class Finalized:
        def __del__(self) -> None:
            _raise_terminated(signal.SIGTERM, None)

    cleaned_up = []

    async def serve() -> None:
        Finalized()  # dropped at once: its __del__ runs here, as a signal handler might
        try:
            await asyncio.sleep(5)
        finally:
            cleaned_up.append(True)

    with pytest.raises(Terminated):  # lost in the finalizer, the sleep would end and nothing be raised
        asyncio.run(serve())
    assert cleaned_up == [True]


def test_sigterm_outside_an_event_loop_raises_at_once():
    with pytest.raises(Terminated):
        _raise_terminated(signal.SIGTERM, None)


def test_sigint_stops_the_event_loop_where_a_dropped_cancellation_would_not():
    """asyncio's own SIGINT handler cancels the main task, and a cancellation can be dropped on its way (Python
    3.11's wait_for drops one that lands as the awaited call completes): `agentrl rollout` then ran on to the end
    after Ctrl-C. The CLI's handler raises KeyboardInterrupt from the loop instead."""
    steps = []

    async def rollout() -> None:
        _raise_interrupted(signal.SIGINT, None)
        for _ in range(3):
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                steps.append("cancelled")  # dropped, as wait_for would
            steps.append("step")

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(rollout())
    assert steps[0] == "cancelled"  # stopped at its first await, not after its three steps


def test_the_cli_takes_over_default_sigint_and_sigterm_handlers_only():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _stop_cleanly_on_signals()
        assert signal.getsignal(signal.SIGINT) is _raise_interrupted
        assert signal.getsignal(signal.SIGTERM) is _raise_terminated
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # e.g. a parent's choice: kept
        _stop_cleanly_on_signals()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])


def test_the_cli_unblocks_sigint_and_sigterm_a_parent_left_blocked():
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        _stop_cleanly_on_signals()
        assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

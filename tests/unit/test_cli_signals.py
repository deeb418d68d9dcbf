"""`agentrl train` stopped by SIGTERM shuts down the servers it started instead of leaving them orphaned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

# `train` is replaced by one that starts a server process and waits, as the real one does while training.
SCRIPT = textwrap.dedent(
    """
    import sys, time
    import agentrl.trainer.loop as loop
    from agentrl.rollout.servers.process import ServerProcess

    def train(cfg):
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

"""How a command runs in a sandbox container: the wrapper that gives it a timeout and kills its process group, the
script that stops a cancelled one, and the cap on the output kept."""

from __future__ import annotations

from agentrl.sandbox.base import cap_bytes

KILL_GRACE_S = 1.0
"""Seconds between SIGTERM and SIGKILL to a timed-out command's process group."""
WATCHDOG_GRACE_S = 5.0
"""Seconds past the timeout after which every process of the container (but PID 1) is killed."""

# Runs one command: `timeout` leads a process group of its own and kills it on expiry; whatever is left in that
# group when the command ends (`cmd &`, a fork bomb) is killed too, so nothing outlives the call unless it leaves
# the group on purpose (`setsid`). Exit codes: the command's, 124 on timeout, 137 when SIGKILLed.
# On SIGTERM (an exec cancelled by its caller, `STOP_EXEC`) it kills that group at once and exits 143.
WRAPPER = (
    "trap 'kill -9 -- -$pid 2>/dev/null; exit 143' TERM; "
    'timeout -k "$3" "$2" bash -c "$1" & pid=$!; wait $pid; rc=$?; kill -9 -- -$pid 2>/dev/null; exit $rc'
)
# SIGTERM to the wrapper whose $0 (its cmdline's 4th word: `bash -c WRAPPER $0 ...`) is the exec's tag, found
# through /proc so that it needs nothing but bash in the image.
STOP_EXEC = (
    'for d in /proc/[0-9]*; do mapfile -d "" -t a < "$d/cmdline" 2>/dev/null && [ "${a[3]}" = "$1" ] '
    '&& kill -TERM "${d#/proc/}" 2>/dev/null; done; true'
)


class CappedOutput:
    """Collects a stream's bytes up to a cap, counting the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.buf, self.dropped = cap, bytearray(), 0

    def add(self, chunk: bytes | None) -> None:
        if not chunk:
            return
        room = self.cap - len(self.buf)
        self.buf += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        return cap_bytes(bytes(self.buf), self.dropped)

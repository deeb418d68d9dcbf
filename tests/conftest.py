"""Settings for the whole test session."""

import os
import signal

# As `agentrl` sets it before torch loads (cli.main): here torch loads while tests are collected, long before a test
# calls the CLI in-process, so the setting must come first. Spinning OpenMP threads of an in-process trainer would
# otherwise take the CPU from the servers and workers it runs beside (2 cores).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config) -> None:
    # A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and an ignored signal stays
    # ignored across exec: every process a test starts would ignore the Ctrl-C the test sends it, and run on to its
    # end (a signal test then waits out its child's work, the CLI's Ctrl-C test fails). Ctrl-C as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

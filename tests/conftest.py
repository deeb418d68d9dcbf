"""Settings for the whole test session."""

import signal


def pytest_configure(config) -> None:
    # A suite started in the background (`make test &`, nohup) inherits SIGINT ignored, and an ignored signal stays
    # ignored across exec: every process a test starts would ignore the Ctrl-C the test sends it, and run on to its
    # end (a signal test then waits out its child's work, the CLI's Ctrl-C test fails). Ctrl-C as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

"""Freed host memory goes back to the OS on CPU training (glibc would otherwise keep each step's peak)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

# Blocks under glibc's raised dynamic mmap threshold, each followed by a small survivor (as a training step
# leaves its outputs): freed, they stay in the heap unless large allocations are mapped. Prints MiB kept.
FRAGMENTING_STEP = textwrap.dedent(
    """
    import sys, torch
    from agentrl.trainer.host_memory import map_large_allocations, release_freed_memory

    def rss_mib():
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) // 1024

    if sys.argv[1] == "map":
        assert map_large_allocations()
    before, survivors, blocks = rss_mib(), [], []
    big = torch.ones(24 << 20, dtype=torch.uint8)
    del big  # glibc's dynamic threshold rises past the 8 MiB blocks below
    for _ in range(32):
        blocks.append(torch.ones(8 << 20, dtype=torch.uint8))
        survivors.append(torch.ones(256))
    del blocks
    kept = rss_mib() - before
    if sys.argv[2] == "trim":
        release_freed_memory()
    print(kept, rss_mib() - before)
    """
)


def kept_mib(mode: str, trim: bool) -> tuple[int, int]:
    args = [sys.executable, "-c", FRAGMENTING_STEP, mode, "trim" if trim else "keep"]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


def test_mapped_large_allocations_leave_the_process_when_freed():
    assert kept_mib("map", trim=False)[0] < 32  # 256 MiB were allocated and freed


def test_a_trim_returns_what_the_heap_kept():
    kept, after_trim = kept_mib("default", trim=True)
    assert after_trim < 32 and after_trim <= kept

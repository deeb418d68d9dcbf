"""benchmarks/server_prefill.py runs both variants on a tiny model and leaves the server's threshold as it was."""

from __future__ import annotations

import argparse
import asyncio

from agentrl.rollout.servers.hf import core
from agentrl.shared_prefix import MIN_SHARED_TOKENS
from benchmarks.server_prefill import gym_like_prompts, run


def test_prompts_repeat_states_and_share_the_prefix():
    prompts = gym_like_prompts(requests=10, states=3, prefix=20, state=8, vocab=100)
    assert len(prompts) == 10 and len({tuple(p) for p in prompts}) == 3
    assert all(p[:20] == prompts[0][:20] for p in prompts)


def test_a_quick_run_times_both_variants_and_restores_the_threshold():
    args = argparse.Namespace(quick=True, requests=8, states=3, prefix=24, state=8, reply=2, repeats=1)
    result = asyncio.run(run(args))
    assert set(result) == {"whole_s", "shared_s", "shared_speedup"}
    assert result["whole_s"] > 0 and result["shared_s"] > 0
    assert core.MIN_SHARED_TOKENS == MIN_SHARED_TOKENS

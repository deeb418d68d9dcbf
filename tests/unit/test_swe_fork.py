"""Forking the SWE loop's episodes: each child gets its own copy of the repository (a local sandbox here; the Docker
one is in tests/integration/test_tree_rollouts_real.py), the tools over it and the parent's deadline, continues
exactly as the parent would given the same seeds, and every container the episode made is closed."""

from __future__ import annotations

import asyncio
import json
import random
import shlex

import pytest

from agentrl.config.schema import AgentConfig
from agentrl.loops import swe
from agentrl.loops.context import AgentContext, Budgets
from agentrl.loops.swe import SWEAgentLoop
from agentrl.loops.testing import ScriptedOutput
from agentrl.loops.tree import TreeShape, run_tree
from agentrl.rollout.protocol import SamplingParams
from agentrl.sandbox.base import FORK_NOTE
from agentrl.sandbox.local import LocalSandbox
from agentrl.swe.task import SWETask
from agentrl.tools.builtin.shell import BashTool
from agentrl.tools.builtin.submit import SubmitTool
from agentrl.tools.toolset import ToolSet
from agentrl.types import StopReason, Trajectory

TASK = SWETask(instance_id="demo__fork-1", problem_statement="add words to notes.txt", image="unused:latest")
WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]


class EditingPolicy:
    """Appends a word drawn from the turn's seed to notes.txt, three times, then submits."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    async def generate(self, prompt_ids, sampling: SamplingParams, session_id=None) -> ScriptedOutput:
        edits = self.tokenizer.decode(prompt_ids).count("EDITED")
        if edits >= 3:
            call = {"name": "submit", "arguments": {"answer": "done"}}
        else:
            word = random.Random(sampling.seed).choice(WORDS)
            call = {"name": "bash", "arguments": {"command": f'echo {word} >> notes.txt && echo ED""ITED'}}
        text = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return ScriptedOutput(ids, [-0.5] * len(ids), "stop")


@pytest.fixture
def local_repos(monkeypatch):
    """The loop's containers as local git repositories (every one opened or forked is kept, to check it was
    closed)."""
    opened: list[LocalSandbox] = []

    async def open_repo(task, config, run_id):
        sandbox = LocalSandbox()
        opened.append(sandbox)
        setup = "git init -q . && echo start > notes.txt && git add -A && git -c user.name=t -c user.email=t@t "
        result = await sandbox.exec(setup + "commit -q -m base && git rev-parse HEAD", timeout=30)
        assert result.ok, result.stderr
        return sandbox, result.stdout.strip()

    async def diff(sandbox, task, base, timeout):
        return (await sandbox.exec(f"git add -A && git diff --cached {shlex.quote(base)}", timeout=timeout)).stdout

    async def fork(self, n):
        children = await forking(self, n)
        opened.extend(children)
        return children

    forking = LocalSandbox.fork
    monkeypatch.setattr(LocalSandbox, "fork", fork)
    monkeypatch.setattr(swe, "open_swe_sandbox", open_repo)
    monkeypatch.setattr(swe, "extract_patch", diff)
    return opened


def swe_loop(**options) -> SWEAgentLoop:
    return SWEAgentLoop(AgentConfig(name="swe_agent", tool_parser="hermes", kwargs=options))


def context(tokenizer, seed: int = 5) -> AgentContext:
    ctx = AgentContext(
        sample=TASK.to_sample(),
        trajectory=Trajectory(group_id="g"),
        llm=EditingPolicy(tokenizer),
        tokenizer=tokenizer,
        sampling=SamplingParams(temperature=1.0, max_tokens=64, seed=seed),
        budgets=Budgets(max_turns=10, max_tokens_per_turn=64, max_total_tokens=16384, max_model_len=16384),
    )
    ctx.tools = ToolSet([BashTool(), SubmitTool()], trajectory_id=ctx.trajectory.id)
    return ctx


def added_lines(patch: str) -> list[str]:
    return [line[1:] for line in patch.splitlines() if line[:1] == "+" and line[:3] != "+++"]


async def play_out(loop: SWEAgentLoop, ctx: AgentContext, state) -> Trajectory:
    try:
        while not await loop.step(ctx, state):
            pass
    finally:
        await loop.end(ctx, state)
    return ctx.trajectory


def test_a_forked_child_continues_exactly_as_its_parent_given_the_same_seeds(tokenizer, local_repos) -> None:
    async def scenario() -> tuple[Trajectory, Trajectory]:
        loop = swe_loop()
        alone = context(tokenizer)
        whole = await play_out(loop, alone, await loop.begin(alone.sample, alone))
        parent = context(tokenizer)
        state = await loop.begin(parent.sample, parent)
        assert not await loop.step(parent, state)
        child, sibling = parent.fork(2)
        child_state, sibling_state = await loop.fork_state(state, [child, sibling])
        await loop.discard(state)
        child.sampling = parent.sampling  # the parent's seeds: the child must go on as the parent did
        continued = await play_out(loop, child, child_state)
        await loop.end(sibling, sibling_state)
        return whole, continued

    whole, continued = asyncio.run(scenario())
    assert continued.stop_reason is whole.stop_reason is StopReason.DONE
    assert continued.token_ids == whole.token_ids and continued.metadata["model_patch"] == whole.metadata["model_patch"]
    assert len(added_lines(whole.metadata["model_patch"])) == 3
    assert continued.metadata["fork"] == FORK_NOTE and "fork" not in whole.metadata
    assert all(sandbox.closed for sandbox in local_repos) and len(local_repos) == 2 + 2  # two roots, two forks


def test_a_swe_tree_gives_each_leaf_the_shared_edit_and_its_own(tokenizer, local_repos) -> None:
    ctx = context(tokenizer)
    leaves = asyncio.run(run_tree(swe_loop(), ctx.sample, ctx, TreeShape(branch_turns=(1, 2), width=2)))
    assert len(leaves) == 4 and all(leaf.stop_reason is StopReason.DONE for leaf in leaves)
    added = [added_lines(leaf.metadata["model_patch"]) for leaf in leaves]
    assert all(len(words) == 3 for words in added) and len({words[0] for words in added}) == 1  # one root edit
    assert {tuple(words[:2]) for words in added} == {tuple(added[0][:2]), tuple(added[-1][:2])}  # two subtrees
    assert len({tuple(words) for words in added}) >= 2  # the leaves went their own ways
    assert all(sandbox.closed for sandbox in local_repos) and len(local_repos) == 1 + 2 + 4


def test_children_keep_the_parents_deadline(tokenizer, local_repos) -> None:
    async def scenario() -> list[float | None]:
        loop = swe_loop(time_budget_s=120)
        parent = context(tokenizer)
        state = await loop.begin(parent.sample, parent)
        children = parent.fork(2)
        states = await loop.fork_state(state, children)
        await loop.discard(state)
        for child, child_state in zip(children, states, strict=True):
            await loop.end(child, child_state)
        return [state.deadline, *(s.deadline for s in states)]

    deadlines = asyncio.run(scenario())
    assert deadlines[0] is not None and deadlines == [deadlines[0]] * 3
    assert all(sandbox.closed for sandbox in local_repos) and len(local_repos) == 3


def test_a_spent_time_budget_ends_the_episode_with_its_patch(tokenizer, local_repos) -> None:
    async def scenario() -> Trajectory:
        loop = swe_loop(time_budget_s=0.5)
        ctx = context(tokenizer)
        state = await loop.begin(ctx.sample, ctx)
        assert not await loop.step(ctx, state)  # one edit, in time
        await asyncio.sleep(0.6)
        return await play_out(loop, ctx, state)

    traj = asyncio.run(scenario())
    assert traj.stop_reason is StopReason.TIME_BUDGET and "time budget" in traj.error
    assert len(added_lines(traj.metadata["model_patch"])) == 1


def test_a_cancelled_tree_frees_every_sandbox_at_once(tokenizer, local_repos) -> None:
    class Slow(EditingPolicy):
        async def generate(self, prompt_ids, sampling, session_id=None):
            if self.tokenizer.decode(prompt_ids).count("EDITED") >= 1:
                await asyncio.sleep(30)  # the children's turns: cancelled while they wait
            return await super().generate(prompt_ids, sampling, session_id)

    async def scenario() -> None:
        ctx = context(tokenizer)
        ctx.llm = Slow(tokenizer)
        tree = asyncio.ensure_future(run_tree(swe_loop(), ctx.sample, ctx, TreeShape(branch_turns=(1,), width=2)))
        while len(local_repos) < 3:  # the root and its two forks
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        tree.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tree

    asyncio.run(scenario())
    assert len(local_repos) == 3 and all(sandbox.closed for sandbox in local_repos)

"""Several policies in one episode: config checks, generation routed by policy, and each policy's share of a batch."""

import asyncio

import pytest

from agentrl.config.errors import ConfigError
from agentrl.config.loader import load_config
from agentrl.config.policies import policy_config, trainable_policies
from agentrl.config.schema import TrainerConfig
from agentrl.loops.base import LOOPS
from agentrl.loops.context import AgentContext
from agentrl.loops.policy_clients import PolicyClients, UnknownPolicyError
from agentrl.loops.testing import ScriptedPolicy
from agentrl.rollout.protocol import SamplingParams
from agentrl.trainer.advantages import row_advantages
from agentrl.trainer.policy_batches import policy_batches, policy_reward_metrics, policy_view
from agentrl.trainer.preflight import run_problems
from agentrl.types import Message, Sample, Segment, Trajectory


def seg(ids, trainable=False, policy=None):
    return Segment(token_ids=ids, trainable=trainable, logprobs=[-0.1] * len(ids) if trainable else None, policy=policy)


def episode(group="g", reward=0.0, **rewards):
    """prompt, describer turn, observation, guesser turn, observation, describer turn."""
    return Trajectory(
        group_id=group,
        segments=[
            seg([1, 2, 3]),
            seg([10, 11], True, "describer"),
            seg([4]),
            seg([20, 21, 22], True, "guesser"),
            seg([5]),
            seg([12], True, "describer"),
        ],
        reward=reward,
        policy_rewards=rewards,
        turn_rewards=[0.1, 0.2, 0.3],
        turn_states=["a", "b", "c"],
    )


def trainable_ids(traj):
    return [t for s in traj.segments if s.trainable for t in s.token_ids]


def test_a_policy_view_keeps_only_its_own_tokens_trainable_and_its_own_reward_and_turns():
    traj = episode(reward=0.5, guesser=1.0)
    describer = policy_view(traj, "describer", default="describer")
    guesser = policy_view(traj, "guesser", default="describer")
    assert trainable_ids(describer) == [10, 11, 12]
    assert trainable_ids(guesser) == [20, 21, 22]
    assert describer.token_ids == guesser.token_ids == traj.token_ids  # the same context, token for token
    assert (describer.reward, guesser.reward) == (0.5, 1.0)  # no own reward: the episode's
    assert describer.turn_rewards == [0.1, 0.3] and describer.turn_states == ["a", "c"]
    assert guesser.turn_rewards == [0.2] and guesser.num_generated_turns == 1
    assert trainable_ids(traj) == [10, 11, 20, 21, 22, 12]  # the episode itself is untouched


def test_unlabelled_segments_belong_to_the_first_policy():
    traj = Trajectory(segments=[seg([1]), seg([7, 8], True), seg([2]), seg([9], True, "b")], reward=1.0)
    batches = policy_batches([traj], ["a", "b"])
    assert trainable_ids(batches["a"][0]) == [7, 8] and trainable_ids(batches["b"][0]) == [9]


def test_a_policy_that_generated_nothing_in_an_episode_gets_no_row_of_it():
    solo = Trajectory(segments=[seg([1]), seg([7], True, "describer")], reward=1.0)
    batches = policy_batches([solo, episode()], ["describer", "guesser"])
    assert len(batches["describer"]) == 2 and len(batches["guesser"]) == 1


def test_a_reply_of_another_policy_right_after_is_another_turn():
    traj = Trajectory(segments=[seg([1]), seg([7], True, "a"), seg([8], True, "a"), seg([9], True, "b")])
    assert traj.turn_index() == [None, 0, 0, 1]


def test_advantages_are_computed_per_policy_over_its_own_rewards():
    """A zero-sum pair of episodes: what the describer won the guesser lost; each policy's advantages follow its
    own reward, not the episode's."""
    won = episode(reward=0.0, describer=1.0, guesser=0.0)
    lost = episode(reward=0.0, describer=0.0, guesser=1.0)
    batches = policy_batches([won, lost], ["describer", "guesser"])
    cfg = TrainerConfig(advantage="grpo")
    describer = row_advantages(cfg, batches["describer"]).tokens
    guesser = row_advantages(cfg, batches["guesser"]).tokens
    assert describer[0][describer[0] != 0].min() > 0 and describer[1][describer[1] != 0].max() < 0
    assert guesser[0][guesser[0] != 0].max() < 0 and guesser[1][guesser[1] != 0].min() > 0
    # only the policy's own tokens carry advantage: the guesser's 3 tokens among the describer's rows are 0
    assert int((describer[0] != 0).sum()) == 3 and int((guesser[0] != 0).sum()) == 3


def test_each_policys_reward_and_success_are_reported_apart():
    metrics = policy_reward_metrics(
        [episode(reward=0.0, describer=1.0), episode(reward=0.0)], ["describer", "guesser"], "eval"
    )
    assert metrics["eval/describer/reward_mean"] == 0.5 and metrics["eval/describer/success_rate"] == 0.5
    assert metrics["eval/guesser/reward_mean"] == 0.0


def test_each_policy_sets_its_own_trainer_and_server_settings_over_the_runs():
    cfg = load_config(
        "quickstart",
        ["policies={a: {trainer: {lr: 1.0e-4}, rollout: {num_replicas: 2}}, b: {trainable: false}}"],
    )
    a, b = policy_config(cfg, "a"), policy_config(cfg, "b")
    assert (a.trainer.lr, a.rollout.num_replicas) == (1.0e-4, 2)
    assert (b.trainer.lr, b.rollout.num_replicas) == (cfg.trainer.lr, cfg.rollout.num_replicas)
    assert a.trainer.steps == cfg.trainer.steps and a.policies == {}
    assert trainable_policies(cfg) == ["a"]


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        ("{a: {trainer: {lrr: 1}}}", "policies.a.trainer.lrr: unknown trainer key"),
        ("{a: {trainer: {steps: 3}}}", "trainer.steps is the run's"),
        ("{a: {rollout: {temperature: 0.5}}}", "rollout.temperature belongs to the episode"),
        ("{a: {rollout: {replicas: 2}}}", "policies.a.rollout.replicas: unknown rollout key"),
        ("{a: {trainer: {lr: -1}}}", "policies.a.trainer.lr: Input should be greater than 0"),
        ("{a: {}, b: {trainable: false, trainer: {lr: 1.0e-5}}}", "policies.b is trainable: false but sets trainer"),
        ("{a: {trainable: false}}", "every policy under policies: is trainable: false"),
        ("{'1a': {}}", "policies.1a: a policy name is a letter"),
    ],
)
def test_bad_policies_are_refused_at_load_with_the_fix(policies, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_config("quickstart", [f"policies={policies}"])


def test_each_policys_trainer_settings_are_checked_as_the_runs_are():
    cfg = load_config("quickstart", ["policies={a: {}, b: {trainer: {advantage: nope}}}"])
    problems = run_problems(cfg)
    assert any(p.startswith("policies.b: trainer.advantage:") for p in problems)
    assert not any(p.startswith("policies.a:") for p in problems)


def test_what_several_policies_do_not_support_yet_is_refused_at_start():
    cfg = load_config("quickstart", ["policies={a: {}, b: {}}", "rollout.tree.branch_turns=[1]"])
    assert any("tree rollouts of several policies are not supported yet" in p for p in run_problems(cfg))
    modes = load_config("quickstart", ["policies={a: {}, b: {}}", "trainer.mode=fully_async", "rollout.workers=2"])
    assert not any(p.startswith("policies") for p in run_problems(modes))


def make_context(tokenizer, llm):
    sample = Sample(prompt=[Message(role="user", content="hi")])
    ctx = AgentContext(sample=sample, trajectory=Trajectory(), llm=llm, tokenizer=tokenizer, sampling=SamplingParams())
    ctx.start(sample.prompt)
    return ctx


def test_generate_as_a_policy_uses_its_client_and_labels_its_tokens(tokenizer):
    clients = PolicyClients({"a": ScriptedPolicy(tokenizer, ["from a"]), "b": ScriptedPolicy(tokenizer, ["from b"])})
    ctx = make_context(tokenizer, clients)

    async def play():
        first = await ctx.generate()  # no name: the first policy
        ctx.add_messages([Message(role="user", content="and you?")])
        second = await ctx.generate(policy="b")
        return first.text, second.text

    assert asyncio.run(play()) == ("from a", "from b")
    assert [s.policy for s in ctx.trajectory.segments if s.trainable] == [None, "b"]
    assert len(clients.clients["a"].calls) == 1 and len(clients.clients["b"].calls) == 1


def test_generate_as_an_unknown_policy_names_the_policies(tokenizer):
    ctx = make_context(tokenizer, PolicyClients({"a": ScriptedPolicy(tokenizer, ["x"])}))
    with pytest.raises(UnknownPolicyError, match="policies are a"):
        asyncio.run(ctx.generate(policy="judge"))
    one = make_context(tokenizer, ScriptedPolicy(tokenizer, ["x"]))
    with pytest.raises(UnknownPolicyError, match="the run has one policy"):
        asyncio.run(one.generate(policy="judge"))


def test_a_frozen_policys_replies_are_context_for_the_policies_that_learn(tokenizer):
    clients = PolicyClients(
        {"a": ScriptedPolicy(tokenizer, ["mine"]), "judge": ScriptedPolicy(tokenizer, ["verdict"])}, frozen={"judge"}
    )
    ctx = make_context(tokenizer, clients)

    async def play():
        await ctx.generate()
        ctx.add_messages([Message(role="user", content="judge it")])
        await ctx.generate(policy="judge")

    asyncio.run(play())
    generated = [s for s in ctx.trajectory.segments if s.logprobs is not None]
    assert [(s.policy, s.trainable) for s in generated] == [(None, True), ("judge", False)]
    assert ctx.trajectory.num_generated_turns == 1  # the judge's verdict is no turn of anyone's
    (view,) = policy_batches([ctx.trajectory.model_copy(update={"reward": 1.0})], ["a", "judge"])["a"]
    assert trainable_ids(view) == trainable_ids(ctx.trajectory)


async def test_gateway_agents_choose_their_policy_by_model_name(tokenizer):
    """Two agents of one game behind the gateway, each calling its own model: each reply is generated by and
    labelled with that policy; an unknown model name is the first policy; /v1/models lists the policies."""
    import openai

    from agentrl.gateway import Gateway

    clients = PolicyClients({"a": ScriptedPolicy(tokenizer, ["from a"]), "b": ScriptedPolicy(tokenizer, ["from b"])})
    async with Gateway(clients, tokenizer) as gateway:
        session = gateway.open_session("game")
        sdk = openai.AsyncOpenAI(base_url=session.base_url, api_key="unused", max_retries=0)
        first = await sdk.chat.completions.create(model="a", messages=[{"role": "user", "content": "you are A"}])
        second = await sdk.chat.completions.create(model="b", messages=[{"role": "user", "content": "you are B"}])
        third = await sdk.chat.completions.create(model="gpt-x", messages=[{"role": "user", "content": "who?"}])
        listed = [m.id for m in (await sdk.models.list()).data]
    assert [r.choices[0].message.content for r in (first, second, third)] == ["from a", "from b", "from a"]
    labels = [[s.policy for s in step.segments if s.trainable] for step in session.recorder.steps]
    assert labels == [["a"], ["b"], [None]]  # three conversations: three step samples
    assert listed == ["policy", "a", "b"]


def test_the_tool_and_gym_loops_play_their_agent_as_the_policy_roles_names():
    cfg = load_config("tool_use", ["policies={judge: {trainable: false}, solver: {}}", "agent.roles={agent: solver}"])
    assert run_problems(cfg) == []
    assert LOOPS.get("tool_agent")(cfg.agent).policy_for("agent") == "solver"
    gym = load_config("gym", ["policies={a: {}}", "agent.roles={player: a}"])
    assert run_problems(gym) == ["agent.roles.player: the loop gym has no role 'player'; its roles are agent"]

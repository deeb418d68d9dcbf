"""`trainer.entropy_choices`: an entropy bonus over a few named replies at each turn's first token."""

import math

import pytest
import torch

from agentrl.config import TrainerConfig
from agentrl.errors import UserError
from agentrl.trainer.batch import collate
from agentrl.trainer.choices import choice_entropy, choice_token_ids, turn_first_tokens
from agentrl.trainer.engine import EngineConfig, PolicyEngine, engine_config
from agentrl.trainer.forward import response_logprobs_and_choice_entropy
from agentrl.trainer.step import policy_step
from agentrl.types import Segment, Trajectory
from tests.tiny_models import tiny_llama as tiny_model

CHOICES = [4, 6, 9]  # the first tokens of three replies, in a tiny model's vocabulary


class WordTokenizer:
    """Each word a token: `first second` → [id(first), id(second)]."""

    def __init__(self, vocab: list[str]):
        self.vocab = vocab

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [self.vocab.index(word) for word in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.vocab[i] for i in ids)


def two_turns(first: list[int], second: list[int], reward: float) -> Trajectory:
    """Prompt [1, 2], a turn, an observation [3], a second turn."""
    return Trajectory(
        segments=[
            Segment(token_ids=[1, 2], trainable=False),
            Segment(token_ids=first, trainable=True, logprobs=[-1.0] * len(first)),
            Segment(token_ids=[3], trainable=False, role="user"),
            Segment(token_ids=second, trainable=True, logprobs=[-1.0] * len(second)),
        ],
        group_id="g",
        reward=reward,
    )


def test_choice_token_ids_are_each_replys_first_token_and_a_shared_first_token_is_refused():
    tokenizer = WordTokenizer(["<pad>", "LEFT", "RIGHT", "go", "now"])
    assert choice_token_ids(tokenizer, ["RIGHT", "LEFT now", "go"]) == [2, 1, 3]
    with pytest.raises(UserError, match="'go left' and 'go right' begin with the same token 'go'"):
        choice_token_ids(WordTokenizer(["go", "left", "right"]), ["go left", "go right"])
    with pytest.raises(UserError, match="has no tokens"):
        choice_token_ids(tokenizer, ["LEFT", ""])


def test_turn_first_tokens_mark_where_each_run_of_generated_tokens_begins():
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0], [1, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]])
    expected = torch.tensor([[1, 0, 0, 0, 1, 0, 0], [1, 0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]])
    assert torch.equal(turn_first_tokens(mask), expected.bool())


def test_choice_entropy_is_the_entropy_of_the_distribution_renormalized_over_the_choices():
    logits = torch.randn(2, 3, 12)
    entropy = choice_entropy(torch.log_softmax(logits, -1), CHOICES)
    expected = torch.distributions.Categorical(logits=logits[..., CHOICES]).entropy()
    assert torch.allclose(entropy, expected, atol=1e-6)
    assert float(entropy.max()) <= math.log(len(CHOICES)) + 1e-6


def test_the_weighted_choice_entropy_is_the_renormalized_one_times_the_choices_probability():
    logits = torch.randn(2, 3, 12)
    all_logp = torch.log_softmax(logits, -1)
    mass = all_logp[..., CHOICES].exp().sum(-1)
    weighted = choice_entropy(all_logp, CHOICES, weighted=True)
    assert torch.allclose(weighted, choice_entropy(all_logp, CHOICES) * mass, atol=1e-6)
    assert torch.all(weighted < choice_entropy(all_logp, CHOICES))


def test_a_policy_that_starts_with_another_word_keeps_the_renormalized_bonus_but_not_the_weighted_one():
    logits = torch.zeros(1, 1, 12)
    logits[..., 2] = 30.0  # nearly all the mass on a token that is no choice ("You" of "You're right")
    all_logp = torch.log_softmax(logits, -1)
    assert float(choice_entropy(all_logp, CHOICES)) == pytest.approx(math.log(len(CHOICES)), rel=1e-4)
    assert float(choice_entropy(all_logp, CHOICES, weighted=True)) < 1e-9


def test_the_weighted_bonus_alone_moves_the_first_token_back_onto_the_choices():
    model = tiny_model()
    off_choice = 2
    with torch.no_grad():  # make the policy begin every turn with a token that is no choice
        model.get_output_embeddings().weight[off_choice].mul_(8.0)
    engine = PolicyEngine(model, EngineConfig(lr=1e-3, entropy_choices_weighted=True))
    trajs = [two_turns([4, 5], [4], 1.0), two_turns([4], [4, 5], 1.0)]  # equal rewards: every advantage is 0
    batch = collate(trajs, 0)

    def choices_mass() -> float:
        with torch.no_grad():
            logits = engine.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        firsts = turn_first_tokens(batch.response_mask)
        predicting = torch.log_softmax(logits[:, batch.prompt_len - 1 : -1], -1)
        return float(predicting[..., CHOICES].exp().sum(-1)[firsts].mean())

    before = choices_mass()
    cfg = TrainerConfig(entropy_coef=1.0, entropy_choices=["a", "b", "c"], entropy_choices_weighted=True)
    assert engine_config(cfg).entropy_choices_weighted  # a run's config reaches the engine
    for _ in range(5):
        policy_step(engine, cfg, trajs, 0, entropy_choice_ids=CHOICES)
    assert choices_mass() > before * 1.5


def test_the_bonus_sits_on_each_turns_first_token_only_and_its_metric_is_the_mean_over_turns():
    model = tiny_model()
    batch = collate([two_turns([4, 5], [6, 7, 8], 1.0), two_turns([9], [4], 0.0)], 0)
    vocab_entropy: list[float] = []
    _, entropy, mean = response_logprobs_and_choice_entropy(
        model, batch, slice(0, 2), torch.float32, CHOICES, entropy_out=vocab_entropy
    )
    firsts = turn_first_tokens(batch.response_mask)
    assert firsts.sum() == 4 and entropy.requires_grad
    assert torch.all(entropy[~firsts] == 0) and torch.all(entropy[firsts] > 0)
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    predicting = logits[:, batch.prompt_len - 1 : -1]  # the logits that predict each response token
    expected = torch.distributions.Categorical(logits=predicting[..., CHOICES]).entropy()[firsts]
    assert torch.allclose(entropy[firsts], expected, atol=1e-4)
    assert mean == pytest.approx(float(expected.mean()), rel=1e-4)
    assert 0 < vocab_entropy[0] <= math.log(model.config.vocab_size)


def test_the_choice_bonus_alone_evens_out_the_first_tokens_spread_over_the_choices():
    model = tiny_model()
    with torch.no_grad():  # make the policy prefer the first choice everywhere
        model.get_output_embeddings().weight[CHOICES[0]].mul_(8.0)
    engine = PolicyEngine(model, EngineConfig(lr=1e-3))
    trajs = [two_turns([4, 5], [4], 1.0), two_turns([4], [4, 5], 1.0)]  # equal rewards: every advantage is 0
    batch = collate(trajs, 0)

    def first_token_choice_entropy() -> float:
        with torch.no_grad():
            return response_logprobs_and_choice_entropy(engine.model, batch, slice(0, 2), torch.float32, CHOICES)[2]

    before = first_token_choice_entropy()
    cfg = TrainerConfig(entropy_coef=1.0, entropy_choices=["a", "b", "c"])
    for _ in range(5):
        metrics = policy_step(engine, cfg, trajs, 0, entropy_choice_ids=CHOICES)
    assert metrics["train/rows_trained"] == 2 and metrics["train/grad_norm"] > 0
    assert 0 < metrics["train/choice_entropy"] <= math.log(3)
    assert metrics["train/entropy"] > metrics["train/choice_entropy"]  # the vocabulary's, logged as before
    assert first_token_choice_entropy() > before + 0.05


def test_choices_without_the_bonus_or_a_single_choice_are_config_problems():
    from agentrl.config.schema import AgentRLConfig
    from agentrl.trainer.preflight import run_problems

    off = AgentRLConfig.model_validate({"trainer": {"entropy_choices": ["LEFT", "RIGHT"]}})
    assert any("set trainer.entropy_coef" in p for p in run_problems(off))
    single = AgentRLConfig.model_validate({"trainer": {"entropy_coef": 0.1, "entropy_choices": ["LEFT"]}})
    assert any("at least two replies" in p for p in run_problems(single))
    fine = AgentRLConfig.model_validate({"trainer": {"entropy_coef": 0.1, "entropy_choices": ["LEFT", "RIGHT"]}})
    assert not any("entropy_choices" in p for p in run_problems(fine))
    unlisted = AgentRLConfig.model_validate({"trainer": {"entropy_coef": 0.1, "entropy_choices_weighted": True}})
    assert any("lists none" in p for p in run_problems(unlisted))

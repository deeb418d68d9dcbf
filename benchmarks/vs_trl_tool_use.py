"""The tool-use side of `benchmarks/vs_trl.py`: agentrl's `tool_use` recipe and TRL's `GRPOTrainer(tools=...)` on
the same multi-turn calculator task, at equal work.

Both sides load one model folder: the default model with a chat template that renders tools and tool calls in the
hermes format (TRL's own copy of Qwen2.5's template: TRL refuses tools with a template that cannot render a
tool-calling conversation, as SmolLM2's cannot). It uses the model's own `<|im_start|>` / `<|im_end|>` tokens, and
both sides render the same prompt: the recipe's system prompt, the calculator's schema (its name, docstring and
parameter, each side deriving it from the same docstring) and the worked examples. The one difference is in the
schema: agentrl's has `"additionalProperties": false`, transformers' does not (about 9 of some 500 tokens).

Set equal: the model, prompts, tool, reward (1.0 when the final answer contains the product, 0.3 when a calculator
call returned it: the recipe's `contains` and `tool_result`), group size (the recipe's 4), prompts per step (4; 1 in
`--quick`), steps, temperature (1.0), assistant turns (3: TRL's first generation and at most 2 after tool results)
and seed; the policy frozen (learning rate 1e-12), agentrl's zero-advantage skipping off. One thing cannot be set
equal: agentrl caps each turn at the recipe's 40 tokens, TRL caps the whole completion (its tool results included)
at `max_completion_length`, set to the 3 turns' 120 tokens. So each side's generated tokens per trajectory are
printed beside its time.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmarks.vs_trl import agentrl_train, grpo_config, step_clock

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "tool_use"
GROUP, TURN_TOKENS, TURNS = 4, 40, 3
WEIGHTS = {"correct": 1.0, "right_call": 0.3}


def recipe_system_prompt() -> str:
    from omegaconf import OmegaConf

    return str(OmegaConf.load(RECIPE / "config.yaml").agent.system_prompt)


def rows(split: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RECIPE / "data" / f"{split}.jsonl").read_text().splitlines()]


def tool_template_model(source: str, out: Path) -> Path:
    """A model folder: `source`'s weights (linked, not copied) and its tokenizer with a tool-rendering template."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    out.mkdir(parents=True, exist_ok=True)
    for path in Path(source).iterdir():
        if path.suffix in (".safetensors", ".json") and "token" not in path.name:
            target = out / path.name
            if not target.exists():
                target.symlink_to(path.resolve()) if path.suffix == ".safetensors" else shutil.copy(path, target)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.save_pretrained(out)
    return out


def calculator(expression: str):  # no return annotation: transformers would add it to the schema, agentrl does not
    """Evaluate an arithmetic expression exactly and return the result.

    Args:
        expression: the expression, e.g. "347 * 29" or "(12 + 5) / 4".
    """
    from agentrl.tools.builtin.calculator import evaluate, format_number

    return format_number(evaluate(expression))


def trajectory_reward(messages: list[dict[str, Any]], ground_truth: str) -> dict[str, float]:
    """The recipe's reward components on one TRL completion (its assistant and tool messages)."""
    from agentrl.rewards.rule import normalize

    answers = [m for m in messages if m["role"] == "assistant"]
    answer = f" {normalize(str(answers[-1]['content']))} " if answers else ""
    results = [normalize(str(m["content"])) for m in messages if m["role"] == "tool"]
    truth = normalize(ground_truth)
    return {"correct": float(f" {truth} " in answer), "right_call": float(truth in results)}


# --- agentrl ----------------------------------------------------------------------------------------------------


def agentrl_run(
    model: Path, steps: int, lr: float, seed: int, out: Path, settings: list[str], group: int, prompts: int
) -> dict:
    """`agentrl train recipe=tool_use` on `model`: its wall time over the steps, generated tokens per trajectory."""
    metrics = agentrl_train(
        "tool_use", out, steps=steps, lr=lr, seed=seed, group=group, prompts=prompts, skip=False,
        extra=[f"model={model}", *settings],
    )  # fmt: skip
    trained = [m for m in metrics if "perf/wall_s" in m]
    tokens = [m.get("rollout/response_tokens_mean") for m in trained]
    known = [t for t in tokens if t is not None]
    return {
        "wall_s": trained[-1]["perf/wall_s"],
        "response_tokens_mean": round(sum(known) / len(known), 1) if known else None,
        "reward_mean": round(sum(m.get("rollout/reward_mean", 0.0) for m in trained) / len(trained), 3),
    }


# --- TRL --------------------------------------------------------------------------------------------------------


def trl_run(model: Path, steps: int, lr: float, seed: int, out: Path, group: int, prompts: int) -> dict:
    """TRL's `GRPOTrainer` with `tools=[calculator]`: its wall time over the steps, generated tokens per trajectory."""
    from datasets import Dataset
    from trl import GRPOTrainer

    def component(name: str) -> Any:
        def reward(completions: list, ground_truth: list[str], **kwargs: Any) -> list[float]:
            return [trajectory_reward(c, t)[name] for c, t in zip(completions, ground_truth, strict=True)]

        reward.__name__ = name
        return reward

    system = {"role": "system", "content": recipe_system_prompt()}
    examples = [{"prompt": [system, *row["prompt"]], "ground_truth": row["ground_truth"]} for row in rows("train")]
    dataset = Dataset.from_list(examples)
    weights = [WEIGHTS[name] for name in WEIGHTS]
    config = grpo_config(
        out,
        group,
        steps,
        lr,
        seed,
        weights,
        prompts,
        max_completion_length=TURN_TOKENS * TURNS,
        max_tool_calling_iterations=TURNS - 1,
    )
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=[component(name) for name in WEIGHTS],
        args=config,
        train_dataset=dataset,
        tools=[calculator],
    )
    clock = step_clock()
    trainer.add_callback(clock)
    trainer.train()
    assert clock.started is not None
    lengths = [log["completions/mean_length"] for log in clock.logs if "completions/mean_length" in log]
    rewards = [log["reward"] for log in clock.logs if "reward" in log]
    return {
        "wall_s": clock.ended - clock.started,
        "completion_tokens_mean": round(sum(lengths) / len(lengths), 1) if lengths else None,
        "reward_mean": round(sum(rewards) / len(rewards), 3) if rewards else None,
    }


def equal_work(
    source_model: str, steps: int, group: int, prompts: int, settings: list[str], tmp: Path, frozen_lr: float
) -> dict:
    """Both sides on the tool-use task, policy frozen: `tool_use_ratio` (TRL's time over agentrl's) and the work."""
    model = tool_template_model(source_model, tmp / "tool-model")
    ours = agentrl_run(model, steps, frozen_lr, 1, tmp / "agentrl-tools", settings, group, prompts)
    theirs = trl_run(model, steps, frozen_lr, 1, tmp / "trl-tools", group, prompts)
    print(f"tool use, {steps} steps: agentrl {ours}, TRL {theirs}", flush=True)
    return {
        "tool_use_ratio": round(theirs["wall_s"] / ours["wall_s"], 3),
        "tool_use_steps": steps,
        "tool_use_group": group,
        "tool_use_prompts_per_step": prompts,
        "tool_use_agentrl_s": round(ours["wall_s"], 1),
        "tool_use_trl_s": round(theirs["wall_s"], 1),
        "tool_use_agentrl_response_tokens": ours["response_tokens_mean"],
        "tool_use_trl_completion_tokens": theirs["completion_tokens_mean"],
        "tool_use_agentrl_reward": ours["reward_mean"],
        "tool_use_trl_reward": theirs["reward_mean"],
    }

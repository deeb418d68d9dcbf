"""agentrl against TRL's `GRPOTrainer`, side by side on this machine: the quickstart task (echo a word) and the
tool-use task (a calculator over several turns), with the same model, data, reward, group size, prompts per step,
learning rate, steps, temperature and reply budget.

Needs TRL (`pip install -e '.[bench]'`, pinned). Run from the repository root:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vs_trl.py                  # all three modes, about 55 min on 2 cores
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vs_trl.py --mode equal_work  # about 6 min
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vs_trl.py --mode tool_use    # the tool-use task, equal work: 13 min
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vs_trl.py --mode both        # equal work and learning, 36 min
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vs_trl.py --quick           # a smoke: one tiny step per side

What is measured
----------------
* **equal_work**: each side generates and trains the same number of trajectories (`--steps` steps of 4 prompts x
  8 replies) with the policy frozen (a learning rate of 1e-12 on both sides: a rate of 0 is refused by agentrl),
  so that both do the same work whatever they learn; agentrl's zero-advantage skipping is off, and its figure with
  skipping on (its default) is reported beside as `quickstart_equal_work_ratio_with_skipping`. TRL runs twice: with
  its defaults (gradient checkpointing on: `quickstart_equal_work_ratio`) and with `gradient_checkpointing=False`,
  which agentrl does not do either (equal compute: `quickstart_equal_work_ratio_equal_compute`).
* **learning**: `--learning-steps` steps at the recipe's learning rate per seed (`--seeds`), then the held-out
  reward (the 16 held-out prompts, greedy, the recipe's reward) of each side's final policy.

A ratio is TRL's wall time over agentrl's for the same steps (above 1: agentrl is faster), each side timed from
its first step's start to its last step's end (model loading, server start and evaluation left out). agentrl runs as
its command, in its own process (as users run it); TRL in this one (as its scripts do). Set equal on
both sides: the model (SmolLM2-135M-Instruct), the training prompts (the chat template's rendering of each row),
the reward (agentrl's own `contains`, `brevity` and `normalized_match` functions, weights 0.3 / 0.2 / 0.5), the
group size (8), prompts per step (4), learning rate, steps, temperature (1.0), reply budget (16 tokens) and seed.
Everything else is each side's default; TRL's that differ from agentrl's are named in the JSON line
(`trl_defaults_kept`). At equal work the precision is set equal too (`precision_set_equal`): TRL's `GRPOConfig`
turns bf16 on by default, and on a CPU with bf16 its trainer then runs forward and backward under bf16 autocast
(3 steps here: 56.6 s, against 81.2 s with `bf16=False`), so agentrl's side computes in bf16 as well
(`trainer.dtype=bfloat16`, `rollout.dtype=bfloat16`; its CPU default is float32). The learning mode keeps each
side's default precision.
* **tool_use**: the `tool_use` recipe (a calculator over up to 3 turns) against TRL's `tools=`, at equal work
  (`tool_use_ratio`); what is set equal, and the one thing that cannot be, is in `benchmarks/vs_trl_tool_use.py`.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `agentrl` and `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "recipes" / "quickstart" / "data"
GROUP, PROMPTS_PER_STEP, MAX_TOKENS, TEMPERATURE, LR = 8, 4, 16, 1.0, 3.0e-5
FROZEN_LR = 1e-12
WEIGHTS = {"contains": 0.3, "brevity": 0.2, "exact": 0.5}
TRL_DEFAULTS_KEPT = ["loss_type=dapo", "beta=0.0", "gradient_checkpointing=True", "lr_scheduler_type=linear"]


def rows(split: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / f"{split}.jsonl").read_text().splitlines()]


def score(answer: str, ground_truth: str) -> dict[str, float]:
    """agentrl's own reward functions of the quickstart recipe, on one reply."""
    from agentrl.rewards.base import RewardInput
    from agentrl.rewards.rule import brevity, contains, normalized_match
    from agentrl.types import Sample, Trajectory

    inp = RewardInput(trajectory=Trajectory(), sample=Sample(prompt=[], ground_truth=ground_truth), answer=answer)
    return {
        "contains": contains(inp).score,
        "brevity": brevity(inp, max_words=1).score,
        "exact": normalized_match(inp).score,
    }


def weighted(answer: str, ground_truth: str) -> float:
    return sum(WEIGHTS[name] * value for name, value in score(answer, ground_truth).items())


# --- agentrl ----------------------------------------------------------------------------------------------------


AGENTRL_SETTINGS: list[str] = []
"""`--agentrl-set`: settings over the quickstart recipe on agentrl's side (named in the JSON line)."""


def agentrl_train(
    recipe: str, out: Path, *, steps: int, lr: float, seed: int, group: int, prompts: int, skip: bool,
    eval_every: int = 0, extra: list[str] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """`agentrl train recipe=RECIPE` with the settings both tasks set, as users run it: the command in its own
    process (this one has imported TRL and run it: its threads, memory and settings stay out of agentrl's timing);
    the run's metrics."""
    args = [
        "train",
        f"recipe={recipe}",
        f"trainer.steps={steps}",
        f"trainer.lr={lr}",
        f"trainer.eval_every={eval_every}",
        f"trainer.skip_zero_advantage={str(skip).lower()}",
        f"rollout.seed={seed}",
        f"rollout.n={group}",
        f"data.batch_size={prompts}",
        f"output_dir={out}",
        *(extra or []),
    ]
    command = [sys.executable, "-c", "import sys; from agentrl.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:
        raise RuntimeError(f"the agentrl run failed: agentrl {' '.join(args)}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def agentrl_run(
    steps: int, lr: float, seed: int, out: Path, skip: bool, evaluate: bool, group: int, extra: list[str] | None = None
) -> dict:
    """`agentrl train recipe=quickstart` for `steps` steps; its wall time over the steps and held-out reward."""
    metrics = agentrl_train(
        "quickstart", out, steps=steps, lr=lr, seed=seed, group=group, prompts=PROMPTS_PER_STEP, skip=skip,
        eval_every=steps if evaluate else 0, extra=[*(extra or []), *AGENTRL_SETTINGS],
    )  # fmt: skip
    trained = [m for m in metrics if "perf/wall_s" in m]
    held_out = [m["eval/reward_mean"] for m in metrics if "eval/reward_mean" in m]
    return {"wall_s": trained[-1]["perf/wall_s"], "held_out": held_out[-1] if held_out else None}


# --- TRL --------------------------------------------------------------------------------------------------------


def step_clock() -> Any:
    """A `TrainerCallback` that keeps the first step's start (`started`), the last step's end (`ended`) and the
    logged figures (`logs`)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.started: float | None = None
            self.ended = 0.0
            self.logs: list[dict[str, float]] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.started = self.started or time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.ended = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            self.logs.append(dict(logs or {}))

    return StepClock()


def grpo_config(
    out: Path,
    group: int,
    steps: int,
    lr: float,
    seed: int,
    weights: list[float],
    prompts: int = PROMPTS_PER_STEP,
    **options: Any,
) -> Any:
    """TRL's `GRPOConfig` with what both tasks set equal (on the CPU, no reports or checkpoints) and `options`."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out),
        num_generations=group,
        per_device_train_batch_size=group * prompts,
        temperature=TEMPERATURE,
        learning_rate=lr,
        max_steps=steps,
        seed=seed,
        reward_weights=weights,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        dataloader_num_workers=0,
        **options,
    )


def trl_run(
    model_path: str, steps: int, lr: float, seed: int, out: Path, evaluate: bool, group: int, **options: Any
) -> dict:
    """TRL's `GRPOTrainer` on the same task (`options` over its `GRPOConfig`); its wall time over the steps and
    held-out reward."""
    from datasets import Dataset
    from trl import GRPOTrainer

    def reward_function(name: str) -> Any:
        def reward(prompts: list, completions: list, ground_truth: list[str], **kwargs: Any) -> list[float]:
            return [score(c[-1]["content"], truth)[name] for c, truth in zip(completions, ground_truth, strict=True)]

        reward.__name__ = name
        return reward

    dataset = Dataset.from_list([{"prompt": r["prompt"], "ground_truth": r["ground_truth"]} for r in rows("train")])
    weights = [WEIGHTS[name] for name in WEIGHTS]
    config = grpo_config(out, group, steps, lr, seed, weights, max_completion_length=MAX_TOKENS, **options)
    trainer = GRPOTrainer(
        model=model_path,
        reward_funcs=[reward_function(name) for name in WEIGHTS],
        args=config,
        train_dataset=dataset,
    )
    clock = step_clock()
    trainer.add_callback(clock)
    trainer.train()
    assert clock.started is not None
    held_out = greedy_held_out(trainer.model, trainer.processing_class) if evaluate else None
    return {"wall_s": clock.ended - clock.started, "held_out": held_out}


def greedy_held_out(model: Any, tokenizer: Any) -> float:
    """The mean reward of greedy replies to the held-out prompts, as agentrl's evaluation scores them."""
    import torch

    model.eval()
    rewards = []
    with torch.no_grad():
        for row in rows("eval"):
            ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, return_tensors="pt")
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids
            out = model.generate(ids, max_new_tokens=MAX_TOKENS, do_sample=False)
            reply = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            rewards.append(weighted(reply, row["ground_truth"]))
    return sum(rewards) / len(rewards)


# --- the comparison ---------------------------------------------------------------------------------------------


def trl_precision() -> str:
    """The dtype TRL's `GRPOTrainer` computes in here with its defaults: its `GRPOConfig` turns `bf16` on, and on a
    CPU accelerate then autocasts forward and backward to bfloat16 where torch supports it."""
    from accelerate.utils import is_bf16_available
    from trl import GRPOConfig

    with tempfile.TemporaryDirectory() as tmp:
        bf16 = GRPOConfig(output_dir=tmp, use_cpu=True, report_to=[]).bf16
    return "bfloat16" if bf16 and is_bf16_available(True) else "float32"


def equal_precision() -> list[str]:
    """agentrl's settings that compute in TRL's precision (none where that is float32, agentrl's CPU default)."""
    return ["trainer.dtype=bfloat16", "rollout.dtype=bfloat16"] if trl_precision() == "bfloat16" else []


def equal_work(model_path: str, steps: int, group: int, tmp: Path, with_skipping: bool = True) -> dict[str, Any]:
    same = {"evaluate": False, "group": group, "extra": equal_precision()}
    ours = agentrl_run(steps, FROZEN_LR, 1, tmp / "agentrl-equal", skip=False, **same)
    skipping = None
    if with_skipping:
        skipping = agentrl_run(steps, FROZEN_LR, 1, tmp / "agentrl-skip", skip=True, **same)
    theirs = trl_run(model_path, steps, FROZEN_LR, 1, tmp / "trl-equal", evaluate=False, group=group)
    # equal compute: TRL recomputes activations in backward by default (gradient checkpointing); agentrl does not
    unchecked = trl_run(
        model_path, steps, FROZEN_LR, 1, tmp / "trl-unchecked", evaluate=False, group=group,
        gradient_checkpointing=False,
    )  # fmt: skip
    skipped = f" ({skipping['wall_s']:.1f} s skipping)" if skipping else ""
    print(
        f"equal work, {steps} steps: agentrl {ours['wall_s']:.1f} s{skipped}, TRL {theirs['wall_s']:.1f} s "
        f"({unchecked['wall_s']:.1f} s without gradient checkpointing)",
        flush=True,
    )
    return {
        "quickstart_equal_work_ratio": round(theirs["wall_s"] / ours["wall_s"], 3),
        "quickstart_equal_work_ratio_with_skipping": round(theirs["wall_s"] / skipping["wall_s"], 3)
        if skipping
        else None,
        "quickstart_equal_work_ratio_equal_compute": round(unchecked["wall_s"] / ours["wall_s"], 3),
        "equal_work_steps": steps,
        "equal_work_agentrl_s": round(ours["wall_s"], 1),
        "equal_work_trl_s": round(theirs["wall_s"], 1),
        "equal_work_trl_no_checkpointing_s": round(unchecked["wall_s"], 1),
    }


def learning(model_path: str, steps: int, seeds: list[int], group: int, tmp: Path) -> dict[str, Any]:
    ours, theirs = [], []
    for seed in seeds:
        ours.append(agentrl_run(steps, LR, seed, tmp / f"agentrl-{seed}", skip=True, evaluate=True, group=group))
        theirs.append(trl_run(model_path, steps, LR, seed, tmp / f"trl-{seed}", evaluate=True, group=group))
        print(f"learning, seed {seed}: agentrl {ours[-1]}, TRL {theirs[-1]}", flush=True)
    return {
        "quickstart_learning_ratio": round(sum(t["wall_s"] for t in theirs) / sum(o["wall_s"] for o in ours), 3),
        "learning_steps": steps,
        "learning_seeds": seeds,
        "agentrl_held_out": [round(o["held_out"], 3) for o in ours],
        "trl_held_out": [round(t["held_out"], 3) for t in theirs],
        "agentrl_held_out_median": round(statistics.median(o["held_out"] for o in ours), 3),
        "trl_held_out_median": round(statistics.median(t["held_out"] for t in theirs), 3),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["equal_work", "learning", "tool_use", "both", "all"], default="all")
    parser.add_argument("--steps", type=int, default=5, help="steps of the equal-work and tool-use modes")
    parser.add_argument("--learning-steps", type=int, default=20, help="steps of each learning run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--quick", action="store_true", help="a smoke: one step of 4 prompts x 2 replies per side")
    parser.add_argument("--agentrl-set", nargs="*", default=[], help="settings over the recipe on agentrl's side")
    parser.add_argument("--tool-agentrl-set", nargs="*", default=[], help="the same, for the tool-use recipe")
    args = parser.parse_args(argv)
    AGENTRL_SETTINGS[:] = args.agentrl_set
    group = 2 if args.quick else GROUP
    if args.quick:
        args.mode, args.steps = "quick", 1

    import trl

    from agentrl.models import resolve_model
    from benchmarks import vs_trl_tool_use

    model_path = resolve_model("default")
    result: dict[str, Any] = {
        "trl_version": trl.__version__,
        "trl_defaults_kept": TRL_DEFAULTS_KEPT,
        "group": group,
        "prompts_per_step": PROMPTS_PER_STEP,
        "agentrl_settings": args.agentrl_set,
        "tool_agentrl_settings": args.tool_agentrl_set,
        "precision_set_equal": trl_precision(),
        "precision_agentrl_settings": equal_precision(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.mode in ("equal_work", "both", "all", "quick"):
            result.update(equal_work(model_path, args.steps, group, Path(tmp), with_skipping=not args.quick))
        if args.mode in ("tool_use", "all", "quick"):
            tool_group = 2 if args.quick else vs_trl_tool_use.GROUP
            tool_prompts = 1 if args.quick else PROMPTS_PER_STEP  # the quick smoke: one prompt of ~500 tokens
            result.update(
                vs_trl_tool_use.equal_work(
                    model_path,
                    args.steps,
                    tool_group,
                    tool_prompts,
                    [*equal_precision(), *args.tool_agentrl_set],
                    Path(tmp),
                    FROZEN_LR,
                )
            )
        if args.mode in ("learning", "both", "all"):
            result.update(learning(model_path, args.learning_steps, args.seeds, group, Path(tmp)))
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

"""reasoning-gym datasets as tasks: any dataset name of the `reasoning-gym` package becomes the run's samples.

`data.reasoning_gym=basic_arithmetic` generates `data.num_train_samples` training questions and
`data.num_eval_samples` held-out ones (from other seeds; a held-out question equal to a training one is dropped),
with the dataset's own options (`data.reasoning_gym_options.<name>`, e.g. `{basic_arithmetic: {max_terms: 2}}`:
keyed by dataset, so that a recipe's options for one dataset do not follow a run to another). Each sample
asks the question under one of reasoning-gym's own system prompts (`data.reasoning_gym_prompt`, by its name
in the package: `default` asks for step-by-step thinking, `direct` for the answer alone; each wants the answer
inside `<answer>` tags) and keeps the dataset's entry in `extra_info`, so that reward `type: reasoning_gym` scores
the reply with the dataset's own `score_answer`.

`data.reasoning_gym_shots=k` puts k worked examples before each question, as earlier user and assistant turns: k
questions of the dataset from a seed of their own, each answered by `data.reasoning_gym_shot_reply.<name>`, a
template over the example's entry (`<answer>{answer}</answer>` for a dataset not named there; for arithmetic,
`{metadata[expression]} = {answer}` and then the tags, to show the working). A training or held-out question equal to
an example is dropped.
"""

from __future__ import annotations

from typing import Any

from agentrl.registry import MissingPackageError, import_package
from agentrl.types import Message, Sample

EVAL_SEED_OFFSET = 1_000_003
"""Held-out questions come from seed `seed + EVAL_SEED_OFFSET`, training ones from `seed`."""
SHOT_SEED_OFFSET = 2_000_003
"""Worked examples (`data.reasoning_gym_shots`) come from seed `seed + SHOT_SEED_OFFSET`."""
PLAIN_SHOT_REPLY = "<answer>{answer}</answer>"
"""A worked example's reply for a dataset `data.reasoning_gym_shot_reply` does not name: the answer alone."""


def import_reasoning_gym() -> Any:
    return import_package("reasoning_gym", "reasoning-gym", "data.reasoning_gym")


def dataset_names() -> list[str]:
    """Every dataset name the installed reasoning-gym knows."""
    return sorted(import_reasoning_gym().factory.DATASETS)


def reasoning_gym_problems(
    name: str,
    options_by_dataset: dict[str, dict[str, Any]],
    prompt: str = "default",
    shot_replies: dict[str, str] | None = None,
) -> list[str]:
    """What is wrong with `data.reasoning_gym`, its options, its prompt and its worked examples' reply (a missing
    package, an unknown name, options the dataset refuses, a prompt name the package does not have, a reply template
    naming what the dataset's entries lack), each with its fix; empty when it generates."""
    try:
        rg = import_reasoning_gym()
    except MissingPackageError as exc:
        return [str(exc)]
    from reasoning_gym.utils import SYSTEM_PROMPTS

    if prompt not in SYSTEM_PROMPTS:
        return [
            f"data.reasoning_gym_prompt: reasoning-gym has no system prompt {prompt!r}; its prompts: "
            f"{', '.join(SYSTEM_PROMPTS)}"
        ]
    known = ", ".join(dataset_names())
    if name not in rg.factory.DATASETS:
        return [f"data.reasoning_gym: reasoning-gym has no dataset {name!r}; its datasets: {known}"]
    if unknown := [k for k in options_by_dataset if k not in rg.factory.DATASETS]:
        return [
            f"data.reasoning_gym_options: {', '.join(unknown)} is no reasoning-gym dataset; the options are keyed by "
            f"dataset, e.g. {{{name}: {{...}}}}; its datasets: {known}"
        ]
    options = options_by_dataset.get(name, {})
    try:
        entry = rg.create_dataset(name, size=1, seed=0, **options)[0]
    except Exception as exc:  # the dataset's own config validation (TypeError, AssertionError, ValueError)
        return [f"data.reasoning_gym_options: the {name} dataset refuses {options}: {type(exc).__name__}: {exc}"]
    shot_replies = shot_replies or {}
    if unknown := [k for k in shot_replies if k not in rg.factory.DATASETS]:
        return [
            f"data.reasoning_gym_shot_reply: {', '.join(unknown)} is no reasoning-gym dataset; the replies are keyed "
            f"by dataset, e.g. {{{name}: '<answer>{{answer}}</answer>'}}; its datasets: {known}"
        ]
    shot_reply = shot_replies.get(name, PLAIN_SHOT_REPLY)
    try:
        shot_reply.format(**entry)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        return [
            f"data.reasoning_gym_shot_reply.{name}: {shot_reply!r} does not fit the {name} dataset's entries "
            f"({type(exc).__name__}: {exc}); it may name {{answer}}, {{question}} and {{metadata[KEY]}}, where "
            f"KEY is one of {', '.join(entry['metadata'])}"
        ]
    return []


def worked_examples(
    name: str, options: dict[str, Any], count: int, seed: int, reply: str
) -> tuple[list[Message], set[str]]:
    """`count` questions of dataset `name` from seed `seed + SHOT_SEED_OFFSET`, each followed by its answer as the
    `reply` template writes it: the turns put before every question, and the questions themselves."""
    if count == 0:
        return [], set()
    dataset = import_reasoning_gym().create_dataset(name, size=count, seed=seed + SHOT_SEED_OFFSET, **options)
    turns = []
    for entry in dataset:
        turns += [
            Message(role="user", content=entry["question"]),
            Message(role="assistant", content=reply.format(**entry)),
        ]
    return turns, {entry["question"] for entry in dataset}


def reasoning_gym_samples(
    name: str,
    options: dict[str, Any],
    size: int,
    seed: int,
    exclude: set[str],
    prompt: str = "default",
    shots: list[Message] | None = None,
) -> list[Sample]:
    """`size` samples of dataset `name` from `seed`, leaving out questions in `exclude`, each asked under
    reasoning-gym's system prompt named `prompt` after the worked examples `shots` (see `worked_examples`)."""
    rg = import_reasoning_gym()
    from reasoning_gym.utils import SYSTEM_PROMPTS

    dataset = rg.create_dataset(name, size=size, seed=seed, **options)
    samples = []
    for index, entry in enumerate(dataset):
        if entry["question"] in exclude:
            continue
        samples.append(
            Sample(
                prompt=[
                    Message(role="system", content=SYSTEM_PROMPTS[prompt]),
                    *(shots or []),
                    Message(role="user", content=entry["question"]),
                ],
                data_source=f"reasoning_gym/{name}",
                ground_truth=entry["answer"],
                extra_info={"reasoning_gym_entry": _plain(entry)},
                id=f"{name}-{seed}-{index}",
            )
        )
    return samples


def split_samples(data: Any, split: str, seed: int) -> list[Sample]:
    """The `train` or `eval` samples of `data.reasoning_gym` (see the module docstring)."""
    name = data.reasoning_gym
    options = dict(data.reasoning_gym_options.get(name, {}))
    prompt = data.reasoning_gym_prompt
    reply = data.reasoning_gym_shot_reply.get(name, PLAIN_SHOT_REPLY)
    shots, examples = worked_examples(name, options, data.reasoning_gym_shots, seed, reply)
    train = reasoning_gym_samples(name, options, data.num_train_samples, seed, examples, prompt, shots)
    if split == "train":
        return train
    seen = examples | {s.prompt[-1].content for s in train}
    eval_seed = seed + EVAL_SEED_OFFSET
    return reasoning_gym_samples(name, options, data.num_eval_samples, eval_seed, seen, prompt, shots)  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    """The entry as JSON-able data (tuples as lists), as it is stored with the sample."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


__all__ = ["dataset_names", "reasoning_gym_problems", "reasoning_gym_samples", "split_samples", "worked_examples"]

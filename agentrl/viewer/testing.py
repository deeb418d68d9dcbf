"""A small, known training-run directory for tests and demos of the viewer (not produced by a model).

`write_sample_run(dir, tokenizer)` writes `metrics.jsonl`, `trajectories/step_0001.jsonl.gz` and
`trajectories/step_0002.jsonl` with trajectories whose contents the tests look for: a tool call and its output,
reward components, several stop reasons and loop kinds, a drift report and a screenshot.
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl.loops.chat_template import encode, render
from agentrl.types import Message, Role, Segment, StopReason, Trajectory

# a 1x1 PNG
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
TOOL_OUTPUT = "TOOL-OUTPUT-5"
FINAL_ANSWER = "The answer is 5."
DETAIL_LOG = "compared 1 answer\nall equal"
"""A multi-line text in reward details (as a verifier's test output is), shown as itself by the viewer."""


@dataclass
class SampleRun:
    """What `write_sample_run` wrote, for assertions."""

    path: Path
    known: Trajectory  # the tool-calling trajectory with full reward components
    trajectories: list[Trajectory]


def conversation_segments(tokenizer: Any, messages: list[Message], logprob: float = -0.25) -> list[Segment]:
    """Token segments of a conversation rendered with the chat template: assistant turns trainable.

    Each assistant turn's content and end-of-turn tokens are trainable (with logprob `logprob`); everything the
    template adds around them (prompt, tool results, role headers) is not.
    """
    segments: list[Segment] = []
    done = ""
    for k, message in enumerate(messages):
        if message.role != "assistant":
            continue
        context = render(tokenizer, messages[:k], add_generation_prompt=True)[len(done) :]
        full = render(tokenizer, messages[: k + 1], add_generation_prompt=False)
        generated = full[len(done) + len(context) :].rstrip("\n")
        role: Role = "tool" if k and messages[k - 1].role == "tool" else "user"
        segments.append(Segment(token_ids=encode(tokenizer, context), trainable=False, role=role))
        ids = encode(tokenizer, generated)
        segments.append(Segment(token_ids=ids, trainable=True, logprobs=[logprob] * len(ids), policy_version=0))
        done = full[: len(done) + len(context) + len(generated)]
    return segments


def _trajectory(tokenizer: Any, messages: list[Message], **fields: Any) -> Trajectory:
    traj = Trajectory(messages=messages, **fields)
    traj.segments = conversation_segments(tokenizer, messages)
    return traj


def write_sample_run(run_dir: Path, tokenizer: Any) -> SampleRun:
    """Write the sample run into `run_dir` (created if needed)."""
    run_dir = Path(run_dir)
    (run_dir / "trajectories").mkdir(parents=True, exist_ok=True)
    (run_dir / "screens").mkdir(exist_ok=True)
    (run_dir / "screens" / "shot.png").write_bytes(PIXEL_PNG)
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    tool_chat = [
        Message(role="system", content="You are a calculator agent."),
        Message(role="user", content="What is 2+3? Use the add tool."),
        Message(role="assistant", content=call),
        Message(role="tool", content=TOOL_OUTPUT, name="add", tool_call_id="call-1"),
        Message(role="assistant", content=FINAL_ANSWER),
    ]
    metadata = {"sample_id": "task-add", "data_source": "math"}
    common: dict[str, Any] = {"agent_name": "tool_agent", "num_turns": 2, "metadata": metadata}
    known = _trajectory(
        tokenizer,
        tool_chat,
        id="known-traj",
        group_id="group-add",
        reward=1.0,
        reward_components={"exact_match": 1.0, "format_ok": 0.5},
        reward_details={
            "exact_match": {"expected": "5", "got": "5", "log": DETAIL_LOG},
            "judge": {"error": "judge timed out"},
        },
        stop_reason=StopReason.DONE,
        timings={"total_s": 1.25, "generate_s": 0.75, "tool_s": 0.125},
        metrics={"tool_calls": 1.0},
        **common,
    )
    drifted = _trajectory(
        tokenizer,
        tool_chat[:3],
        id="drifted-traj",
        group_id="group-add",
        sample_index=1,
        reward=0.0,
        reward_components={"exact_match": 0.0, "format_ok": 0.0},
        stop_reason=StopReason.MAX_TURNS,
        **{**common, "metadata": {**common["metadata"], "drift": _drift_report()}},
    )
    step_two = [_echo(tokenizer, i, reward) for i, reward in enumerate((0.5, 0.25))]
    _write(run_dir / "trajectories" / "step_0001.jsonl.gz", [known, drifted])
    _write(run_dir / "trajectories" / "step_0002.jsonl", step_two)
    metrics = [
        {"step": 0, "eval/reward_mean": 0.1},
        {"step": 1, "rollout/reward_mean": 0.5, "train/loss": 0.25, "perf/rollout_s": 2.0, "perf/train_s": 1.0},
        {"step": 2, "rollout/reward_mean": 0.375, "train/loss": 0.125, "perf/rollout_s": 2.5, "perf/train_s": 1.5},
    ]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return SampleRun(path=run_dir, known=known, trajectories=[known, drifted, *step_two])


def _echo(tokenizer: Any, index: int, reward: float) -> Trajectory:
    pixel = "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()
    screenshot: list[dict[str, Any]] = [
        {"type": "text", "text": "Echo the word on the screen."},
        {"type": "image_url", "image_url": {"url": pixel if index == 0 else "screens/shot.png"}},
    ]
    messages = [Message(role="user", content=screenshot), Message(role="assistant", content="banana")]
    traj = Trajectory(
        id=f"echo-{index}",
        group_id="group-echo",
        sample_index=index,
        agent_name="single_turn",
        messages=messages,
        reward=reward,
        reward_components={"similarity": reward},
        stop_reason=StopReason.MAX_TOKENS,
        num_turns=1,
        metadata={"sample_id": "task-echo", "data_source": "echo"},
    )
    text_messages = [Message(role="user", content="Echo the word on the screen."), messages[1]]
    traj.segments = conversation_segments(tokenizer, text_messages, logprob=-2.0)
    return traj


def _drift_report() -> dict[str, Any]:
    return {"ok": False, "position": 12, "kind": "template", "expected": "<|im_start|>", "actual": "<|im_end|>"}


def _write(path: Path, trajectories: list[Trajectory]) -> None:
    lines = "".join(t.to_json() + "\n" for t in trajectories)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(lines)
    else:
        path.write_text(lines, encoding="utf-8")


def windowed_trajectory(moves: list[str], policies: list[str] | None = None) -> Trajectory:
    """A trajectory whose loop rewrote its context before each reply (a gym history window, or roles each in
    their own conversation): one step sample per move, each a 2-token prompt `state before <move>` and the 3-token
    reply `<move>`; the last move's sample is the trajectory itself, the others are its `earlier_steps`. With
    `policies`, each reply is that policy's (`Segment.policy`) and each policy gets a reward of its own."""

    def sample(move: str, policy: str | None) -> Trajectory:
        return Trajectory(
            messages=[Message(role="user", content=f"state before {move}"), Message(role="assistant", content=move)],
            segments=[
                Segment(token_ids=[1, 2], trainable=False),
                Segment(token_ids=[3, 4, 5], trainable=True, policy=policy),
            ],
        )

    names = policies or [None] * len(moves)
    *earlier, last = [sample(move, policy) for move, policy in zip(moves, names, strict=True)]
    rewards = {name: float(k) for k, name in enumerate(dict.fromkeys(policies or []))}
    return last.model_copy(update={"id": "windowed", "earlier_steps": earlier, "policy_rewards": rewards})


def tree_leaves() -> list[Trajectory]:
    """The 4 leaves of a tree rollout forked after turns 1 and 2 (paths 0·0, 0·1, 1·0, 1·1), rewards 1, 0, 0, 0,
    each with the `tree_grpo` advantages of the nodes on its path as the trainer records them."""
    advantages = {
        (0, 0): [0.0, 0.87, 1.5],
        (0, 1): [0.0, 0.87, -0.5],
        (1, 0): [0.0, -0.87, -0.5],
        (1, 1): [0.0, -0.87, -0.5],
    }
    leaves = []
    for path, reward in zip(advantages, (1.0, 0.0, 0.0, 0.0), strict=True):
        traj = windowed_trajectory(["LEFT", "DOWN", "UP"])
        tree = {"id": "tree-a", "path": list(path), "branch_turns": [1, 2], "node_advantages": advantages[path]}
        update = {"id": f"leaf-{path[0]}{path[1]}", "group_id": "g", "reward": reward, "num_turns": 3}
        leaves.append(traj.model_copy(update={**update, "metadata": {"tree": tree}}))
    return leaves

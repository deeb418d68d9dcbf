"""Context management with the real model, server and containers: SWE episodes reach their context budget at
least twice and go on each time, with each strategy, past the server's context (`rollout.max_model_len`); every
step sample is token-exact (the drift checker: no template drift), every generated token's logprob is the base
model's (recomputed), and the summary `summarize` has the policy write is trained."""

from __future__ import annotations

import json

import pytest

from agentrl.cli import main
from agentrl.loops.drift import check_drift
from tests.integration.exactness import assert_tokens_are_the_base_model_s, step_metrics, trained_trajectories

pytestmark = pytest.mark.integration

MAX_MODEL_LEN = 656
REMINDER = (
    'Error: your reply called no tool. Call one tool per reply, in this form:\n<tool_call>\n{"name": "bash", '
    '"arguments": {"command": "ls"}}\n</tool_call>\nUse bash to list files (ls), read code (cat -n FILE or sed -n '
    "1,40p FILE), search (grep -rn NAME .) and run the tests (python -m pytest -x -q). Read the failing code before "
    "you change it, change one line at a time, and run the tests again."
)


@pytest.mark.parametrize("strategy", ["drop_tool_outputs", "window", "summarize"])
def test_swe_episodes_go_on_past_the_servers_context(
    strategy, hf_server_url, easy_task, default_model_path, default_tokenizer, tmp_path, no_leftovers
) -> None:
    rows = tmp_path / "task.jsonl"
    rows.write_text(json.dumps(easy_task.to_row()) + "\n")
    args = [
        "train", "recipe=swe_easy", f"rollout.urls=[{hf_server_url}]", f"data.train_files=[{rows}]",
        "data.eval_files=[]", "trainer.steps=1", "trainer.eval_every=0", "data.batch_size=1", "rollout.n=2",
        "rollout.seed=3", "rollout.max_tokens=16", f"rollout.max_model_len={MAX_MODEL_LEN}", "agent.max_turns=7",
        "agent.max_total_tokens=8192", "agent.on_cut_turn=continue", "agent.max_consecutive_tool_errors=99",
        "agent.kwargs.examples=[]", "agent.kwargs.time_budget_s=600", f"agent.kwargs.reminder={json.dumps(REMINDER)}",
        "tools=[{class: bash}]",
        "agent.context.max_tokens=560", f"agent.context.strategy={strategy}", "agent.context.keep_tool_outputs=0",
        "agent.context.keep_turns=1", "agent.context.summary_max_tokens=24", f"output_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    assert main(args) == 0
    (metrics,) = step_metrics(tmp_path / "run")
    played = trained_trajectories(tmp_path / "run")
    assert len(played) == 2
    for traj in played:
        steps = [*traj.earlier_steps, traj]
        compactions = traj.metadata["context"]["compactions"]
        assert len(compactions) >= 2 and len(steps) == len(compactions) + 1, (traj.stop_reason, compactions)
        assert traj.num_turns > compactions[-1]["turn"]  # it went on after the last one
        assert traj.stop_reason.value in ("max_turns", "context_exhausted"), traj.error
        played_tokens = sum(c["tokens_before"] - c["tokens_after"] for c in compactions) + traj.num_tokens
        assert played_tokens > MAX_MODEL_LEN  # more than the server could have held at once
        for step in steps:  # a sampled reply may be spelt in other tokens than the template's ("tokenization")
            report = check_drift(default_tokenizer, step)
            assert step.num_tokens <= MAX_MODEL_LEN and (report.ok or report.kind == "tokenization"), str(report)
    assert assert_tokens_are_the_base_model_s(played, default_model_path) > 0
    generated = sum(t.num_generated_tokens_in_all_steps() for t in played)
    assert metrics["train/tokens"] >= generated  # every step sample's generated tokens are in the batch
    if strategy == "summarize":
        asked = [s for t in played for s in t.earlier_steps if "Summarize the task" in str(s.messages[-2].content)]
        assert asked and all(s.segments[-1].trainable and s.segments[-1].token_ids for s in asked)

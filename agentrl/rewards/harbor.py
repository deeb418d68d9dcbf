"""`harbor_task`: a Harbor task's own verifier as the reward — what its `tests/test.sh` wrote to
`/logs/verifier/reward.txt` or `reward.json`, run in the trajectory's container after the agent finished.

```yaml
reward:
  components:
    - {name: tests, type: harbor_task}                          # Harbor's primary reward: `reward`, or the only one
    - {name: style, type: harbor_task, key: style, weight: 0.2} # another entry of reward.json
```

The `harbor_agent` / `harbor_oracle` loops run the verifier before the container is removed and record its
result on the trajectory (`metadata["harbor"]["verifier"]`); this component scores that record. Details: every
reward the verifier reported (reward.json's components), `resolved` (the score reached `resolved_at`), its exit
code, whether it timed out, and the end of its output, which the viewer shows. No reward file, a malformed one or
a timeout is a failed component (scored by `reward.on_failure`), its details saying why.
"""

from __future__ import annotations

from typing import Any

from agentrl.rewards.base import RewardComponent, RewardError, RewardInput, RewardResult

OUTPUT_TAIL = 4000


class HarborTaskReward(RewardComponent):
    """Score a trajectory by its Harbor task's verifier.

    Args:
        key: the entry of reward.json to score; None for Harbor's primary reward (`reward`, else the only one).
        resolved_at: the score from which the task counts as resolved (`details["resolved"]`).
    """

    def __init__(self, key: str | None = None, resolved_at: float = 1.0) -> None:
        self.key = key
        self.resolved_at = resolved_at

    async def ascore(self, inp: RewardInput) -> RewardResult:
        from agentrl.harbor.verifier import RewardFileError, primary_reward

        harbor = inp.trajectory.metadata.get("harbor") or {}
        record = harbor.get("verifier")
        if record is None:
            raise RewardError(_no_record(inp, harbor), {"resolved": False})
        details = _details(record)
        if record.get("error"):
            raise RewardError(record["error"], details)
        try:
            score = primary_reward(record["rewards"], self.key)
        except RewardFileError as exc:
            raise RewardError(str(exc), details) from None
        details["resolved"] = score >= self.resolved_at
        return RewardResult(score, details)


def _details(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "resolved": False,
        "rewards": record.get("rewards"),
        "source": record.get("source"),
        "exit_code": record.get("exit_code"),
        "timed_out": record.get("timed_out"),
        "duration_s": round(float(record.get("duration_s") or 0.0), 3),
        "test_output": str(record.get("output") or "")[-OUTPUT_TAIL:],
    }


def _no_record(inp: RewardInput, harbor: dict[str, Any]) -> str:
    if not harbor:
        return (
            "no Harbor verifier result: the trajectory was not played by a Harbor loop; set agent.name=harbor_agent "
            "(or data.agent_name=harbor_agent) for Harbor tasks"
        )
    reason = inp.trajectory.error or str(inp.trajectory.stop_reason)
    return f"the verifier did not run: the trajectory ended first ({reason})"

"""`swe_tests`: SWE-bench grading as a reward — the trajectory's patch and the task's test patch applied in a
fresh container of the task's image, FAIL_TO_PASS and PASS_TO_PASS run with a timeout. Each row is graded by its
grader (`agentrl.swe.grading.grader_of`): SWE-bench rows of repositories the official package knows by the
package's eval script, log parser and grading; agentrl's tasks and others by a pytest run with a JUnit report.

```yaml
reward:
  components:
    - {name: resolved, type: swe_tests, weight: 1.0}                      # 1 when every test passes, else 0
    - {name: f2p, type: swe_tests, metric: f2p_fraction, weight: 0.2}     # partial credit, same grading reused
    - {name: applied, type: swe_tests, metric: applied, weight: 0.1}      # shaping: the agent changed something
```

The patch is `trajectory.metadata["model_patch"]` (set by the `swe_agent` loop; missing means empty) and the task
the sample's SWE-bench columns. Gradings are cached by (task, patch), so identical patches in a group and several
components over one trajectory cost one container run. Details: resolved, F2P/P2P counts, failing tests, log tail.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from agentrl.rewards.aio import LoopSemaphore
from agentrl.rewards.base import RewardComponent, RewardInput, RewardResult
from agentrl.swe.grading import GRADES

Metric = Literal["resolved", "f2p_fraction", "applied"]
METRICS: tuple[str, ...] = get_args(Metric)


class SWETestsReward(RewardComponent):
    """Score a trajectory's patch by the task's tests.

    Args:
        metric: `resolved` (1.0 when every FAIL_TO_PASS and PASS_TO_PASS test passes, else 0.0) or
            `f2p_fraction` (the share of FAIL_TO_PASS tests passing, 0.0 when a PASS_TO_PASS test breaks) or
            `applied` (1.0 when the patch is not empty and applies: shaping for a model that has yet to fix anything).
        test_timeout_s: limit of the test run (a timeout scores 0); `timeout_s` is the pipeline's own limit.
        skip_empty: score an empty patch 0 without starting a container (the bundled tasks are validated to fail
            on the base commit; SWE-bench's by construction).
        memory / cpus: limits of the grading container.
        max_concurrency: gradings running at once.
    """

    default_timeout_s = None  # the sandbox times the tests out itself

    def __init__(
        self,
        metric: Metric = "resolved",
        test_timeout_s: float = 300.0,
        skip_empty: bool = True,
        memory: str = "1g",
        cpus: float = 1.0,
        max_concurrency: int = 4,
    ) -> None:
        from agentrl.config.schema import SandboxConfig

        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
        self.metric = metric
        self.test_timeout_s = test_timeout_s
        self.skip_empty = skip_empty
        self.sandbox = SandboxConfig(backend="docker", memory=memory, cpus=cpus, exec_timeout_s=test_timeout_s)
        self.limit = LoopSemaphore(max_concurrency)

    async def ascore(self, inp: RewardInput) -> RewardResult:
        from agentrl.swe.task import SWETask

        task = SWETask.from_sample(inp.sample)
        patch = str(inp.trajectory.metadata.get("model_patch") or "")
        async with self.limit.get():
            result = await GRADES.grade(
                task, patch, config=self.sandbox, timeout_s=self.test_timeout_s, skip_empty=self.skip_empty
            )
        details: dict[str, Any] = result.details()
        if self.metric == "resolved":
            return RewardResult(float(result.resolved), details)
        if self.metric == "applied":
            return RewardResult(float(bool(patch.strip()) and result.patch_applied), details)
        score = result.f2p_fraction if result.p2p_fraction == 1.0 and result.patch_applied else 0.0
        return RewardResult(score, details)

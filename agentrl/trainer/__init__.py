"""agentrl.trainer: from scored trajectories to new weights on the rollout servers.

Modules: `loop` (`train(cfg)`: the training loop, sync and async), `collect` (one step's batch: rollout, rewards,
dynamic sampling, failed trajectories left out), `registry` (ADVANTAGES and LOSSES), `algorithms` (advantage
estimators per trajectory), `turn_algorithms` / `turn_credit` (per turn, and turns onto tokens), `advantages` (the
token advantages of a step's rows, from either kind), `losses` / `loss_terms` (policy losses, aggregation, KL, TIS),
`sampling` (DAPO dynamic sampling and overlong penalty), `batch` (padded tensors), `step` (one policy-gradient
step), `engine` (the policy engine: FSDP2, LoRA, precision), `backend` / `rank` / `workers` (in-process or Ray
trainer ranks), `reference` (the frozen reference policy), `lora`, `sync` (weight pushes to the rollout servers),
`checkpoint` / `checkpoint_dir` (saving and resuming), `cursor` (the data position), `staleness`, `metrics`,
`progress`.
"""

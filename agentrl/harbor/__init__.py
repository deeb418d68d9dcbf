"""Harbor tasks (harborframework.com's task format, as in Terminal-Bench 2): folders an agent is trained and
evaluated on, each with its own container and its own verifier.

* `config`: task.toml, mirrored from harbor 0.26 (`TaskConfig`);
* `task`: one task folder (`HarborTask`, `load_task`);
* `dataset`: a task folder, a folder of them, or a dataset.toml as data (`load_tasks`, `task_samples`);
* `limits`: the task's timeouts and resources as budgets and container limits, capped by the run's config;
* `images`: the task's `environment/Dockerfile` built offline into a content-hashed image;
* `container`: the task's container (its image as built, `/logs`), and running its scripts;
* `verifier`: `tests/test.sh` in the agent's container after it finished; reward.txt / reward.json.

`data.train_files=[path/to/tasks/]` loads them; the loops are `harbor_agent` (the model with tools) and
`harbor_oracle` (the task's `solution/solve.sh`), the reward `harbor_task`; see `recipes/harbor`.
"""

from agentrl.harbor.dataset import load_tasks, task_samples
from agentrl.harbor.task import HarborTask, HarborTaskError, load_task

__all__ = ["HarborTask", "HarborTaskError", "load_task", "load_tasks", "task_samples"]

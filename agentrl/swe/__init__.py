"""Software-engineering tasks in the SWE-bench format: loading, sandboxed repositories, test-based grading.

* `task`: `SWETask` (one SWE-bench row) and `load_tasks`;
* `repo`: the task's repository in a sandbox (start, copy to `/work`, diff out, patches in);
* `report`: pytest JUnit reports as SWE-bench test ids;
* `grading`: `grade_patch` — resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes in a fresh container;
* `images`: offline images of tasks built from PyPI sdists.

The agent loop is `agentrl.loops.swe.SWEAgentLoop` (`swe_agent`), the reward `swe_tests`.
"""

from agentrl.swe.task import SWETask, TaskError, load_tasks

__all__ = ["SWETask", "TaskError", "load_tasks"]

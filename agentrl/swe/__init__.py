"""Software-engineering tasks in the SWE-bench format: loading, sandboxed repositories, test-based grading.

* `task`: `SWETask` (one task row) and `load_tasks`;
* `formats`: the rows of SWE-bench (full, Lite, Verified, Multimodal), SWE-Gym, SWE-smith and R2E-Gym as they
  ship, mapped onto `SWETask`, with each dataset's image naming;
* `repo`: the task's repository in a sandbox (start, copy to `/work`, diff out, patches in);
* `report`: pytest JUnit reports as SWE-bench test ids;
* `grading`: `grade_patch` — resolved when every FAIL_TO_PASS and PASS_TO_PASS test passes in a fresh container;
  the grader is chosen per row (`grader_of`): the official package's, or agentrl's pytest run;
* `official`: SWE-bench's own test spec, test command and log grading, from the `swebench` package;
* `official_run`: its eval script run in a container of the task's image, as the package's harness runs it;
* `images`: offline images of tasks built from PyPI sdists; datasets' images pulled when asked (`--pull`).

The agent loop is `agentrl.loops.swe.SWEAgentLoop` (`swe_agent`), the reward `swe_tests`.
"""

from agentrl.swe.task import SWETask, TaskError, load_tasks

__all__ = ["SWETask", "TaskError", "load_tasks"]

"""A verifiers 0.4 taskset in verifiers' own API (`verifiers.v1`), shipped with the recipe: one-digit sums, the
answer in <answer> tags, scored by two reward functions: the right sum (weight 1) and the tag's format (weight
0.2), with the reply's length as a metric. `split: eval` draws the held-out sums from another seed. Any installed
taskset runs the same way: `agent.kwargs.taskset=<its id>`."""

import random
import re

import verifiers.v1 as vf

SYSTEM_PROMPT = "Add the numbers. Think briefly, then give the sum inside <answer></answer> tags."
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


class SumData(vf.TaskData):
    answer: str


class SumTask(vf.Task[SumData]):
    @vf.stop
    async def one_reply(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def correct_sum(self, trace: vf.Trace) -> float:
        found = ANSWER.search(trace.last_reply or "")
        return float(found is not None and found.group(1).strip() == self.data.answer)

    @vf.reward(weight=0.2)
    async def answer_format(self, trace: vf.Trace) -> float:
        return float(ANSWER.search(trace.last_reply or "") is not None)

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply or ""))


class SumsConfig(vf.TasksetConfig):
    split: str = "train"
    num_tasks: int = 512


class SumsTaskset(vf.Taskset[SumTask, SumsConfig]):
    def load(self) -> list[SumTask]:
        rng = random.Random(0 if self.config.split == "train" else 1_000_003)
        tasks = []
        for i in range(self.config.num_tasks):
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            data = SumData(idx=i, name=f"{self.config.split}-{i}", prompt=f"{a} + {b} = ?", answer=str(a + b))
            tasks.append(SumTask(data.model_copy(update={"system_prompt": SYSTEM_PROMPT}), self.config.task))
        return tasks


__all__ = ["SumsTaskset"]

"""A one-word taskset in verifiers 0.4's own API, what `check_loop` plays for `agent.name=verifiers_v1`: the task
says a word, the reward is 1 when the reply holds it. Loaded by verifiers' interpreter only (agentrl's has 0.2)."""

import verifiers.v1 as vf

WORDS = ("amber", "cobalt")


class WordData(vf.TaskData):
    word: str


class WordTask(vf.Task[WordData]):
    @vf.stop
    async def one_reply(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def says_the_word(self, trace: vf.Trace) -> float:
        return float(self.data.word in (trace.last_reply or "").lower())

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply or ""))


class WordTaskset(vf.Taskset[WordTask, vf.TasksetConfig]):
    def load(self) -> list[WordTask]:
        return [
            WordTask(WordData(idx=i, name=word, prompt=f"Say the word {word}.", word=word), self.config.task)
            for i, word in enumerate(WORDS)
        ]


__all__ = ["WordTaskset"]

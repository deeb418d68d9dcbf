"""A custom agent loop: guess the number, with feedback turns. Run it against the real model:

agentrl rollout data.eval_files=[examples/guess_number.jsonl] agent.name=examples.custom_loop:GuessNumberLoop
"""

import re

from pydantic import Field

from agentrl.loops import AgentLoopBase, LoopCheckCase, LoopOptions, register_loop
from agentrl.types import Message, Sample, StopReason


class GuessOptions(LoopOptions):
    hints: bool = Field(True, description="answer wrong guesses with higher/lower")


@register_loop("guess_number")
class GuessNumberLoop(AgentLoopBase):
    """The model guesses a secret number (the row's ground_truth); each wrong guess gets "higher"/"lower"
    (or only "Wrong." with `agent.kwargs.hints=false`)."""

    Options = GuessOptions  # optional: checks agent.kwargs before the run starts

    @classmethod
    def check_case(cls):  # optional: what `agentrl check` plays (default: one prompt, one reply)
        prompt = [Message(role="user", content="Guess a number between 1 and 20.")]
        return LoopCheckCase(sample=Sample(prompt=prompt, ground_truth="13"), reply=scripted_guess, min_turns=3)

    async def run(self, sample, ctx):
        secret = int(sample.ground_truth)
        ctx.start(sample.prompt)
        while True:  # ctx.generate() ends the trajectory at max_turns or a token budget
            turn = await ctx.generate()
            match = re.search(r"-?\d+", turn.text)
            if match is None:
                feedback = "Answer with a single number."
            elif int(match.group()) == secret:
                ctx.trajectory.reward = 1.0 / ctx.trajectory.num_turns
                ctx.trajectory.stop_reason = StopReason.DONE
                return ctx.trajectory
            elif not self.options.hints:
                feedback = "Wrong."
            else:
                feedback = "Higher." if int(match.group()) < secret else "Lower."
            ctx.add_messages([Message(role="user", content=feedback)])


def scripted_guess(conversation: str) -> str:
    """A scripted player for `check_case`: 10, then 15 after "Higher.", then 13 after "Lower."."""
    return ["10", "15", "13"][min(2, len(re.findall(r"Higher\.|Lower\.", conversation)))]

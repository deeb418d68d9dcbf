"""The simulated workload of `agent_loop_overhead.py`: its parameters, the seeded tool latencies, a continuous-
batching server with a fixed decode rate, and the zero-cost schedules the measured runs are compared with.

See `agent_loop_overhead.py` for the model and why these parameters. Pure CPU: no model, no network.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.rollout.protocol import SamplingParams
from agentrl.tools import FunctionTool, tool

Clock = Callable[[], float]


@dataclass(frozen=True)
class Params:
    """Server, script and tool-latency parameters of one workload (see the module docstring)."""

    capacity: int = 32
    per_token_s: float = 0.00125
    prefill_s: float = 0.008
    tokens_per_turn: int = 96
    turns: int = 8
    tool_median_s: float = 0.25
    tool_sigma: float = 0.25
    outlier_p: float = 0.02
    outlier_factor: float = 10.0
    seed: int = 0

    @property
    def service_s(self) -> float:
        """Slot time of one request (prefill plus decoding `tokens_per_turn` tokens)."""
        return self.prefill_s + self.tokens_per_turn * self.per_token_s


FULL = Params()
QUICK = Params(capacity=8, per_token_s=0.0001, prefill_s=0.0004, turns=4, tool_median_s=0.01)


# ----------------------------------------------------------------------------------------------- tool latency


def tool_latency(params: Params, task: int, turn: int) -> float:
    """Latency of the `work` call of trajectory `task` at `turn`: seeded, so identical in every mode."""
    rng = random.Random(f"{params.seed}:{task}:{turn}")
    latency = rng.lognormvariate(math.log(params.tool_median_s), params.tool_sigma)
    if rng.random() < params.outlier_p:
        latency *= params.outlier_factor
    return latency


def latency_table(params: Params, trajectories: int) -> list[list[float]]:
    """`table[task][turn]` for the `turns - 1` tool calls of every trajectory."""
    return [[tool_latency(params, i, k) for k in range(params.turns - 1)] for i in range(trajectories)]


def make_work_tool(latencies: Sequence[Sequence[float]]) -> FunctionTool:
    """The `work` tool: sleeps the scripted latency of its (task, turn)."""

    async def work(task: int, turn: int) -> str:
        """Do one step of work for a task.

        Args:
            task: the task index.
            turn: the turn index.
        """
        await asyncio.sleep(latencies[task][turn])
        return "ok"

    return tool(work)


# -------------------------------------------------------------------------------------------- simulated server


@dataclass
class SimOutput:
    """What `generate` returns (the fields the loops read from a rollout client's output)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str
    policy_version: int = 0


@dataclass
class SimulatedServer:
    """A rollout server with `capacity` continuous-batching slots and a fixed per-token decode latency.

    `generate` follows the rollout client's contract. Replies are scripted per (task, turn): bind each
    session id to its task with `bind`, and `prepare` the replies before timing so that tokenizing them is
    not counted. Every request's slot interval is recorded in `intervals` (clock seconds).
    """

    tokenizer: Any
    params: Params
    clock: Clock = time.perf_counter
    intervals: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._free: list[float] = [-math.inf] * self.params.capacity  # heap: when each slot is free again
        self._tasks: dict[str, int] = {}
        self._turns: dict[str, int] = {}
        self._replies: dict[tuple[int, int], list[int]] = {}

    def service_time(self, num_tokens: int) -> float:
        """Slot time of a request generating `num_tokens` tokens."""
        return self.params.prefill_s + num_tokens * self.params.per_token_s

    def bind(self, session_id: str, task: int) -> None:
        """Route the requests of `session_id` to the script of `task`."""
        self._tasks[session_id] = task

    def prepare(self, tasks: int) -> None:
        """Tokenize the replies of tasks `0..tasks-1` now, outside the timed region."""
        for task in range(tasks):
            for turn in range(self.params.turns):
                self.reply_ids(task, turn)

    def reply_ids(self, task: int, turn: int) -> list[int]:
        """The scripted reply of `task` at `turn`: exactly `tokens_per_turn` token ids, EOS last."""
        key = (task, turn)
        if key not in self._replies:
            self._replies[key] = _scripted_reply(self.tokenizer, self.params, task, turn)
        return self._replies[key]

    async def generate(
        self, prompt_ids: list[int], sampling: SamplingParams, session_id: str | None = None
    ) -> SimOutput:
        """Queue for a slot, decode the scripted reply at the fixed rate, return its token ids."""
        if session_id is None or session_id not in self._tasks:
            raise KeyError(f"session {session_id!r} is not bound to a task")
        turn = self._turns.get(session_id, 0)
        self._turns[session_id] = turn + 1
        ids = self.reply_ids(self._tasks[session_id], min(turn, self.params.turns - 1))
        finish = "stop"
        if len(ids) > sampling.max_tokens:
            ids, finish = ids[: sampling.max_tokens], "length"
        arrival = self.clock()
        start = max(arrival, heapq.heappop(self._free))
        end = start + self.service_time(len(ids))
        heapq.heappush(self._free, end)
        self.intervals.append((start, end))
        await asyncio.sleep(max(0.0, end - self.clock()))
        return SimOutput(token_ids=list(ids), logprobs=[-0.1] * len(ids), finish_reason=finish)

    def max_in_flight(self) -> int:
        """The most requests ever decoding at once, from the recorded intervals."""
        events = sorted([(s, 1) for s, _ in self.intervals] + [(e, -1) for _, e in self.intervals])
        active = peak = 0
        for _, step in events:  # at equal times, ends (-1) sort before starts (+1)
            active += step
            peak = max(peak, active)
        return peak


def _scripted_reply(tokenizer: Any, params: Params, task: int, turn: int) -> list[int]:
    if turn < params.turns - 1:
        body = "\n" + json.dumps({"name": "work", "arguments": {"task": task, "turn": turn}}) + "\n"
        text = f"<tool_call>{body}</tool_call>"
    else:
        text = f"Task {task} is done."
    ids = tokenizer.encode(text, add_special_tokens=False)
    filler = tokenizer.encode(".", add_special_tokens=False)
    pad = params.tokens_per_turn - 1 - len(ids)
    if pad < 0 or len(filler) != 1:
        raise ValueError(f"tokens_per_turn={params.tokens_per_turn} cannot hold the reply {text!r}")
    return [*(filler * pad), *ids, tokenizer.eos_token_id]


# -------------------------------------------------------------------------------------------------- references


def replay_makespan(params: Params, latencies: Sequence[Sequence[float]]) -> float:
    """Makespan with a zero-cost orchestrator: an exact discrete-event replay of the FIFO slot server.

    Every trajectory's first request arrives at t=0; each next one the instant its tool call returns.
    Arrivals are served in arrival order (ties by task), each on the earliest free slot. FIFO is not an optimal
    schedule, so a real run whose arrivals interleave differently can beat this replay by a little.
    """
    service = params.service_s
    free = [0.0] * params.capacity
    arrivals = [(0.0, task, 0) for task in range(len(latencies))]
    heapq.heapify(arrivals)
    makespan = 0.0
    while arrivals:
        at, task, turn = heapq.heappop(arrivals)
        end = max(at, heapq.heappop(free)) + service
        heapq.heappush(free, end)
        if turn + 1 < params.turns:
            heapq.heappush(arrivals, (end + latencies[task][turn], task, turn + 1))
        else:
            makespan = max(makespan, end)
    return makespan


def ideal_bounds(params: Params, latencies: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(total work / capacity, longest critical path): no schedule whatsoever finishes before either.

    The ideal is their maximum. Total work is `trajectories * turns * service`; a trajectory's critical path
    is `turns * service` plus its own tool latencies.
    """
    work = len(latencies) * params.turns * params.service_s / params.capacity
    critical = params.turns * params.service_s + max(sum(row) for row in latencies)
    return work, critical


def sync_replay_makespan(params: Params, latencies: Sequence[Sequence[float]]) -> float:
    """Makespan of the batch-synchronous baseline with a zero-cost orchestrator: per turn, the batch's waves
    of `capacity` requests, then the slowest tool call of the batch."""
    waves = math.ceil(len(latencies) / params.capacity)
    tools = sum(max(row[k] for row in latencies) for k in range(params.turns - 1))
    return params.turns * waves * params.service_s + tools

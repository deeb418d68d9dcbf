"""verifiers 0.4's episodes, served to agentrl: run by the Python that has `verifiers` 0.4 installed (its `openai`
pin is older than agentrl's, so it lives in an interpreter of its own, `agentrl.verifiers_v1.install`).

Each episode is verifiers' own `Env.run_episode(task, ModelContext)`: the taskset's task, its harness and runtime,
its stop conditions, its reward and metric functions, unchanged. The model endpoint is the agentrl gateway session
agentrl opened for the trajectory, so every model call is recorded there token-exactly; what comes back here is
the trace's verdict (rewards, metrics, errors). This file imports only the standard library and `verifiers`, never
agentrl.

One-shot commands (one JSON argument, one JSON answer on stdout): `tasks {"env": ..., "path": ...}` lists a
taskset's tasks (key, prompt, system prompt); `check {...}` says what stops the environment from loading.
`serve` reads one JSON request per line, `{"id", "env", "path", "task": {"key"} | {"index"}, "base_url",
"model"}`, runs the episodes concurrently, and writes `{"id", "result"}` or `{"id", "error"}` per episode. It
exits when its input closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from typing import Any

API_KEY_VAR = "AGENTRL_GATEWAY_KEY"  # the gateway session's URL is its secret: the key itself is not checked


def _on_path(path: str | None) -> None:
    if path and path not in sys.path:
        sys.path.insert(0, path)


def env_config(request: dict[str, Any]) -> Any:
    import verifiers.v1 as vf

    _on_path(request.get("path"))
    return vf.resolve_env_config(request["env"])


def _prompt(prompt: Any) -> Any:
    if prompt is None or isinstance(prompt, str):
        return prompt
    return [m.model_dump(mode="json", exclude_none=True) if hasattr(m, "model_dump") else m for m in prompt]


def list_tasks(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The taskset's tasks as agentrl reads them: the key that finds the task again, and what the model is shown."""
    import verifiers.v1 as vf

    config = env_config(request)
    rows = []
    for task in vf.load_taskset(config.taskset):
        data = task.data
        name = data.id or data.name or (None if data.idx is None else str(data.idx))
        rows.append({"key": task.key, "name": name, "prompt": _prompt(data.prompt), "system": data.system_prompt})
    return rows


def check(request: dict[str, Any]) -> list[str]:
    """What stops the environment from loading, or nothing."""
    import verifiers.v1 as vf

    try:
        config = env_config(request)
        vf.load_environment(config)
        next(iter(vf.load_taskset(config.taskset)), None)
    except Exception as exc:  # reported to the user, whatever the taskset raised
        return [f"{type(exc).__name__}: {exc}"]
    return []


class Episodes:
    """Loaded environments (each serving its interception for as long as this process lives) and their tasks."""

    def __init__(self) -> None:
        self.stack = contextlib.AsyncExitStack()
        self.envs: dict[str, tuple[Any, list[Any]]] = {}
        self.loading: dict[str, asyncio.Lock] = {}

    async def env(self, request: dict[str, Any]) -> tuple[Any, list[Any]]:
        import verifiers.v1 as vf

        key = json.dumps([request["env"], request.get("path")], sort_keys=True)
        async with self.loading.setdefault(key, asyncio.Lock()):
            if key not in self.envs:
                config = env_config(request)
                env = vf.load_environment(config)
                tasks = list(vf.load_taskset(config.taskset))
                await self.stack.enter_async_context(env.serving())
                self.envs[key] = (env, tasks)
        return self.envs[key]

    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        import verifiers.v1 as vf

        env, tasks = await self.env(request)
        task = find_task(tasks, request["task"])
        os.environ.setdefault(API_KEY_VAR, "agentrl")
        client = vf.EvalClientConfig(base_url=request["base_url"], api_key_var=API_KEY_VAR)
        episode = await env.run_episode(task, vf.ModelContext(model=request["model"], client=client))
        return verdict(episode)


def find_task(tasks: list[Any], where: dict[str, Any]) -> Any:
    """The task with `where`'s key, or at its index."""
    if "key" in where:
        found = next((task for task in tasks if task.key == where["key"]), None)
        if found is None:
            raise LookupError(f"the taskset has no task with key {where['key']} (did its data change?)")
        return found
    if not 0 <= where["index"] < len(tasks):
        raise LookupError(f"the taskset has {len(tasks)} tasks, none at index {where['index']}")
    return tasks[where["index"]]


def _said(error: Any) -> str:
    return f"{error.type}: {error.message}" if hasattr(error, "message") else str(error)


def verdict(episode: Any) -> dict[str, Any]:
    """The episode's rewards (each function's score and weight), metrics and errors; one trace's names as they are,
    several traces' (a multi-agent env) prefixed by the agent's name."""
    several = len(episode.traces) > 1
    rewards: dict[str, dict[str, float]] = {}
    metrics: dict[str, float] = {}
    for trace in episode.traces:
        prefix = f"{trace.agent.name}/" if several else ""
        for name, reward in trace.rewards.items():
            if reward is not None:
                rewards[prefix + name] = {"score": float(reward.score), "weight": float(reward.weight)}
        metrics.update({prefix + k: float(v) for k, v in trace.metrics.items() if v is not None})
    errors = [_said(e) for e in episode.errors] + [_said(e) for trace in episode.traces for e in trace.errors]
    return {
        "ok": bool(episode.ok),
        "reward": sum(t.reward for t in episode.traces),
        "rewards": rewards,
        "metrics": metrics,
        "errors": errors,
        "stop_condition": next((t.stop_condition for t in episode.traces if t.stop_condition), None),
        "timed_out": bool(episode.is_timeout or any(t.is_timeout for t in episode.traces)),
    }


def answers_channel() -> Any:
    """This process's stdout for agentrl's answers alone: what verifiers, a harness or a runtime prints (to fd 1,
    inherited by their subprocesses) goes to stderr instead."""
    sys.stdout.flush()
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return channel


async def serve(channel: Any) -> None:
    episodes = Episodes()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    running: set[asyncio.Task[None]] = set()

    def answer(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    async def one(request: dict[str, Any]) -> None:
        try:
            answer({"id": request["id"], "result": await episodes.run(request)})
        except Exception as exc:
            answer({"id": request["id"], "error": f"{type(exc).__name__}: {exc}"})

    async with episodes.stack:
        while line := await reader.readline():
            task = asyncio.create_task(one(json.loads(line)))
            running.add(task)
            task.add_done_callback(running.discard)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command not in ("serve", "tasks", "check"):
        print("usage: episode_server.py serve | tasks JSON | check JSON", file=sys.stderr)
        return 2
    channel = answers_channel()
    if command == "serve":
        asyncio.run(serve(channel))
        return 0
    request = json.loads(argv[1])
    channel.write(json.dumps(list_tasks(request) if command == "tasks" else check(request)) + "\n")
    channel.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

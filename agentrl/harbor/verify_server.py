"""Harbor's verifier, served to agentrl: run by the Python that has `harbor` installed, one process per agentrl
process, for as long as agentrl verifies (`agentrl.harbor.verify_client` starts it and reads its answers).

Each verification is Harbor's public `Verifier(task, trial_paths, environment).verify()`: Harbor decides which
test files go where, runs its command for test.sh, downloads `/logs/verifier` and parses the reward files. The
environment it drives is `AgentrlContainer`, a `BaseEnvironment` whose exec, upload and download are asked back
of agentrl, which runs them on the episode's own sandbox (its limits, its cleanup). This file imports only the
standard library and `harbor`, never agentrl (agentrl runs on Python 3.11, harbor needs 3.12).

The protocol is one JSON object per line. agentrl writes `{"op": "verify", "id", "task", "trial_dir"}`,
`{"op": "cancel", "id"}` and `{"reply": call, "result" | "error"}`; this process writes `{"call", "id", "op":
exec | upload_file | upload_dir | download_file | download_dir, ...}` and, when a verification ends, `{"id",
"rewards"}` or `{"id", "error"}`. It exits when its input closes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

LINE_LIMIT = 1 << 26  # an exec reply carries a command's capped output


class Channel:
    """Questions to agentrl about the sandbox, each awaited until its reply comes."""

    def __init__(self, out: TextIO):
        self.out = out
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.last_call = 0

    def send(self, message: dict[str, Any]) -> None:
        self.out.write(json.dumps(message) + "\n")
        self.out.flush()

    async def ask(self, verification: int, op: str, **args: Any) -> Any:
        self.last_call += 1
        call = self.last_call
        self.pending[call] = asyncio.get_running_loop().create_future()
        self.send({"call": call, "id": verification, "op": op, **args})
        try:
            answer = await self.pending[call]
        finally:
            self.pending.pop(call, None)
        if "error" in answer:
            raise RuntimeError(f"agentrl could not {op}: {answer['error']}")
        return answer.get("result")

    def answer(self, message: dict[str, Any]) -> None:
        waiting = self.pending.get(message["reply"])
        if waiting is not None and not waiting.done():
            waiting.set_result(message)


def container_class() -> type:
    """`AgentrlContainer`, defined once harbor is importable."""
    from harbor.environments.base import BaseEnvironment, ExecResult

    class AgentrlContainer(BaseEnvironment):
        """The episode's sandbox, as a Harbor environment: agentrl started it and removes it, so `start` and
        `stop` do nothing; every command and copy is done by agentrl on its sandbox."""

        def __init__(self, channel: Channel, verification: int, **kwargs: Any):
            self.channel, self.verification = channel, verification
            super().__init__(**kwargs)

        @staticmethod
        def type() -> str:
            return "agentrl"

        def _validate_definition(self) -> None:
            return None  # agentrl built the image from the task's environment/ already

        async def start(self, force_build: bool) -> None:
            return None

        async def stop(self, delete: bool) -> None:
            return None

        async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None) -> ExecResult:  # type: ignore[no-untyped-def]
            result = await self._ask(
                "exec", command=command, cwd=cwd, env=env, timeout_sec=timeout_sec, user=user
            )  # fmt: skip
            return ExecResult(stdout=result["stdout"], stderr=result["stderr"], return_code=result["return_code"])

        async def upload_file(self, source_path, target_path) -> None:  # type: ignore[no-untyped-def]
            await self._ask("upload_file", source=str(source_path), target=str(target_path))

        async def upload_dir(self, source_dir, target_dir) -> None:  # type: ignore[no-untyped-def]
            await self._ask("upload_dir", source=str(source_dir), target=str(target_dir))

        async def download_file(self, source_path, target_path) -> None:  # type: ignore[no-untyped-def]
            await self._ask("download_file", source=str(source_path), target=str(target_path))

        async def download_dir(self, source_dir, target_dir) -> None:  # type: ignore[no-untyped-def]
            await self._ask("download_dir", source=str(source_dir), target=str(target_dir))

        async def _ask(self, op: str, **args: Any) -> Any:
            return await self.channel.ask(self.verification, op, **args)

    return AgentrlContainer


class Server:
    """Runs verifications concurrently, each as Harbor's `Verifier.verify()` over an `AgentrlContainer`."""

    def __init__(self, out: TextIO):
        self.channel = Channel(out)
        self.container = container_class()
        self.running: dict[int, asyncio.Task[None]] = {}

    def handle(self, message: dict[str, Any]) -> None:
        if "reply" in message:
            self.channel.answer(message)
        elif message.get("op") == "verify":
            self.running[message["id"]] = asyncio.create_task(self.verify(message))
        elif message.get("op") == "cancel" and message["id"] in self.running:
            self.running[message["id"]].cancel()

    async def verify(self, request: dict[str, Any]) -> None:
        ident = request["id"]
        try:
            rewards = await self._verify(request)
        except asyncio.CancelledError:
            self.channel.send({"id": ident, "error": "cancelled"})
        except Exception as exc:  # Harbor's own complaint, passed on word for word
            self.channel.send({"id": ident, "error": f"{type(exc).__name__}: {exc}"})
        else:
            self.channel.send({"id": ident, "rewards": rewards})
        finally:
            self.running.pop(ident, None)

    async def _verify(self, request: dict[str, Any]) -> dict[str, Any]:
        from harbor.models.task.task import Task
        from harbor.models.trial.paths import TrialPaths
        from harbor.verifier.verifier import Verifier

        task = Task(request["task"])
        trial = TrialPaths(Path(request["trial_dir"]))
        trial.verifier_dir.mkdir(parents=True, exist_ok=True)
        environment = self.container(
            self.channel, request["id"], environment_dir=task.paths.environment_dir, environment_name=task.name,
            session_id=f"agentrl-{request['id']}", trial_paths=trial, task_env_config=task.config.environment,
        )  # fmt: skip
        result = await Verifier(task, trial, environment).verify()
        return dict(result.rewards or {})


async def serve(out: TextIO) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    server = Server(out)
    while line := await reader.readline():
        server.handle(json.loads(line))
    for task in list(server.running.values()):  # agentrl is gone: nobody would read the answers
        task.cancel()


def main() -> int:
    # The protocol owns the real stdout; anything Harbor prints goes to stderr, which agentrl keeps for errors.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    asyncio.run(serve(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GUIAgentLoop: one MiniWoB++ episode per trajectory in a real headless browser, the model acting in text.

Each turn the model reads the task instruction and a compact list of the page's elements (ids, kinds, text,
center positions), and, when its chat template takes images, the screenshot as an OpenAI `image_url` part. It
answers with one action (`click(3)`, `click(40, 120)`, `type("hi")`, `press("Enter")`, `scroll(0, 100)`,
`done()`); a reply that is not a valid action gets feedback naming the valid forms, not a crash.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from pathlib import Path
from typing import Any

from agentrl.config.schema import AgentRLConfig
from agentrl.errors import UserError
from agentrl.gui.actions import InvalidAction, parse_action
from agentrl.gui.browser import BrowserError, MiniWoBSession, Screen, browser_paths
from agentrl.gui.config import GUIConfig
from agentrl.gui.episode import GUIEpisode, observation_text, user_content
from agentrl.loops.base import AgentLoopBase
from agentrl.loops.conformance.case import LoopCheckCase
from agentrl.loops.context import AgentContext, StopLoop
from agentrl.types import Message, Sample, StopReason, Trajectory

logger = logging.getLogger("agentrl.gui")

_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


class GUIAgentLoop(AgentLoopBase):
    """Plays one MiniWoB++ task episode per trajectory (options: `agent.kwargs`, see `agentrl.gui.GUIConfig`).

    The row names its task and seed in `extra_info` (`{"task": "click-test", "seed": 3}`); without a task the
    loop takes `agent.kwargs.task`, else `env.id=miniwob/<task>-v1`. Browsers are opened per trajectory, at
    most `agent.kwargs.max_browsers` at once, and always closed when the trajectory ends.

    Stop reasons: `done` when the page ends the episode or the model says `done()`; `time_budget` when the page's
    own clock (`episode_time_s`) runs out; `tool_error_limit` after `max_invalid_actions` invalid replies in a
    row; `max_turns` and `context_overflow` from the budgets. The reward is MiniWoB's raw reward clipped to
    [0, 1] (`reward_details["env"]["resolved"]` says full success); `metrics` get `gui/success`, `gui/steps`,
    `gui/invalid_actions`; `metadata["gui"]` the task, seed, modality, actions and screenshots.
    """

    Options = GUIConfig

    @classmethod
    def problems(cls, cfg: AgentRLConfig) -> list[str]:
        """Chromium and chromedriver are here (else the command that installs them), checked before the run
        starts rather than when its first episode opens a page."""
        try:
            browser_paths()
        except BrowserError as exc:
            return [f"agent.name=gui_agent: {exc}"]
        return []

    @classmethod
    def check_case(cls) -> LoopCheckCase:
        """A MiniWoB page in headless Chromium: a recipe's task (`agentrl check loop=gui_agent recipe=gui_agent`) or
        the caller's (`check_loop(..., config={"agent": {"kwargs": {"task": ...}}})`), answered by a click."""
        return LoopCheckCase(reply="click(1)", needs=frozenset({"browser"}), lacks="a MiniWoB task")

    options: GUIConfig
    _announced = False

    async def run(self, sample: Sample, ctx: AgentContext) -> Trajectory:
        cfg = self.options
        task = self._task(sample, cfg)
        seed = sample.extra_info.get("seed")
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise UserError(f"row {sample.id or '?'}: extra_info.seed must be a whole number, not {seed!r}")
        episode = GUIEpisode(task, seed, self._modality(cfg, ctx.tokenizer), cfg.screenshots, self._shot_dir(cfg))
        ctx.trajectory.metadata["gui"] = {"task": task, "seed": seed, "modality": episode.modality}
        async with _browser_slot(cfg.max_browsers):
            session = await _open(task, cfg.episode_time_s)
            ctx.env = session
            try:
                screen = await asyncio.to_thread(session.reset, seed)
                shot = episode.keep_screenshot(screen, ctx.trajectory.id)
                text = observation_text(screen)
                ctx.start([*sample.prompt, Message(role="user", content=user_content(text, shot, episode.modality))])
                await self._play(ctx, session, episode)
            finally:
                episode.record(ctx.trajectory)
                await asyncio.to_thread(session.close)
                logger.info(
                    "gui %s seed=%s: %s (raw reward %g, %d steps, %d invalid)",
                    task,
                    seed,
                    "success" if episode.success else "failure",
                    episode.raw_reward,
                    episode.steps,
                    episode.invalid_actions,
                )
        return ctx.trajectory

    async def _play(self, ctx: AgentContext, session: MiniWoBSession, episode: GUIEpisode) -> None:
        max_invalid = self.options.max_invalid_actions
        while True:
            # a reply cut at rollout.max_tokens is still parsed (feedback when invalid), not the episode's end
            reply = (await ctx.generate(continue_if_cut=True)).text
            try:
                action = parse_action(reply, session.screen_size)
                if action.kind == "done":
                    episode.actions.append(action.source)
                    ctx.trajectory.stop_reason = StopReason.DONE
                    return
                screen = await asyncio.to_thread(session.act, action)
            except InvalidAction as exc:
                episode.invalid_actions += 1
                episode.invalid_in_a_row += 1
                if episode.invalid_in_a_row >= max_invalid:
                    raise StopLoop(
                        StopReason.TOOL_ERROR_LIMIT, f"{episode.invalid_in_a_row} invalid actions in a row"
                    ) from None
                ctx.add_messages([Message(role="user", content=f"Invalid action: {exc}")])
                continue
            episode.invalid_in_a_row = 0
            episode.steps += 1
            episode.actions.append(action.source)
            episode.observe(screen)
            if screen.done:
                timed_out = (screen.reason or "").startswith("timed out")
                ctx.trajectory.stop_reason = StopReason.TIME_BUDGET if timed_out else StopReason.DONE
                return
            shot = episode.keep_screenshot(screen, ctx.trajectory.id)
            text = observation_text(screen, header=f"You did {action.source}. The task is not finished yet.")
            ctx.add_messages([Message(role="user", content=user_content(text, shot, episode.modality))])

    def _task(self, sample: Sample, cfg: GUIConfig) -> str:
        task = sample.extra_info.get("task") or cfg.task
        env_id = (self.run_config.env.id if self.run_config is not None else None) or ""
        if not task and env_id.startswith("miniwob/"):
            task = env_id.removeprefix("miniwob/").removesuffix("-v1")
        if not task:
            raise UserError(
                f"row {sample.id or '?'} names no MiniWoB task: give extra_info.task (e.g. click-test), "
                "agent.kwargs.task, or env.id=miniwob/click-test-v1"
            )
        return str(task)

    def _modality(self, cfg: GUIConfig, tokenizer: Any) -> str:
        takes_images = "image" in str(getattr(tokenizer, "chat_template", "") or "")
        modality = cfg.modality if cfg.modality != "auto" else ("image" if takes_images else "text")
        if not type(self)._announced:
            type(self)._announced = True
            why = "its chat template takes images" if takes_images else "its chat template takes no images"
            logger.info(
                "gui_agent: %s modality (the model's %s); the element list is always sent, screenshots are %s",
                modality,
                why,
                "stored with each trajectory" if cfg.screenshots != "none" else "not stored",
            )
        return modality

    def _shot_dir(self, cfg: GUIConfig) -> Path | None:
        if cfg.screenshots != "files":
            return None
        out = self.run_config.output_dir if self.run_config is not None else None
        folder = cfg.screenshot_dir or (str(Path(out) / "screenshots") if out else None)
        if folder is None:
            raise UserError(
                "agent.kwargs.screenshots=files needs a folder: set agent.kwargs.screenshot_dir or output_dir, "
                "or use screenshots=inline"
            )
        return Path(folder)


def _browser_slot(limit: int) -> asyncio.Semaphore:
    """The semaphore bounding open browsers in this event loop."""
    loop = asyncio.get_running_loop()
    slot = _SLOTS.get(loop)
    if slot is None:
        slot = _SLOTS[loop] = asyncio.Semaphore(limit)
    return slot


async def _open(task: str, episode_time_s: float) -> MiniWoBSession:
    """Start a browser in a thread; one started for a trajectory cancelled meanwhile is closed, not leaked."""
    future = asyncio.ensure_future(asyncio.to_thread(MiniWoBSession, task, episode_time_s))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        future.add_done_callback(_close_when_started)
        raise


def _close_when_started(future: asyncio.Future[MiniWoBSession]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().close()


__all__ = ["GUIAgentLoop", "Screen"]

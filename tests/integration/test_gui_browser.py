"""The GUI agent in a real headless Chromium on MiniWoB++: a scripted policy (reading the element list the loop
sends) solves click-test, click-button and enter-text; invalid actions get feedback; screenshots are PNGs;
no browser process outlives the run."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import re
from pathlib import Path

import pytest

from agentrl.config import AgentConfig, AgentRLConfig, RolloutConfig
from agentrl.loops.drift import check_drift
from agentrl.loops.manager import RolloutManager
from agentrl.loops.testing import ScriptedPolicy
from agentrl.types import Sample, StopReason

pytestmark = pytest.mark.integration
pytest.importorskip("miniwob", reason="the GUI agent needs the miniwob package: pip install -e '.[gui]'")

BROWSER_NAMES = ("chromium", "chrome", "chromedriver", "chrome_crashpad")


def solver(seen_pids: set[int]):
    """A scripted policy reply: reads the latest task and element list from the conversation and acts."""

    def reply(conversation: str) -> str:
        seen_pids.update(browser_descendants())
        turn = conversation.rsplit("Task:", 1)[-1]
        task = turn.split("\n", 1)[0]
        elements = {int(i): (kind, text) for i, kind, text in re.findall(r"\[(\d+)\] (\w+) \"([^\"]*)\"", turn)}
        elements.update({int(i): (kind, "") for i, kind in re.findall(r"\[(\d+)\] (\w+) (?:focused )?at", turn)})
        wanted = re.search(r'Enter "(.+?)" into', task)
        if wanted:
            field = next(i for i, (kind, _) in elements.items() if kind == "input_text")
            typed = any(text == wanted.group(1) for kind, text in elements.values() if kind == "input_text")
            if not typed:
                return f'I will type it. type({field}, "{wanted.group(1)}")'
            return "click({})".format(next(i for i, (_, text) in elements.items() if text == "Submit"))
        label = re.search(r'Click on the "(.+?)" button', task)
        target = label.group(1) if label else "Click Me!"
        return "click({})".format(
            next(i for i, (kind, text) in elements.items() if kind == "button" and text == target)
        )

    return reply


def browser_descendants() -> set[int]:
    """Live (non-zombie) browser processes descended from this test process."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state != "Z":
            parents[int(entry.name)], names[int(entry.name)] = int(ppid), comm
    me, out = os.getpid(), set()
    for pid, comm in names.items():
        node = pid
        while node in parents and node not in (0, 1):
            node = parents[node]
            if node == me and comm.startswith(BROWSER_NAMES):
                out.add(pid)
                break
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def rollout(tokenizer, replies, samples, **kwargs):
    agent = AgentConfig(name="gui_agent", max_turns=6, max_total_tokens=4096, kwargs={"max_browsers": 2, **kwargs})
    manager = RolloutManager(
        ScriptedPolicy(tokenizer, replies),
        tokenizer,
        agent,
        RolloutConfig(n=1, max_tokens=64, max_model_len=4096),
        run_config=AgentRLConfig(agent=agent),
    )
    return asyncio.run(manager.run(samples))


def sample(task: str, seed: int = 7) -> Sample:
    return Sample(prompt=[], agent_name="gui_agent", extra_info={"task": task, "seed": seed}, id=f"{task}/{seed}")


def png_size(url: str) -> tuple[int, int]:
    from PIL import Image

    assert url.startswith("data:image/png;base64,")
    data = base64.b64decode(url.split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
        return image.size


def test_scripted_policy_solves_click_test_click_button_and_enter_text(default_tokenizer):
    pids: set[int] = set()
    trajs = rollout(
        default_tokenizer, [solver(pids)], [sample("click-test"), sample("click-button"), sample("enter-text")]
    )
    for traj in trajs:
        gui = traj.metadata["gui"]
        assert traj.error is None, traj.error
        assert gui["success"], (gui["task"], gui["actions"], gui["reason"], traj.messages)
        assert traj.stop_reason is StopReason.DONE and traj.reward == 1.0
        assert traj.reward_details["env"]["resolved"] is True and traj.metrics["gui/success"] == 1.0
        assert check_drift(default_tokenizer, traj).ok
        assert gui["modality"] == "text"  # SmolLM2's template takes no images: the element list only
        assert all(isinstance(m.content, str) for m in traj.messages)
        assert gui["screenshots"] and all(png_size(u) == (160, 210) for u in gui["screenshots"])
        assert "Elements ([id] kind text at (x,y)):" in traj.messages[0].content
    enter = trajs[2].metadata["gui"]
    assert enter["actions"][0].startswith("type(") and enter["actions"][1].startswith("click(")
    assert len(enter["screenshots"]) == 2  # the first page and the page after typing
    assert pids, "the scripted policy saw no browser processes while the episodes ran"
    assert not [p for p in pids if alive(p)], "browser processes outlived the run"
    assert not browser_descendants()


def test_invalid_actions_get_feedback_and_the_episode_goes_on(default_tokenizer):
    pids: set[int] = set()
    replies = ["I am not sure what to do.", "click(500, 5)", 'press("F13")', solver(pids)]
    (traj,) = rollout(default_tokenizer, replies, [sample("click-test")], max_invalid_actions=4)
    assert traj.error is None and traj.metadata["gui"]["success"], traj.stop_reason
    feedback = [m.content for m in traj.messages if m.role == "user"][1:]
    assert feedback[0].startswith("Invalid action: no action found in your reply; write one action per reply")
    assert "off the 160x210 screen" in feedback[1] and "unknown key 'F13'" in feedback[2]
    assert traj.metrics["gui/invalid_actions"] == 3.0 and traj.metrics["gui/steps"] == 1.0
    assert check_drift(default_tokenizer, traj).ok


def test_invalid_actions_in_a_row_end_the_episode_without_crashing(default_tokenizer):
    (traj,) = rollout(default_tokenizer, ["no idea"], [sample("click-button")], max_invalid_actions=2)
    assert traj.error is None
    assert traj.stop_reason is StopReason.TOOL_ERROR_LIMIT and traj.reward == 0.0
    assert traj.metadata["gui"]["success"] is False and traj.metrics["gui/invalid_actions"] == 2.0
    assert not browser_descendants()

"""The element list and observation text the GUI model reads, from MiniWoB's serialized DOM elements."""

import numpy as np
import pytest

from agentrl.errors import AgentRLError
from agentrl.gui.browser import Screen
from agentrl.gui.config import gui_config
from agentrl.gui.elements import extract_elements, format_elements
from agentrl.gui.episode import GUIEpisode, observation_text, user_content
from agentrl.types import Trajectory


def el(ref, tag, text="", left=0.0, top=0.0, width=10.0, height=10.0, value="", flags=(0, 0, 0, 1)):
    box = {k: np.array([v], dtype=np.float32) for k, v in dict(left=left, top=top, width=width, height=height).items()}
    return {"ref": ref, "tag": tag, "text": text, "value": value, "flags": np.array(flags, dtype=np.int8), **box}


DOM = [
    el(1, "body", left=0, width=780, height=210, flags=(0, 0, 0, 0)),
    el(2, "div", flags=(0, 0, 0, 0)),  # container without text: left out
    el(4, "button", "no", left=2, top=52, width=30.8, height=21),
    el(5, "input_text", left=32.8, top=52, width=117, height=21, value="Kasey", flags=(1, 1, 0, 1)),
    el(6, "div", "lorem ipsum", left=2, top=73, width=156, height=11),
    el(7, "input_checkbox", left=5, top=90, value="True"),
    el(8, "span", "", left=5, top=90),  # leaf without text: left out
]


def test_elements_keep_controls_and_text_with_centers():
    elements = extract_elements(DOM)
    assert [e.id for e in elements] == [4, 5, 6, 7]
    assert format_elements(elements).splitlines() == [
        '[4] button "no" at (17,62)',
        '[5] input_text "Kasey" focused at (91,62)',
        '[6] div "lorem ipsum" at (80,78)',
        "[7] input_checkbox checked at (10,95)",
    ]
    assert len(extract_elements(DOM, max_elements=2)) == 2
    assert format_elements([]) == "(no interactive elements)"


def test_observation_text_and_content_by_modality():
    screen = Screen(instruction='Click on the "no" button.', elements=extract_elements(DOM), png=b"\x89PNG")
    text = observation_text(screen, header="You did click(5).")
    assert text.startswith('You did click(5).\nTask: Click on the "no" button.\nElements')
    assert text.endswith("scroll(DX, DY) or done().")
    assert user_content(text, "data:image/png;base64,AA", "text") == text
    assert user_content(text, "data:image/png;base64,AA", "image") == [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
    ]


def test_episode_record_sets_reward_success_and_metadata():
    episode = GUIEpisode("click-button", 3, "text")
    assert episode.keep_screenshot(Screen("t", [], b"\x89PNG"), "tid").startswith("data:image/png;base64,")
    episode.steps = 1
    episode.observe(Screen("", [], b"", done=True, reward=1.0))
    traj = Trajectory()
    episode.record(traj)
    assert traj.reward == 1.0 and traj.reward_details["env"]["resolved"] is True
    assert traj.metrics == {"gui/success": 1.0, "gui/steps": 1.0, "gui/invalid_actions": 0.0}
    assert traj.metadata["gui"]["task"] == "click-button" and len(traj.metadata["gui"]["screenshots"]) == 1
    failed = GUIEpisode("click-button", 3, "text")
    failed.observe(Screen("", [], b"", done=True, reward=-1.0, reason="timed out"))
    assert failed.reward == 0.0 and not failed.success


def test_files_screenshots_are_written(tmp_path):
    episode = GUIEpisode("click-test", 0, "text", screenshot_mode="files", screenshot_dir=tmp_path)
    path = episode.keep_screenshot(Screen("t", [], b"\x89PNG"), "tid")
    assert path == str(tmp_path / "tid" / "000.png") and (tmp_path / "tid" / "000.png").read_bytes() == b"\x89PNG"


def test_bad_options_list_every_problem():
    assert gui_config({"max_browsers": 1}).max_browsers == 1
    with pytest.raises(AgentRLError) as err:
        gui_config({"max_browser": 1, "modality": "video"})
    assert "agent.kwargs.max_browser" in str(err.value) and "agent.kwargs.modality" in str(err.value)
    assert "options: task, episode_time_s, max_browsers" in str(err.value)

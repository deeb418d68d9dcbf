"""GUI agents on MiniWoB++ in a real headless Chromium: browser sessions, element lists, the action language.

The `gui_agent` loop (`agentrl.loops.gui.GUIAgentLoop`) plays one task episode per trajectory.
"""

from agentrl.gui.actions import ACTION_HELP, GUIAction, InvalidAction, parse_action
from agentrl.gui.browser import BrowserError, MiniWoBSession, Screen, browser_paths
from agentrl.gui.config import GUIConfig, gui_config
from agentrl.gui.elements import Element, extract_elements, format_elements
from agentrl.gui.tasks import task_samples

__all__ = [
    "ACTION_HELP",
    "BrowserError",
    "Element",
    "GUIAction",
    "GUIConfig",
    "InvalidAction",
    "MiniWoBSession",
    "Screen",
    "browser_paths",
    "extract_elements",
    "format_elements",
    "gui_config",
    "parse_action",
    "task_samples",
]

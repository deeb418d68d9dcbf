"""One MiniWoB++ task in a real headless Chromium: reset, act, observe, close.

`MiniWoBSession` wraps the `miniwob` package's gymnasium env (`miniwob/<task>-v1`), pointing selenium at Debian's
`chromium` and `chromedriver` (override with `MINIWOB_CHROME_BINARY` / `MINIWOB_CHROMEDRIVER`). The task pages
ship inside the package (file:// URLs, no network). Every session ever opened is closed at interpreter exit
too, so no browser outlives the process.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentrl.errors import InfrastructureError, UserError
from agentrl.gui.actions import GUIAction
from agentrl.gui.elements import Element, extract_elements

CHROME_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
DRIVER_CANDIDATES = ("/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver")

HEADLESS_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=500,320")
"""Chromium flags: new headless mode, no sandbox (containers, root), no GPU, /tmp instead of a small /dev/shm;
MiniWoB's own window size."""

_LIVE: weakref.WeakSet[MiniWoBSession] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


class BrowserError(InfrastructureError):
    """The browser could not be started or stopped responding."""


@dataclass
class Screen:
    """What the agent sees after a reset or an action.

    Attributes:
        instruction: the task's utterance ("Click on the 'no' button.").
        elements: the compact element list.
        png: the screenshot of the task area as PNG bytes (empty once the episode is over).
        done: the episode ended (success, failure or the page's own time limit).
        reward: MiniWoB's raw reward once done (1 success, -1 failure, partial credit in between), else 0.
        reason: why the page ended the episode ("timed out", ...), when it says.
    """

    instruction: str
    elements: list[Element]
    png: bytes
    done: bool = False
    reward: float = 0.0
    reason: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def browser_paths() -> tuple[str, str]:
    """The Chromium binary and chromedriver selenium will use.

    Raises:
        BrowserError: neither is found; the message says how to install or point at them.
    """
    chrome = os.environ.get("MINIWOB_CHROME_BINARY") or _first(CHROME_CANDIDATES, "chromium")
    driver = os.environ.get("MINIWOB_CHROMEDRIVER") or _first(DRIVER_CANDIDATES, "chromedriver")
    if not chrome or not driver:
        raise BrowserError(
            "the GUI agent needs Chromium and chromedriver: run scripts/setup.sh (apt-get install chromium "
            "chromium-driver), or set MINIWOB_CHROME_BINARY and MINIWOB_CHROMEDRIVER to their paths"
        )
    return chrome, driver


class MiniWoBSession:
    """A headless browser on one MiniWoB task. Not thread-safe: one caller at a time.

    Args:
        task: the MiniWoB task name, e.g. `click-test`, `enter-text` (`miniwob/<task>-v1` must be registered).
        episode_time_s: the page's own time limit of an episode (MiniWoB's default 10 s is too short for a
            model generating on CPU); the episode ends with reward -1 when it runs out.
    """

    def __init__(self, task: str, episode_time_s: float = 60.0):
        self.task = task
        self.episode_time_s = episode_time_s
        self._env: Any = None
        self._env = _make_env(task)
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._driver.execute_script(f"core.EPISODE_MAX_TIME = {int(episode_time_s * 1000)};")
        self.screen_size = (int(self._instance.task_width), int(self._instance.task_height))

    @property
    def _instance(self) -> Any:
        return self._env.unwrapped.instance

    @property
    def _driver(self) -> Any:
        return self._instance.driver

    @property
    def pids(self) -> list[int]:
        """Process ids of chromedriver (the browser processes are its children)."""
        process = getattr(getattr(self._driver, "service", None), "process", None)
        return [process.pid] if process is not None else []

    def reset(self, seed: int | None) -> Screen:
        """Start a new episode of the task, generated from `seed`."""
        obs, info = self._env.reset(seed=seed)
        return self._screen(obs, False, 0.0, info)

    def act(self, action: GUIAction) -> Screen:
        """Perform `action` (not `done`) and observe the page."""
        if action.kind == "scroll":
            self._scroll(action.x, action.y)
            obs, reward, terminated, _, info = self._env.step(self._miniwob_action("NONE"))
        else:
            obs, reward, terminated, _, info = self._env.step(self._to_miniwob(action))
        return self._screen(obs, bool(terminated), float(info.get("raw_reward", reward) or 0.0), info)

    def close(self) -> None:
        """Quit the browser and chromedriver (idempotent)."""
        env, self._env = self._env, None
        if env is not None:
            env.close()
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def __enter__(self) -> MiniWoBSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals -------------------------------------------------------------------------------------------

    def _screen(self, obs: dict[str, Any], done: bool, reward: float, info: dict[str, Any]) -> Screen:
        return Screen(
            instruction=str(obs.get("utterance") or ""),
            elements=extract_elements(obs.get("dom_elements") or ()),
            png=b"" if done else _png(obs["screenshot"]),
            done=done,
            reward=reward if done else 0.0,
            reason=str(info["reason"]) if info.get("reason") is not None else None,
            info={k: v for k, v in info.items() if k in ("done", "env_reward", "raw_reward", "reason", "elapsed")},
        )

    def _to_miniwob(self, action: GUIAction) -> dict[str, Any]:
        import numpy as np

        if action.kind == "click_element":
            return self._miniwob_action("CLICK_ELEMENT", ref=action.element)
        if action.kind == "click_xy":
            return self._miniwob_action("CLICK_COORDS", coords=np.array([action.x, action.y], dtype=np.float32))
        if action.kind == "type" and action.element is not None:
            return self._miniwob_action("FOCUS_ELEMENT_AND_TYPE_TEXT", ref=action.element, text=action.text)
        if action.kind == "type":
            return self._miniwob_action("TYPE_TEXT", text=action.text)
        if action.kind == "press":
            keys = list(self._env.unwrapped.action_space_config.allowed_keys)
            if action.text not in keys:
                from agentrl.gui.actions import InvalidAction

                raise InvalidAction(f"{action.source}: this page does not accept the key {action.text!r}")
            return self._miniwob_action("PRESS_KEY", key=keys.index(action.text))
        raise ValueError(f"{action.kind} is not a browser action")

    def _miniwob_action(self, kind: str, **fields: Any) -> dict[str, Any]:
        return self._env.unwrapped.create_action(kind, **fields)

    def _scroll(self, dx: float, dy: float) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.actions.wheel_input import ScrollOrigin

        width, height = self.screen_size
        origin = ScrollOrigin.from_viewport(width // 2, height // 2)
        ActionChains(self._driver).scroll_from_origin(origin, int(dx), int(dy)).perform()


def _make_env(task: str) -> Any:
    """A MiniWoB env on `task` whose browser is started with options that work headless in containers."""
    import miniwob
    from miniwob.environment import MiniWoBEnvironment
    from miniwob.selenium_instance import SeleniumInstance

    html = Path(miniwob.__file__).parent / "html" / "miniwob"
    if not (html / f"{task}.html").is_file():
        known = sorted(p.stem for p in html.glob("*.html"))
        raise UserError(f"unknown MiniWoB task {task!r}; tasks include: {', '.join(known[:40])}, ...")
    chrome, driver = browser_paths()

    class Instance(SeleniumInstance):  # type: ignore[misc]
        def create_driver(self) -> None:
            self.driver = _start_chrome(chrome, driver, self.url)
            self.inner_width, self.inner_height = self.driver.execute_script(
                "return [window.innerWidth, window.innerHeight];"
            )

    class Env(MiniWoBEnvironment):  # type: ignore[misc]
        def _hard_reset_instance(self) -> None:
            if getattr(self, "instance", None):
                self.instance.close()
            self.instance = Instance(index=0, **self.instance_kwargs)
            self.instance.start()

    return Env(subdomain=task)


def _start_chrome(chrome: str, driver: str, url: str, attempts: int = 3) -> Any:
    """Chromium under chromedriver on `url`, retried: a loaded machine sometimes loses a fresh browser's start."""
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for arg in HEADLESS_ARGS:
        options.add_argument(arg)
    for attempt in range(attempts):
        try:
            browser = webdriver.Chrome(service=Service(driver), options=options)
        except WebDriverException as exc:
            if attempt == attempts - 1:
                raise BrowserError(
                    f"could not start headless Chromium ({type(exc).__name__}: {exc.msg}) after {attempts} tries; "
                    f"check that {chrome} and {driver} are the same Chromium version (apt-get install chromium "
                    "chromium-driver) and that the machine has memory to spare"
                ) from None
            time.sleep(1.0 + attempt)
            continue
        try:
            browser.implicitly_wait(5)
            browser.get(url)
            WebDriverWait(browser, 30).until(expected_conditions.element_to_be_clickable((By.ID, "sync-task-cover")))
            return browser
        except Exception:
            browser.quit()
            raise
    raise AssertionError("unreachable")


def _png(pixels: Any) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _first(paths: tuple[str, ...], name: str) -> str | None:
    return next((p for p in paths if os.path.exists(p)), None) or shutil.which(name)


@atexit.register
def _close_all() -> None:
    """Close every session still open when the interpreter exits (Ctrl-C, a crashed run)."""
    with _LIVE_LOCK:
        sessions = list(_LIVE)
    for session in sessions:
        with contextlib.suppress(Exception):
            session.close()

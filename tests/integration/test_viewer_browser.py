"""The generated viewer in real headless Chromium (Debian's chromium + chromium-driver), driven by selenium.

The run is the known sample run of `agentrl.viewer.testing`, tokenized with the real default model's tokenizer
(named by the run's config.yaml, so the page decodes token texts the way `agentrl view` does on a real run).
"""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from agentrl.viewer import build_viewer, make_server
from agentrl.viewer.testing import (
    DETAIL_LOG,
    FINAL_ANSWER,
    TOOL_OUTPUT,
    tree_leaves,
    windowed_trajectory,
    write_sample_run,
)

pytestmark = pytest.mark.integration

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: not skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        _unavailable(
            "chromium / chromedriver not found: run scripts/setup.sh (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def sample(tmp_path_factory, default_tokenizer):
    run = write_sample_run(tmp_path_factory.mktemp("viewer") / "run", default_tokenizer)
    (run.path / "config.yaml").write_text("model: default\n")
    return run, build_viewer(run.path)


def open_page(browser, url: str, traj_id: str | None = None):
    browser.get(url + (f"#t={traj_id}" if traj_id else ""))
    selector = f'article.trajectory[data-traj-id="{traj_id}"]' if traj_id else "article.trajectory"
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, selector))
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors


def shown_ids(browser) -> set[str]:
    return {row.get_attribute("data-traj-id") for row in browser.find_elements(By.CSS_SELECTOR, ".traj-row")}


def texts(browser, selector: str) -> list[str]:
    # textContent, not .text: tokens scrolled out of view or in closed <details> still count
    return [e.get_attribute("textContent") for e in browser.find_elements(By.CSS_SELECTOR, selector)]


def test_known_trajectory_turns_tool_output_and_rewards(browser, sample):
    _, page = sample
    open_page(browser, page.as_uri(), "known-traj")
    messages = browser.find_elements(By.CSS_SELECTOR, "#conversation .msg")
    assert [m.get_attribute("class") for m in messages] == [
        "msg msg-system",
        "msg msg-user",
        "msg msg-assistant",
        "msg msg-tool",
        "msg msg-assistant",
    ]
    call = browser.find_element(By.CSS_SELECTOR, '.msg-assistant .tool-call[data-tool="add"]')
    assert "→ add" in call.text and '"a": 2' in call.text
    assert texts(browser, ".msg-tool .msg-text") == [TOOL_OUTPUT]
    assert "add · call call-1" in browser.find_element(By.CSS_SELECTOR, ".msg-tool .msg-head").text
    assert texts(browser, ".msg-assistant .msg-text")[-1] == FINAL_ANSWER

    rows = browser.find_elements(By.CSS_SELECTOR, "#reward-components tr[data-component]")
    scores = {r.get_attribute("data-component"): r.find_elements(By.TAG_NAME, "td")[1].text for r in rows}
    assert scores == {"exact_match": "1", "format_ok": "0.500", "judge": "failed / skipped"}
    # multi-line detail texts (a verifier's test output) are shown as they are, not as one JSON line
    detail = '#reward-components tr[data-component="exact_match"]'
    assert texts(browser, f'{detail} .detail-text[data-detail="log"] pre') == [DETAIL_LOG]
    assert "log" not in texts(browser, f"{detail} details > pre")[0]
    assert browser.find_element(By.ID, "reward-total").text == "1"
    assert browser.find_element(By.ID, "stop-reason").text == "done"
    assert browser.find_elements(By.CSS_SELECTOR, ".drift-warning") == []


def test_tokens_are_highlighted_by_trainable_mask_and_logprob(browser, sample, default_tokenizer):
    run, page = sample
    open_page(browser, page.as_uri(), "known-traj")
    segments = run.known.segments
    trainable = "".join(default_tokenizer.decode(s.token_ids) for s in segments if s.trainable)
    context = "".join(default_tokenizer.decode(s.token_ids) for s in segments if not s.trainable)
    assert len(texts(browser, "#token-view .tok")) == run.known.num_tokens
    assert "".join(texts(browser, ".tok.trainable")).replace("↵", "") == trainable
    assert "".join(texts(browser, ".tok.context")).replace("↵", "") == context
    assert FINAL_ANSWER in trainable and TOOL_OUTPUT in context

    def background(selector: str) -> str:
        return browser.find_element(By.CSS_SELECTOR, selector).value_of_css_property("background-color")

    assert background(".tok.trainable") != background(".tok.context")
    assert "rgba(0, 0, 0, 0)" not in (background(".tok.trainable"), background(".tok.context"))

    Select(browser.find_element(By.ID, "color-by")).select_by_value("logprob")
    token = browser.find_element(By.CSS_SELECTOR, ".tok.trainable")
    assert token.get_attribute("data-logprob") == "-0.25"
    assert "logprob -0.2500" in token.get_attribute("title")
    assert token.get_attribute("style").startswith("background: rgb(")  # hsl set inline, computed as rgb
    Select(browser.find_element(By.ID, "color-by")).select_by_value("mask")


def test_drift_warning_and_screenshots(browser, sample):
    _, page = sample
    open_page(browser, page.as_uri(), "drifted-traj")
    warning = browser.find_element(By.CSS_SELECTOR, ".drift-warning").text
    assert "template drift at token 12" in warning
    for traj_id in ("echo-0", "echo-1"):  # a data URL, and a file relative to the run directory
        browser.find_element(By.CSS_SELECTOR, f'.traj-row[data-traj-id="{traj_id}"]').click()
        image = browser.find_element(By.CSS_SELECTOR, ".msg-user img")
        assert image.get_attribute("src").startswith("data:image/png;base64,")
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth", image) == 1


def test_filters_change_what_is_shown(browser, sample):
    _, page = sample
    open_page(browser, page.as_uri())
    everything = {"known-traj", "drifted-traj", "echo-0", "echo-1"}
    assert shown_ids(browser) == everything
    reset = browser.find_element(By.ID, "filter-reset")

    browser.find_element(By.ID, "filter-reward-min").send_keys("0.4")
    assert shown_ids(browser) == {"known-traj", "echo-0"}
    assert browser.find_element(By.ID, "shown-count").text == "2 of 4 trajectories shown"
    browser.find_element(By.ID, "filter-reward-max").send_keys("0.9")
    assert shown_ids(browser) == {"echo-0"}
    reset.click()
    assert shown_ids(browser) == everything

    browser.find_element(By.CSS_SELECTOR, '#filter-stop input[value="max_tokens"]').click()
    assert shown_ids(browser) == {"known-traj", "drifted-traj"}
    reset.click()

    Select(browser.find_element(By.ID, "filter-agent")).select_by_value("single_turn")
    assert shown_ids(browser) == {"echo-0", "echo-1"}
    reset.click()

    browser.find_element(By.ID, "filter-task").send_keys("task-add")
    assert shown_ids(browser) == {"known-traj", "drifted-traj"}
    browser.find_element(By.ID, "filter-drift").click()
    assert shown_ids(browser) == {"drifted-traj"}
    reset.click()
    assert shown_ids(browser) == everything


def test_served_page_works_like_the_file(browser, sample):
    _, page = sample
    server = make_server(page, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        open_page(browser, f"http://127.0.0.1:{server.server_address[1]}/index.html", "known-traj")
        assert len(shown_ids(browser)) == 4
        assert texts(browser, ".msg-tool .msg-text") == [TOOL_OUTPUT]
    finally:
        server.shutdown()
        server.server_close()


def test_windowed_trajectory_shows_each_step_sample_in_order(browser, tmp_path):
    windowed = windowed_trajectory(["LEFT", "DOWN", "UP"])
    compacted = {"turn": 2, "strategy": "window", "tokens_before": 900, "tokens_after": 300, "step_sample": 2}
    windowed.metadata["context"] = {"compactions": [compacted]}  # agent.context's record of the last rewrite
    (tmp_path / "trajectories.jsonl").write_text(windowed.to_json() + "\n")
    open_page(browser, build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None).as_uri(), "windowed")

    body = ".msg-assistant .msg-body"
    replies = texts(browser, f".step-sample {body}") + texts(browser, f"#conversation {body}")
    assert [r.strip().split()[-1] for r in replies] == ["LEFT", "DOWN", "UP"]
    headings = texts(browser, "article.trajectory h3")
    assert "Step sample 1 of 3: conversation (2 messages)" in headings
    assert "Step sample 3 of 3: conversation (2 messages)" in headings
    assert len(texts(browser, "#token-view-2 .tok")) == 5  # the second sample's prompt and reply
    assert texts(browser, ".compaction-note") == ["Context compacted by window after turn 2: 900 → 300 tokens"]


def test_replies_show_their_policy_and_rewards_each_policys(browser, tmp_path):
    roles = windowed_trajectory(["apple", "apple"], policies=["describer", "guesser"])
    (tmp_path / "trajectories.jsonl").write_text(roles.to_json() + "\n")
    open_page(browser, build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None).as_uri(), "windowed")

    heads = texts(browser, ".msg-assistant .msg-head")
    assert [h.strip() for h in heads] == ["assistant · policy describer", "assistant · policy guesser"]
    rows = texts(browser, "#reward-components tr[data-policy]")
    assert [r.replace(" ", "") for r in rows] == ["policydescriber0", "policyguesser1"]


def test_a_tree_rollout_is_drawn_as_a_tree(browser, tmp_path):
    (tmp_path / "trajectories.jsonl").write_text("".join(t.to_json() + "\n" for t in tree_leaves()))
    open_page(browser, build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None).as_uri(), "leaf-10")

    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree-view .tree-node")
    assert [n.get_attribute("data-path") for n in nodes] == ["", "0", "0.0", "0.1", "1", "1.0", "1.1"]
    heads = {n.get_attribute("data-path"): n.find_element(By.CSS_SELECTOR, ".node-head").text for n in nodes}
    assert "root · turn 1 · V=0.25 · A=0" in heads[""]
    assert "branch 0 · turn 2 · V=0.50 · A=0.87" in heads["0"] and "A=1.50" in heads["0.0"]
    siblings = [n for n in nodes if n.get_attribute("data-path") in ("0", "1")]
    assert siblings[0].rect["y"] == siblings[1].rect["y"] and siblings[0].rect["x"] < siblings[1].rect["x"]
    (current,) = browser.find_elements(By.CSS_SELECTOR, "#tree-view .tree-node.current")
    assert current.get_attribute("data-path") == "1.0"
    assert texts(browser, '.traj-row[data-traj-id="leaf-10"] .tree-path') == ["tree 1·0"]
    browser.find_element(By.CSS_SELECTOR, '#tree-view .tree-node[data-path="0.0"] .tree-leaf').click()
    WebDriverWait(browser, 5).until(lambda d: d.find_elements(By.CSS_SELECTOR, 'article[data-traj-id="leaf-00"]'))

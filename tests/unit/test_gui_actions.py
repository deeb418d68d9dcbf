"""The GUI action language: every valid form parses to its action; invalid replies raise feedback naming the fix."""

import pytest

from agentrl.gui.actions import GUIAction, InvalidAction, parse_action


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("click(4)", GUIAction("click_element", element=4, source="click(4)")),
        ("I'll press it: Click( 12 )", GUIAction("click_element", element=12, source="Click( 12 )")),
        ("click(40, 120.5)", GUIAction("click_xy", x=40.0, y=120.5, source="click(40, 120.5)")),
        ('type("hello, (world)")', GUIAction("type", text="hello, (world)", source='type("hello, (world)")')),
        ('type(5, "Kasey")', GUIAction("type", element=5, text="Kasey", source='type(5, "Kasey")')),
        ("type(hello world)", GUIAction("type", text="hello world", source="type(hello world)")),
        ('press("Enter")', GUIAction("press", text="<Enter>", source='press("Enter")')),
        ("press(<Tab>)", GUIAction("press", text="<Tab>", source="press(<Tab>)")),
        ('press("a")', GUIAction("press", text="a", source='press("a")')),
        ("scroll(0, -100)", GUIAction("scroll", x=0.0, y=-100.0, source="scroll(0, -100)")),
        ("All set. done()", GUIAction("done", source="done()")),
    ],
)
def test_valid_actions_parse(reply, expected):
    assert parse_action(reply) == expected


def test_the_first_action_of_a_reply_is_taken():
    assert parse_action("click(3) then click(5)").element == 3


@pytest.mark.parametrize(
    ("reply", "feedback"),
    [
        ("I would click the button", "no action found in your reply; write one action per reply"),
        ("click(3", "the call is not closed with ')'"),
        ("click()", "click takes an element id, click(3), or a point, click(40, 120)"),
        ('click("Submit")', "click takes an element id"),
        ("click(400, 5)", "(400, 5) is off the 160x210 screen"),
        ("type()", 'type takes the text, type("hello")'),
        ('press("F13")', "unknown key 'F13'; keys: "),
        ("press(1, 2)", 'press takes one key name, e.g. press("Enter")'),
        ("scroll(down)", "arguments must be numbers or quoted text"),
        ("scroll(5)", "scroll takes two numbers of pixels"),
        ("done(now)", "done() takes no arguments"),
    ],
)
def test_invalid_replies_raise_feedback(reply, feedback):
    with pytest.raises(InvalidAction) as err:
        parse_action(reply)
    assert feedback in str(err.value)


def test_the_screen_size_bounds_clicks():
    assert parse_action("click(300, 500)", screen=(375, 667)).kind == "click_xy"


def test_a_gui_run_without_chromium_is_refused_at_start_with_the_command_that_installs_it(monkeypatch):
    from agentrl.config import load_config
    from agentrl.loops.gui import GUIAgentLoop

    monkeypatch.setattr("agentrl.gui.browser._first", lambda candidates, name: None)
    monkeypatch.delenv("MINIWOB_CHROME_BINARY", raising=False)
    (problem,) = GUIAgentLoop.problems(load_config(overrides=["recipe=gui_agent"]))
    assert "needs Chromium and chromedriver: run scripts/setup.sh" in problem

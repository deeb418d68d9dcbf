"""Action codecs per space type and observation formatting."""

import numpy as np
import pytest
from gymnasium import spaces

from agentrl.envs import InvalidAction, codec_for, format_observation, strip_ansi
from agentrl.errors import AgentRLError

DIRECTIONS = ["LEFT", "DOWN", "RIGHT", "UP"]


@pytest.mark.parametrize(
    ("reply", "action"),
    [("LEFT", 0), ("down", 1), (" Right. ", 2), ("**UP**", 3), ("I move RIGHT.", 2), ("2", 2), ("up!", 3)],
)
def test_discrete_names_parse(reply, action):
    assert codec_for(spaces.Discrete(4), DIRECTIONS).parse(reply) == action


@pytest.mark.parametrize(
    ("reply", "why"),
    [("LEFT or RIGHT", "names several actions"), ("jump", "names no action"), ("UPWARD", "names no action")],
)
def test_discrete_names_reject_with_the_valid_form(reply, why):
    with pytest.raises(InvalidAction, match=f"{why}. Reply with one of LEFT, DOWN, RIGHT, UP."):
        codec_for(spaces.Discrete(4), DIRECTIONS).parse(reply)


def test_discrete_indices_honour_start():
    codec = codec_for(spaces.Discrete(3, start=-1))
    assert codec.parse("-1") == -1 and codec.parse("action 1") == 1 and codec.format(np.int64(0)) == "0"
    for bad in ("2", "one", "0 1"):
        with pytest.raises(InvalidAction, match="a whole number from -1 to 1"):
            codec.parse(bad)


def test_discrete_names_must_fit_the_space():
    with pytest.raises(AgentRLError, match="3 action names given for a Discrete\\(4\\) space"):
        codec_for(spaces.Discrete(4), ["a", "b", "c"])
    with pytest.raises(AgentRLError, match="repeat"):
        codec_for(spaces.Discrete(2), ["go", "GO"])


def test_text_space():
    codec = codec_for(spaces.Text(max_length=5, min_length=1, charset="abc"))
    assert codec.parse("  abca \n") == "abca"
    with pytest.raises(InvalidAction, match="characters not allowed: 'xz'"):
        codec.parse("abxz")
    with pytest.raises(InvalidAction, match="1 to 5 characters"):
        codec.parse("abcabc")


def test_multi_discrete_and_multi_binary():
    codec = codec_for(spaces.MultiDiscrete([3, 2], start=[1, 0]))
    np.testing.assert_array_equal(codec.parse("[3, 1]"), [3, 1])
    assert "2 whole numbers separated by spaces, in the ranges 1..3, 0..1" in codec.describe()
    with pytest.raises(InvalidAction, match="out of range"):
        codec.parse("0 1")
    with pytest.raises(InvalidAction, match="expected 2 whole numbers"):
        codec.parse("1 1 1")
    binary = codec_for(spaces.MultiBinary(3))
    np.testing.assert_array_equal(binary.parse("1 0 1"), [1, 0, 1])
    assert binary.format(np.array([0, 1, 1], dtype=np.int8)) == "0 1 1"


def test_box_numbers_are_checked_against_bounds_and_shape():
    space = spaces.Box(low=np.array([-1, 0], np.float32), high=np.array([1, 10], np.float32), dtype=np.float32)
    codec = codec_for(space)
    action = codec.parse("move by -0.5, 2.5e0")
    assert action.dtype == np.float32 and space.contains(action)
    np.testing.assert_array_equal(action, [-0.5, 2.5])
    assert "2 numbers separated by spaces, in the ranges -1..1, 0..10" in codec.describe()
    with pytest.raises(InvalidAction, match="out of bounds"):
        codec.parse("2 5")
    with pytest.raises(InvalidAction, match="expected 2 numbers"):
        codec.parse("0.5")
    with pytest.raises(InvalidAction, match="finite"):
        codec.parse("nan 1")


def test_box_format_round_trips_float32_exactly():
    space = spaces.Box(-1, 1, shape=(2, 2), dtype=np.float32)
    space.seed(0)
    codec = codec_for(space)
    for _ in range(20):
        action = space.sample()
        np.testing.assert_array_equal(codec.parse(codec.format(action)), action)


def test_unsupported_action_space_says_how_to_adapt():
    with pytest.raises(AgentRLError, match="env.adapter=pkg.module:MyAdapter"):
        codec_for(spaces.Tuple([spaces.Discrete(2), spaces.Discrete(2)]))
    with pytest.raises(AgentRLError, match="only supported for Discrete"):
        codec_for(spaces.Box(0, 1, shape=(1,)), ["x"])


def test_format_observation_per_space():
    assert format_observation(spaces.Discrete(5), np.int64(3)) == "3"
    assert format_observation(spaces.Box(0, 1, shape=(3,)), np.array([0.12345, 1.0, 0.5])) == "[0.123 1 0.5]"
    assert format_observation(spaces.Box(0, 9, shape=(2, 2), dtype=np.int64), np.array([[1, 2], [3, 4]])) == (
        "[[1 2] [3 4]]"
    )
    blackjack = spaces.Tuple((spaces.Discrete(32), spaces.Discrete(11), spaces.Discrete(2)))
    assert format_observation(blackjack, (14, 10, 0)) == "(14, 10, 0)"
    nested = spaces.Dict({"pos": spaces.MultiDiscrete([3, 3]), "note": spaces.Text(8)})
    assert format_observation(nested, {"pos": np.array([1, 2]), "note": "hi"}) == "note: hi\npos: [1 2]"


def test_strip_ansi_removes_colours_and_blank_edges():
    assert strip_ansi("\n\x1b[41mS\x1b[0mFFF  \nFHFH\n\n") == "SFFF\nFHFH"

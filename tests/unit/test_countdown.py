"""`Countdown`: one deadline for the steps of an operation, each step getting what the earlier ones left."""

from __future__ import annotations

import pytest

from agentrl.deadline import Countdown


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_each_step_gets_what_the_earlier_steps_left_and_none_once_it_is_spent():
    clock = Clock()
    countdown = Countdown(10.0, "the update", clock=clock)
    assert countdown.left("pause") == 10.0
    clock.now += 4.0
    assert countdown.left("reload") == 6.0
    clock.now += 6.0
    with pytest.raises(TimeoutError, match=r"the update took longer than its deadline of 10 s \(before reset\)"):
        countdown.left("reset")


def test_a_step_that_must_be_tried_anyway_gets_its_minimum_past_the_deadline():
    clock = Clock()
    countdown = Countdown(5.0, "the update", clock=clock)
    assert countdown.left_at_least(2.0) == 5.0
    clock.now += 20.0
    assert countdown.left_at_least(2.0) == 2.0

from agentrl.loops.builder import TrajectoryBuilder
from agentrl.loops.drift import check_drift
from agentrl.types import Message, Segment, Trajectory


def user(text):
    return Message(role="user", content=text)


def eos(tok):
    return tok.eos_token_id


def test_prompt_generation_and_tool_suffix_are_exact(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("hi")])
    gen = [*tokenizer.encode("call it", add_special_tokens=False), eos(tokenizer)]
    content = b.add_generation(gen, [-0.1] * len(gen), policy_version=1)
    assert content == "call it"
    suffix = b.add_messages([Message(role="tool", content="42")])
    # the newline after <|im_end|> belongs to the template, not the model: it starts the non-trainable suffix
    assert tokenizer.decode(suffix) == "\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    assert [s.trainable for s in traj.segments] == [False, True, False]
    assert traj.segments[1].token_ids == gen
    assert check_drift(tokenizer, traj).ok


def test_turn_cut_without_end_token_gets_template_end_in_suffix(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("hi")])
    b.add_generation(tokenizer.encode("partial", add_special_tokens=False), None, None)
    suffix = b.add_messages([user("go on")])
    assert tokenizer.decode(suffix).startswith("<|im_end|>\n<|im_start|>user\ngo on")
    assert check_drift(tokenizer, traj).ok


def test_messages_added_twice_in_a_row_follow_the_rendering_not_an_empty_assistant_turn(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("hi")])
    b.add_generation([*tokenizer.encode("call it", add_special_tokens=False), eos(tokenizer)], None, None)
    b.add_messages([Message(role="tool", content="42")])  # ready for a reply that never comes
    b.add_messages([user("Summarize.")])
    text = tokenizer.decode(traj.token_ids)
    summary_asked = "<|im_start|>user\nSummarize.<|im_end|>\n<|im_start|>assistant\n"
    assert text.endswith("<|im_start|>tool\n42<|im_end|>\n" + summary_asked)
    assert "<|im_start|>assistant\n<|im_start|>" not in text and check_drift(tokenizer, traj).ok
    prompt = traj.segments[0].token_ids
    b2 = TrajectoryBuilder(tokenizer, later := Trajectory())
    b2.start([user("hi")])
    b2.add_messages([user("more")])  # the first prompt's own generation prompt is taken off too
    kept = later.segments[0].token_ids
    assert kept == prompt[: len(kept)] and len(kept) < len(prompt) and check_drift(tokenizer, later).ok


def test_generated_tokens_never_retokenized(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("x")])
    weird = [*tokenizer.encode("ab", add_special_tokens=False), eos(tokenizer)]
    b.add_generation(weird, None, None)
    b.add_messages([user("y")])
    assert traj.segments[1].token_ids == weird


def test_drift_reported_at_first_difference(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("hello")])
    b.add_generation([*tokenizer.encode("ok", add_special_tokens=False), eos(tokenizer)], None, None)
    traj.messages[-1] = Message(role="assistant", content="no")  # messages no longer match the tokens
    report = check_drift(tokenizer, traj)
    assert not report.ok and report.kind == "template"
    prompt_len = len(traj.segments[0].token_ids)
    assert report.position == prompt_len
    assert "no" in report.expected and "ok" in report.actual


def test_extra_tokens_beyond_rendering_are_drift(tokenizer):
    traj = Trajectory()
    b = TrajectoryBuilder(tokenizer, traj)
    b.start([user("a")])
    b.add_generation([*tokenizer.encode("b", add_special_tokens=False), eos(tokenizer)], None, None)
    traj.append(Segment(token_ids=[5, 6, 7, 8], trainable=False, role="tool"))  # tokens with no message
    report = check_drift(tokenizer, traj)
    assert not report.ok and report.position == len(traj.token_ids) - 4

import gzip
import json
import re
import threading
from pathlib import Path

import httpx
import pytest

from agentrl.cli import main
from agentrl.errors import AgentRLError
from agentrl.types import Message, Segment, StopReason, Trajectory
from agentrl.viewer import build_viewer, make_server
from agentrl.viewer.messages import MAX_INLINE_IMAGE_BYTES, message_view
from agentrl.viewer.page import DATA_ELEMENT_ID, embed_json
from agentrl.viewer.payload import drift_of
from agentrl.viewer.runs import load_runs
from agentrl.viewer.testing import PIXEL_PNG, TOOL_OUTPUT, tree_leaves, windowed_trajectory, write_sample_run
from agentrl.viewer.tokens import tokenizer_fits


def page_data(page: Path) -> dict:
    """The JSON the page inlines, read back as the browser would."""
    html = page.read_text()
    match = re.search(rf'<script type="application/json" id="{DATA_ELEMENT_ID}">(.*?)</script>', html, re.DOTALL)
    assert match, "no inlined data in the page"
    return json.loads(match.group(1))


@pytest.fixture
def sample_run(tmp_path, tokenizer):
    return write_sample_run(tmp_path / "run", tokenizer)


def test_training_run_layout_becomes_steps_and_groups(sample_run, tokenizer):
    data = page_data(build_viewer(sample_run.path, tokenizer=tokenizer))
    (run,) = data["runs"]
    assert [s["name"] for s in run["steps"]] == ["step 1", "step 2"]
    assert [[g["id"] for g in s["groups"]] for s in run["steps"]] == [["group-add"], ["group-echo"]]
    assert [t["id"] for t in data["trajs"]] == ["known-traj", "drifted-traj", "echo-0", "echo-1"]
    assert run["steps"][0]["metrics"] == {
        "rollout/reward_mean": 0.5,
        "train/loss": 0.25,
        "perf/rollout_s": 2.0,
        "perf/train_s": 1.0,
    }


def test_known_trajectory_carries_messages_rewards_and_tokens(sample_run, tokenizer):
    data = page_data(build_viewer(sample_run.path, tokenizer=tokenizer))
    known = data["trajs"][0]
    assert (known["reward"], known["stop"], known["agent"], known["sample_id"]) == (
        1.0,
        "done",
        "tool_agent",
        "task-add",
    )
    assert known["components"] == {"exact_match": 1.0, "format_ok": 0.5}
    assert known["details"]["judge"] == {"error": "judge timed out"}
    assert [m["role"] for m in known["messages"]] == ["system", "user", "assistant", "tool", "assistant"]
    call = known["messages"][2]["parts"]
    assert call == [
        {
            "type": "tool_call",
            "name": "add",
            "arguments": '{\n  "a": 2,\n  "b": 3\n}',
            "raw": '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>',
        }
    ]
    assert known["messages"][3] == {
        "role": "tool",
        "parts": [{"type": "text", "text": TOOL_OUTPUT}],
        "name": "add",
        "tool_call_id": "call-1",
    }
    segments = known["segments"]
    assert [s["trainable"] for s in segments] == [False, True, False, True]
    for seg, original in zip(segments, sample_run.known.segments, strict=True):
        assert seg["ids"] == original.token_ids
        assert "".join(seg["text"]) == tokenizer.decode(original.token_ids)
    assert segments[1]["lp"] == [-0.25] * len(segments[1]["ids"])
    assert "lp" not in segments[0]
    assert TOOL_OUTPUT in "".join(segments[2]["text"])


def test_without_a_tokenizer_tokens_stay_ids(sample_run):
    data = page_data(build_viewer(sample_run.path, tokenizer=None))
    assert data["token_text"] is False
    assert all("text" not in s for t in data["trajs"] for s in t["segments"])
    assert "ids" in data["token_note"]


def test_auto_tokenizer_decodes_with_the_run_model_only_when_it_fits(sample_run, tokenizer, tmp_path):
    model = tmp_path / "model"
    tokenizer.save_pretrained(model)
    (model / "config.json").write_text("{}")
    (sample_run.path / "config.yaml").write_text(f"model: {model}\n")
    data = page_data(build_viewer(sample_run.path))
    assert data["token_text"] is True
    assert data["token_note"] == f"token texts decoded with the tokenizer of the run's model, {str(model)!r}"
    assert "".join(data["trajs"][0]["segments"][2]["text"]).count(TOOL_OUTPUT) == 1


def test_auto_tokenizer_that_does_not_reproduce_the_messages_is_not_used(sample_run, tokenizer):
    (run,) = load_runs(sample_run.path)
    assert tokenizer_fits(tokenizer, [run])
    for step in run.steps:
        for traj in step.trajectories:
            for segment in traj.segments:
                segment.token_ids = [t + 1 for t in segment.token_ids]  # as another vocabulary would read them
    assert not tokenizer_fits(tokenizer, [run])
    # the sample run was tokenized by the unit tests' tokenizer: the default model's (if prepared here) won't fit
    data = page_data(build_viewer(sample_run.path))
    assert data["token_text"] is False
    assert data["token_note"].startswith("tokens are shown as ids: the tokenizer of the default model")


def test_an_explicit_tokenizer_that_cannot_load_is_an_error(sample_run, tmp_path):
    with pytest.raises(AgentRLError, match="cannot load the tokenizer"):
        build_viewer(sample_run.path, tokenizer=str(tmp_path / "no-such-model"))


def test_drift_is_read_from_metadata():
    report = {"ok": False, "position": 3, "kind": "template", "expected": "a", "actual": "b"}
    assert drift_of(Trajectory(metadata={"drift": report})) == {
        k: report[k] for k in ("kind", "position", "expected", "actual")
    }
    assert drift_of(Trajectory(metadata={"drift": "template drift at token 3"})) == {
        "kind": "",
        "message": "template drift at token 3",
    }
    for none in ({"ok": True}, "", "no drift", None):
        assert drift_of(Trajectory(metadata={"drift": none})) is None
    assert drift_of(Trajectory()) is None


def test_images_are_inlined_linked_or_reported_missing(tmp_path):
    run_dir, page_dir = tmp_path / "run", tmp_path / "site"
    (run_dir / "shots").mkdir(parents=True)
    page_dir.mkdir()
    (run_dir / "shots" / "small.png").write_bytes(PIXEL_PNG)
    (run_dir / "shots" / "big.png").write_bytes(b"\x89PNG" + b"0" * MAX_INLINE_IMAGE_BYTES)
    parts = [
        {"type": "image_url", "image_url": {"url": "shots/small.png"}},
        {"type": "image_url", "image_url": {"url": "shots/big.png"}},
        {"type": "image_url", "image_url": "shots/gone.png"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "look"},
    ]
    view = message_view(Message(role="user", content=parts), run_dir, page_dir)
    assert view["parts"][0]["src"].startswith("data:image/png;base64,iVBOR")
    assert view["parts"][1] == {"type": "image", "src": "../run/shots/big.png"}
    assert view["parts"][2] == {"type": "image", "missing": "shots/gone.png"}
    assert view["parts"][3] == {"type": "image", "src": "data:image/png;base64,AAAA"}
    assert view["parts"][4] == {"type": "text", "text": "look"}


def test_openai_tool_calls_and_text_around_hermes_blocks_are_kept():
    message = Message(
        role="assistant",
        content='Let me add. <tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call> then <tool_call>oops',
        tool_calls=[{"id": "c9", "type": "function", "function": {"name": "mul", "arguments": '{"x": 2}'}}],
    )
    parts = message_view(message, Path("."), Path("."))["parts"]
    assert [(p["type"], p.get("name")) for p in parts] == [
        ("text", None),
        ("tool_call", "add"),
        ("text", None),
        ("tool_call", ""),
        ("tool_call", "mul"),
    ]
    assert parts[3]["malformed"] is True
    assert parts[4] == {"type": "tool_call", "name": "mul", "arguments": '{\n  "x": 2\n}', "id": "c9"}


def test_rollout_layout_plain_files_and_folders_of_runs(tmp_path):
    trajectories = [Trajectory(id=f"t{i}", group_id="g", reward=0.5, stop_reason=StopReason.DONE) for i in range(3)]
    lines = "".join(t.to_json() + "\n" for t in trajectories)
    rollout = tmp_path / "runs" / "a-rollout"
    rollout.mkdir(parents=True)
    (rollout / "trajectories.jsonl").write_text(lines)
    other = tmp_path / "runs" / "b-train" / "trajectories"
    other.mkdir(parents=True)
    with gzip.open(other / "step_0010.jsonl.gz", "wt") as f:
        f.write(lines)
    (other / "step_0002.jsonl").write_text(lines)

    (run,) = load_runs(rollout)
    assert [(s.name, s.step, len(s.trajectories)) for s in run.steps] == [("trajectories", None, 3)]
    both = load_runs(tmp_path / "runs")
    assert [r.name for r in both] == ["a-rollout", "b-train"]
    assert [s.name for s in both[1].steps] == ["step 2", "step 10"]
    (single,) = load_runs(other / "step_0010.jsonl.gz")
    assert len(single.steps[0].trajectories) == 3

    page = build_viewer(other / "step_0010.jsonl.gz", tokenizer=None)
    assert page == other / "step_0010.html"
    assert len(page_data(page)["trajs"]) == 3


def test_unreadable_lines_become_warnings_not_failures(tmp_path):
    good = Trajectory(id="ok").to_json()
    (tmp_path / "trajectories.jsonl").write_text(f'{good}\nnot json\n{{"segments": 5}}\n')
    data = page_data(build_viewer(tmp_path, tokenizer=None))
    assert [t["id"] for t in data["trajs"]] == ["ok"]
    warnings = data["runs"][0]["warnings"]
    assert warnings[0].startswith("trajectories.jsonl:2: invalid JSON")
    assert warnings[1].startswith("trajectories.jsonl:3: not a trajectory")


def test_nothing_to_show_is_a_clear_error(tmp_path):
    with pytest.raises(AgentRLError, match="no run found in"):
        build_viewer(tmp_path)
    with pytest.raises(AgentRLError, match="does not exist"):
        build_viewer(tmp_path / "missing")


def test_page_is_self_contained_and_data_cannot_break_out_of_its_script(tmp_path):
    nasty = "</script><script>alert(1)</script> & <!--"
    traj = Trajectory(
        id="x",
        messages=[Message(role="user", content=nasty)],
        segments=[Segment(token_ids=[1, 2], trainable=True, logprobs=[float("-inf"), -1.0])],
        reward=float("nan"),
    )
    (tmp_path / "trajectories.jsonl").write_text(traj.to_json() + "\n")
    page = build_viewer(tmp_path, tmp_path / "site", tokenizer=None)
    assert page == tmp_path / "site" / "index.html"
    html = page.read_text()
    assert html.count("</script>") == 2  # the data element's and the code's, nothing from the data
    assert not re.search(r"""(src|href)=["'](?!data:)""", html)  # nothing loaded from elsewhere
    data = page_data(page)
    assert data["trajs"][0]["messages"][0]["parts"][0]["text"] == nasty
    assert data["trajs"][0]["reward"] is None
    assert data["trajs"][0]["segments"][0]["lp"] == [None, -1.0]
    assert "<" not in embed_json({"a": "<b>"})


def test_cli_view_writes_the_page_and_reports_user_errors(sample_run, tmp_path, capsys):
    out = tmp_path / "out.html"
    assert main(["view", str(sample_run.path), "--out", str(out), "--tokenizer", "none"]) == 0
    assert f"viewer written to {out}" in capsys.readouterr().out
    assert len(page_data(out)["trajs"]) == 4
    assert main(["view", str(tmp_path / "nothing-here")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_serve_serves_the_page_on_localhost(sample_run, tokenizer):
    page = build_viewer(sample_run.path, tokenizer=tokenizer)
    server = make_server(page, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        response = httpx.get(f"http://127.0.0.1:{port}/index.html", timeout=10)
        assert response.status_code == 200
        assert response.text == page.read_text()
    finally:
        server.shutdown()
        server.server_close()


def test_earlier_step_samples_are_shown_in_order_before_the_last(tmp_path):
    windowed = windowed_trajectory(["LEFT", "DOWN", "UP"])
    (tmp_path / "trajectories.jsonl").write_text(windowed.to_json() + "\n")

    (view,) = page_data(build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None))["trajs"]
    earlier = [s["messages"][-1]["parts"][0]["text"] for s in view["earlier_steps"]]
    assert earlier == ["LEFT", "DOWN"]
    assert view["messages"][-1]["parts"][0]["text"] == "UP"
    assert [seg["ids"] for seg in view["earlier_steps"][0]["segments"]] == [[1, 2], [3, 4, 5]]
    assert view["num_generated"] == 9  # every step sample's reply, not only the last one's


def test_each_reply_is_labelled_with_its_policy_and_each_policy_has_its_reward(tmp_path):
    roles = windowed_trajectory(["apple", "apple"], policies=["describer", "guesser"])
    (tmp_path / "trajectories.jsonl").write_text(roles.to_json() + "\n")

    (view,) = page_data(build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None))["trajs"]
    labels = [m.get("policy") for s in [*view["earlier_steps"], view] for m in s["messages"]]
    assert labels == [None, "describer", None, "guesser"]  # replies only
    assert view["policy_rewards"] == {"describer": 0.0, "guesser": 1.0}


def test_replies_of_a_run_of_one_policy_carry_no_policy_label(tmp_path):
    (tmp_path / "trajectories.jsonl").write_text(windowed_trajectory(["LEFT"]).to_json() + "\n")
    (view,) = page_data(build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None))["trajs"]
    assert all("policy" not in m for m in view["messages"]) and view["policy_rewards"] == {}


def test_the_leaves_of_a_tree_rollout_become_its_nodes(tmp_path):
    leaves = tree_leaves()
    alone = windowed_trajectory(["LEFT"]).model_copy(update={"id": "alone", "reward": 1.0})
    (tmp_path / "trajectories.jsonl").write_text("".join(t.to_json() + "\n" for t in [alone, *leaves]))
    data = page_data(build_viewer(tmp_path / "trajectories.jsonl", tokenizer=None))
    (tree,) = data["runs"][0]["steps"][0]["trees"]
    nodes = {tuple(n["path"]): n for n in tree["nodes"]}
    assert list(nodes) == [(), (0,), (0, 0), (0, 1), (1,), (1, 0), (1, 1)]  # depth first: siblings together
    assert nodes[()]["value"] == 0.25 and nodes[(0,)]["value"] == 0.5 and nodes[(1,)]["value"] == 0.0
    assert nodes[()]["turns"] == [0, 1] and nodes[(0,)]["turns"] == [1, 2] and nodes[(0, 1)]["turns"] == [2, 3]
    assert nodes[(0,)]["advantage"] == 0.87 and nodes[(0, 0)]["advantage"] == 1.5
    assert nodes[()]["leaf"] is None and data["trajs"][nodes[(1, 0)]["leaf"]]["id"] == "leaf-10"
    assert "tree_at" not in data["trajs"][0] and {t.get("tree_at") for t in data["trajs"][1:]} == {0}

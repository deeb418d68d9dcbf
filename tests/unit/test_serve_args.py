from agentrl.rollout.serve import _pop_serve_args


def test_serve_args_split_from_config_overrides():
    port, host, rest = _pop_serve_args(["backend=vllm", "model=/m", "port=8001", "host=0.0.0.0", "seed=3"])
    assert (port, host) == (8001, "0.0.0.0")
    assert rest == ["rollout.backend=vllm", "model=/m", "seed=3"]


def test_serve_defaults():
    assert _pop_serve_args([]) == (None, "127.0.0.1", [])

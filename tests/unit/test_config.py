import pytest

from agentrl.cli import main
from agentrl.config import AgentRLConfig, ConfigError, load_config


@pytest.fixture
def recipes(tmp_path, monkeypatch):
    root = tmp_path / "recipes"
    (root / "demo" / "data").mkdir(parents=True)
    (root / "demo" / "config.yaml").write_text(
        "# agentrl train recipe=demo\n"
        "data:\n  train_files: [data/train.jsonl]\n  batch_size: 4\n"
        "rollout:\n  n: 2\ntrainer:\n  steps: 3\n"
    )
    (root / "broken").mkdir()
    (root / "broken" / "config.yaml").write_text("- just\n- a list\n")
    monkeypatch.setenv("AGENTRL_RECIPES_DIR", str(root))
    return root


def test_defaults_without_recipe():
    cfg = load_config()
    assert cfg == AgentRLConfig()
    assert cfg.model == "default" and cfg.rollout.backend == "hf"


def test_recipe_layer_then_overrides_win(recipes):
    cfg = load_config("demo", ["trainer.steps=7", "rollout.max_concurrency=5", "seed=3"])
    assert cfg.recipe == "demo"
    assert cfg.data.batch_size == 4  # from the recipe
    assert cfg.rollout.n == 2  # from the recipe
    assert cfg.trainer.steps == 7  # override beats recipe
    assert cfg.rollout.max_concurrency == 5 and cfg.seed == 3
    assert cfg.trainer.lr == AgentRLConfig().trainer.lr  # default kept


def test_recipe_given_as_override_and_relative_data_paths(recipes):
    cfg = load_config(overrides=["recipe=demo"])
    assert cfg.data.train_files == [str(recipes / "demo" / "data" / "train.jsonl")]


def test_list_override_is_typed(recipes):
    cfg = load_config("demo", ["data.eval_files=[a.jsonl,b.jsonl]", "rollout.urls=[http://h:1]"])
    assert cfg.data.eval_files[-1].endswith("b.jsonl")
    assert cfg.rollout.urls == ["http://h:1"]


def test_all_problems_listed_at_once_with_valid_keys(recipes):
    with pytest.raises(ConfigError) as info:
        load_config("demo", ["trainer.stpes=3", "rollout.n=abc", "rollout.backend=tgi", "bogus=1"])
    problems = info.value.problems
    assert len(problems) == 4
    text = str(info.value)
    assert "trainer.stpes: unknown key; did you mean 'trainer.steps'?" in text
    assert "valid keys here:" in text and "steps" in text
    assert "rollout.n" in text and "'abc'" in text
    assert "rollout.backend" in text and "'hf'" in text
    assert "bogus: unknown key" in text


def test_value_constraints_checked(recipes):
    with pytest.raises(ConfigError, match="rollout.n"):
        load_config("demo", ["rollout.n=0"])


def test_unknown_recipe_lists_available(recipes):
    with pytest.raises(ConfigError, match="available recipes: broken, demo"):
        load_config("nope")


def test_recipe_that_is_not_a_mapping(recipes):
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config("broken")


def test_malformed_override(recipes):
    with pytest.raises(ConfigError, match="key=value"):
        load_config("demo", ["trainer.steps"])


def test_nesting_is_at_most_three_levels():
    def depth(model_cls, level=1):
        sub = [
            f.annotation
            for f in model_cls.model_fields.values()
            if isinstance(f.annotation, type) and hasattr(f.annotation, "model_fields")
        ]
        return max([level, *(depth(s, level + 1) for s in sub)])

    assert depth(AgentRLConfig) <= 3


def test_cli_config_show(recipes, capsys):
    assert main(["config", "show", "recipe=demo", "trainer.steps=9"]) == 0
    out = capsys.readouterr().out
    assert "steps: 9" in out and "batch_size: 4" in out
    assert main(["config", "recipe=demo", "trainer.steps=7"]) == 0, "`show` is the only action: it may be left out"
    assert "steps: 7" in capsys.readouterr().out


def test_cli_config_error_exits_2_without_traceback(recipes, capsys):
    assert main(["config", "show", "recipe=demo", "trainer.stpes=1"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'trainer.steps'" in err
    assert "Traceback" not in err


def test_cli_user_error_exits_2_with_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path / "no-such-run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentrl view: error: ") and "does not exist" in err
    assert "Traceback" not in err


def test_cli_help_for_each_command(capsys):
    for command in ["train", "rollout", "eval", "serve", "sandbox", "model", "config", "view", "report"]:
        with pytest.raises(SystemExit) as exit_info:
            main([command, "--help"])
        assert exit_info.value.code == 0
        assert "usage: agentrl" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("recipe", "named"),
    [
        ("verifiers", "# environment: verifiers environment '"),
        ("openenv", "# environment: OpenEnv environment '"),
        ("textarena", "# environment: TextArena game 'GuessTheNumber-v0'"),
        ("reasoning_gym", "# environment: reasoning-gym dataset 'chain_sum'"),
        ("gym", "# environment: Gymnasium environment "),
        ("harbor", "# environment: Harbor task folders "),
    ],
)
def test_config_show_names_the_environment_standard(recipe, named, capsys):
    assert main(["config", "show", f"recipe={recipe}"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(named)

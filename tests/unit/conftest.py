import os
import tempfile

# The weight-delta codec's compiled loops (agentrl.delta_kernels) check every index in unit tests, compiled into a
# cache of their own (numba's cache does not tell checked from unchecked code: the run's loops would be checked too).
os.environ["NUMBA_BOUNDSCHECK"] = "1"
os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"agentrl-numba-checked-{os.getuid()}")

import pytest

import agentrl.harbor.package
from tests.unit.chatml import chatml_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return chatml_tokenizer()


@pytest.fixture(autouse=True)
def no_harbor_package(monkeypatch, tmp_path_factory):
    """Unit tests read Harbor tasks with agentrl's reader whatever `make setup` has installed beside them (CI
    installs Harbor's package while the unit suite runs); tests of the choice set what they need."""
    monkeypatch.delenv("AGENTRL_HARBOR_PYTHON", raising=False)
    monkeypatch.setattr(agentrl.harbor.package, "CHECKOUT_VENV", tmp_path_factory.getbasetemp() / "no-venv-harbor")

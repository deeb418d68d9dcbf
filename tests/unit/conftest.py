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

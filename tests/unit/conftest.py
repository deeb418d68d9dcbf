import pytest

from tests.unit.chatml import chatml_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return chatml_tokenizer()

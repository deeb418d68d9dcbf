"""Model loads are serialized: transformers patches globals while loading, so parallel loads would corrupt them."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from agentrl.models import from_pretrained


class RecordingAutoClass:
    """Counts how many `from_pretrained` calls run at the same time."""

    def __init__(self) -> None:
        self.active = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def from_pretrained(self, path: str, **kwargs: object) -> tuple[str, dict]:
        with self.lock:
            self.active += 1
            self.most_at_once = max(self.most_at_once, self.active)
        time.sleep(0.02)
        with self.lock:
            self.active -= 1
        return path, kwargs


def test_loads_from_many_threads_run_one_at_a_time():
    auto = RecordingAutoClass()
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: from_pretrained(auto, f"model-{i}", dtype="float32"), range(6)))
    assert auto.most_at_once == 1
    assert results == [(f"model-{i}", {"dtype": "float32"}) for i in range(6)]


def test_a_failed_load_releases_the_lock():
    class Broken:
        @staticmethod
        def from_pretrained(path: str) -> None:
            raise OSError(f"no model at {path}")

    for _ in range(2):
        with pytest.raises(OSError, match="missing"):
            from_pretrained(Broken, "missing")
    assert from_pretrained(RecordingAutoClass(), "ok") == ("ok", {})

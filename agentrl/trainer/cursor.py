"""DataCursor: which training samples each step uses, reproducibly, with a position that checkpoints can save."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass


@dataclass
class DataCursor:
    """Walks a dataset of `size` rows in epochs, each epoch in its own seeded shuffled order.

    The whole state is `(epoch, position)`: a resumed run that loads it draws exactly the batches the
    interrupted run would have drawn next.
    """

    size: int
    seed: int = 0
    epoch: int = 0
    position: int = 0

    def __post_init__(self) -> None:
        if self.size <= 0:
            raise ValueError("DataCursor needs a non-empty dataset")

    def take(self, count: int) -> list[int]:
        """The next `count` row indices (crossing into the next epoch when this one runs out)."""
        out: list[int] = []
        while len(out) < count:
            order = self._order()
            chunk = order[self.position : self.position + count - len(out)]
            out.extend(chunk)
            self.position += len(chunk)
            if self.position >= self.size:
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def _order(self) -> list[int]:
        order = list(range(self.size))
        random.Random(f"{self.seed}/{self.epoch}").shuffle(order)
        return order

    def state(self) -> dict[str, int]:
        """`{"epoch", "position", "size", "seed"}` for a checkpoint."""
        return asdict(self)

    def load_state(self, state: dict[str, int]) -> None:
        """Continue from a saved `state`; the dataset must not have changed size."""
        if state["size"] != self.size:
            raise ValueError(
                f"the checkpoint was taken with {state['size']} training samples, the data now has {self.size}; "
                "resume with the same data.train_files"
            )
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]

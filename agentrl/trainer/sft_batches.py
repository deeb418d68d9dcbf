"""`DemonstrationBatches`: the supervised fine-tuning steps' data, in the shape the training loop takes a rollout's."""

from __future__ import annotations

from agentrl.trainer.collect import CollectedBatch
from agentrl.trainer.cursor import DataCursor
from agentrl.types import Trajectory


class DemonstrationBatches:
    """The next `batch_size` demonstrations each step, in seeded shuffled epochs (`DataCursor`: a checkpoint holds
    its position, so a resumed run trains on the batches the interrupted one would have)."""

    def __init__(self, demonstrations: list[Trajectory], batch_size: int, seed: int):
        self.demonstrations = demonstrations
        self.batch_size = batch_size
        self.cursor = DataCursor(len(demonstrations), seed)

    async def collect(self, step: int) -> CollectedBatch:
        rows = [self.demonstrations[i] for i in self.cursor.take(self.batch_size)]
        return CollectedBatch(
            step=step,
            trajectories=rows,
            generated=[],
            cursor_state=self.cursor.state(),
            timings={"rollout_s": 0.0},
            metrics={"data/demonstrations": float(len(rows)), "data/epoch": float(self.cursor.epoch)},
        )

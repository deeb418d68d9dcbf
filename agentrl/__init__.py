"""agentrl: reinforcement learning for multi-turn LLM agents."""

from agentrl.types import Message, Sample, Segment, StopReason, Trajectory

__version__ = "0.1.0"

__all__ = ["Message", "Sample", "Segment", "StopReason", "Trajectory", "__version__"]

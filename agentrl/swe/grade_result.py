"""The outcome of grading one patch against a SWE task's tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrl.swe.report import Outcome

MISSING = "missing"
LOG_TAIL = 3000


@dataclass
class GradeResult:
    """The outcome of grading one patch.

    Attributes:
        instance_id: the task.
        resolved: every FAIL_TO_PASS and PASS_TO_PASS test passed.
        patch_applied: the model patch applied (an empty patch counts as applied).
        fail_to_pass / pass_to_pass: each test's outcome (`passed`, `failed`, `error`, `skipped`, `missing`).
        timed_out: the test run hit its timeout.
        error: why grading could not run the tests, if it could not.
        log: the end of the patch and test output.
        duration_s: wall time of the grading, container start included.
    """

    instance_id: str
    resolved: bool
    patch_applied: bool
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    timed_out: bool = False
    error: str | None = None
    log: str = ""
    duration_s: float = 0.0

    @property
    def f2p_fraction(self) -> float:
        """Share of FAIL_TO_PASS tests that pass (1.0 when there are none)."""
        return _fraction(self.fail_to_pass)

    @property
    def p2p_fraction(self) -> float:
        """Share of PASS_TO_PASS tests that pass (1.0 when there are none)."""
        return _fraction(self.pass_to_pass)

    def details(self) -> dict[str, Any]:
        """A JSON-safe summary for reward details and eval reports (failing tests listed, not every test)."""
        return {
            "instance_id": self.instance_id,
            "resolved": self.resolved,
            "patch_applied": self.patch_applied,
            "f2p_passed": f"{_passed(self.fail_to_pass)}/{len(self.fail_to_pass)}",
            "p2p_passed": f"{_passed(self.pass_to_pass)}/{len(self.pass_to_pass)}",
            "f2p_fraction": self.f2p_fraction,
            "failing": [t for t, o in {**self.fail_to_pass, **self.pass_to_pass}.items() if o != Outcome.PASSED][:20],
            "timed_out": self.timed_out,
            "error": self.error,
            "log_tail": self.log[-LOG_TAIL:],
            "duration_s": round(self.duration_s, 3),
        }


def _passed(outcomes: dict[str, str]) -> int:
    return sum(o == Outcome.PASSED for o in outcomes.values())


def _fraction(outcomes: dict[str, str]) -> float:
    return _passed(outcomes) / len(outcomes) if outcomes else 1.0

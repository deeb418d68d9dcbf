"""Run reports: `write_report(run_dir)` writes `report.md` and PNG plots of a run's metrics and trajectories.

Modules: `series` (the per-step series, from `metrics.jsonl` and the saved trajectories), `plots` (the PNGs),
`report` (`write_report` and the markdown). Run by hand with `python -m agentrl.reports RUN_DIR`.
"""

from agentrl.reports.report import write_report

__all__ = ["write_report"]

"""`python -m agentrl.reports RUN_DIR`: write the run report of RUN_DIR and print its path."""

from __future__ import annotations

import sys
from pathlib import Path

from agentrl.errors import UserError
from agentrl.reports import write_report


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m agentrl.reports RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(write_report(Path(args[0])))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

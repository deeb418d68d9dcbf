"""Every figure in the README's recipes table names how many runs it comes from ("3 seeds", "5 runs", "1 run"):
a range over seeds and one lucky run read the same otherwise. A cell's figures are its clauses split at `;`
(inside parentheses too); a clause holds a figure when it has a digit outside code spans and model sizes."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
RUNS = re.compile(r"\b\d+ (?:of \d+ )?(?:seeds?|runs?)\b")
NOT_FIGURES = re.compile(r"`[^`]*`|\b\d+(?:\.\d+)?[MB]\b")  # code spans; model sizes such as 135M


def recipes_table(text: str) -> dict[str, str]:
    """Recipe name -> its "what it learns" cell, from the first table after the `## Recipes` heading."""
    section = text.split("\n## Recipes\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    column = header.index("what it learns")
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]
    return {row[0].strip("`"): row[column] for row in cells}


def figures_without_runs(cell: str) -> list[str]:
    """The clauses of `cell` that hold a figure but name no number of runs."""
    clauses = [clause.strip() for clause in cell.split(";")]
    return [c for c in clauses if re.search(r"\d", NOT_FIGURES.sub("", c)) and not RUNS.search(c)]


def test_the_clause_parser_finds_a_figure_without_its_runs():
    assert figures_without_runs("reward 0.2 → 0.9, 5 min (3 seeds)") == []
    assert figures_without_runs("0 → 0.94 on 3 of 5 seeds, 0 on the other two") == []
    assert figures_without_runs("the 135M model resolves little; see `docs/x2.md`") == []
    assert figures_without_runs("0.9 (8 seeds; fresh clones 0.83–1.00)") == ["fresh clones 0.83–1.00)"]
    assert figures_without_runs("trains end to end (~22 min)") == ["trains end to end (~22 min)"]


def test_every_figure_in_the_recipes_table_names_its_runs():
    table = recipes_table(README.read_text())
    assert len(table) >= 10, f"the README's recipes table was not found or lost rows: {sorted(table)}"
    missing = {name: clauses for name, cell in table.items() if (clauses := figures_without_runs(cell))}
    assert not missing, "README recipes table: name the number of runs (e.g. '3 seeds', '1 run') of " + "; ".join(
        f"{name}: {clauses}" for name, clauses in missing.items()
    )

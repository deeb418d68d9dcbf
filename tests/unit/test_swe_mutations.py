"""The bug injector of the swe_agent recipe: one-token mutations that leave the rest of the file untouched."""

import ast
import difflib
import importlib.util
import sys
from pathlib import Path

MODULE = Path(__file__).resolve().parents[2] / "recipes" / "swe_agent" / "mutations.py"
spec = importlib.util.spec_from_file_location("swe_mutations", MODULE)
mutations = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mutations  # dataclasses look their module up
spec.loader.exec_module(mutations)

SOURCE = '''\
def clamp(x, lo, hi):
    """Keep x in [lo, hi]."""
    if x < lo and not hi is None:
        return lo
    return x[1:] if x in (lo, hi) else len(x) + 1


class Box:
    def ok(self, y):
        return y >= 0 or (y != 2)


TOP = 1 + 2  # module level: never mutated
'''


def test_every_mutation_changes_one_line_and_still_parses():
    found = mutations.mutations("m.py", SOURCE)
    kinds = {m.kind for m in found}
    assert {"compare < -> <=", "boolop and -> or", "drop not", "constant 1 -> 2", "compare in -> not in"} <= kinds
    assert {"compare >= -> >", "boolop or -> and", "compare != -> =="} <= kinds
    assert {m.function for m in found} == {"clamp", "Box.ok"}
    for m in found:
        ast.parse(m.source)
        changed = [d for d in difflib.ndiff(SOURCE.splitlines(), m.source.splitlines()) if d[:2] in ("- ", "+ ")]
        assert len(changed) == 2, (m.kind, changed)
        assert "TOP = 1 + 2" in m.source

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


TYPO_SOURCE = """\
def window(seq, size, step=1):
    size = max(size, 1)
    return [seq[i : i + size] for i in range(0, len(seq), step)]
"""


def test_name_typos_mistype_one_parameter_read_that_then_raises_name_error():
    found = mutations.name_typos("m.py", TYPO_SOURCE)
    assert [m.line for m in found] == [2, 3]  # the first read of a parameter on each line of the function
    assert found[0].kind == "typo size -> sizee" and found[1].kind.split()[1] in ("seq", "size", "step")
    for m in found:
        changed = [d for d in difflib.ndiff(TYPO_SOURCE.splitlines(), m.source.splitlines()) if d[:2] in ("- ", "+ ")]
        assert len(changed) == 2 and m.function == "window", (m.kind, changed)
        namespace: dict = {}
        exec(compile(m.source, "m.py", "exec"), namespace)
        try:
            namespace["window"]([1, 2, 3], 2)
        except NameError as error:
            assert error.name == m.kind.split()[-1]
        else:
            raise AssertionError(f"{m.kind} did not raise")


def test_a_typo_that_names_something_in_the_file_is_not_made():
    found = mutations.name_typos("m.py", "def f(abc, xyz):\n    return abc + xyz\n\nabcc = 1\n")
    assert [m.kind for m in found] == ["typo xyz -> xyzz"]

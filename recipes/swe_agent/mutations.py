"""Bug injection: small, local source mutations inside functions (in the spirit of SWE-smith's procedural bugs).

Each mutation changes one operator or constant token and leaves every other byte of the file as it was, so the
gold patch (the reverse) is a one-line diff:

* comparisons: `<` ↔ `<=`, `>` ↔ `>=`, `==` ↔ `!=`, `is` ↔ `is not`, `in` ↔ `not in`
* boolean operators: `and` ↔ `or`
* arithmetic: `+` ↔ `-`
* off-by-one: a small integer operand or slice bound `n` → `n + 1`
* a dropped `not`

`name_typos` makes the easy tier's bugs instead: a parameter's name mistyped with its last letter doubled
(`seq` -> `seqq`) where the function reads it, so the call raises a NameError whose traceback points at the line.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

COMPARE_SWAPS = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
    ast.Is: ("is", "is not"),
    ast.IsNot: ("is not", "is"),
    ast.In: ("in", "not in"),
    ast.NotIn: ("not in", "in"),
}
BOOL_SWAPS = {ast.And: ("and", "or"), ast.Or: ("or", "and")}
BIN_SWAPS = {ast.Add: ("+", "-"), ast.Sub: ("-", "+")}


@dataclass(frozen=True)
class Mutation:
    """One injected bug: `source` is the whole mutated file."""

    path: str
    function: str
    line: int
    kind: str
    source: str


class _Offsets:
    """Maps ast (line, utf-8 byte column) positions to string indices."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def index(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="ignore"))


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((f"{prefix}{child.name}", child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def _gap_edit(source: str, off: _Offsets, left: ast.AST, right: ast.AST, old: str, new: str) -> str | None:
    """Replace the operator `old` standing alone between `left` and `right` with `new`."""
    a = off.index(left.end_lineno, left.end_col_offset)  # type: ignore[arg-type]
    b = off.index(right.lineno, right.col_offset)  # type: ignore[attr-defined]
    gap = source[a:b]
    core = gap.strip(" ()\t")
    if " ".join(core.split()) != old:
        return None  # comments, line breaks or parentheses we do not understand: skip
    at = gap.index(core)
    return source[:a] + gap[:at] + new + gap[at + len(core) :] + source[b:]


def mutations(path: str, source: str) -> list[Mutation]:
    """Every mutation this module knows for the functions of one file, in source order."""
    tree = ast.parse(source)
    off = _Offsets(source)
    found: list[Mutation] = []
    for name, func in _functions(tree):
        body = [n for stmt in func.body for n in ast.walk(stmt)]
        for node in body:
            for kind, new in _edits(source, off, node):
                if new is not None and new != source:
                    found.append(Mutation(path, name, getattr(node, "lineno", func.lineno), kind, new))
    unique: dict[tuple[int, str, str], Mutation] = {}
    for m in found:  # nested functions are walked twice
        unique.setdefault((m.line, m.kind, m.source), m)
    return sorted(unique.values(), key=lambda m: (m.line, m.kind))


def _edits(source: str, off: _Offsets, node: ast.AST) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = []
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE_SWAPS:
        old, new = COMPARE_SWAPS[type(node.ops[0])]
        out.append((f"compare {old} -> {new}", _gap_edit(source, off, node.left, node.comparators[0], old, new)))
    elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
        old, new = BOOL_SWAPS[type(node.op)]
        out.append((f"boolop {old} -> {new}", _gap_edit(source, off, node.values[0], node.values[1], old, new)))
    elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAPS:
        old, new = BIN_SWAPS[type(node.op)]
        if _is_numeric(node.left) or _is_numeric(node.right):  # `"a" + s` -> `"a" - s` only raises TypeError
            out.append((f"binop {old} -> {new}", _gap_edit(source, off, node.left, node.right, old, new)))
        right = node.right
        if isinstance(right, ast.Constant) and type(right.value) is int and 0 <= right.value <= 2:
            out.append(_bump(source, off, right))
    elif isinstance(node, ast.Slice):
        for bound in (node.lower, node.upper):
            if isinstance(bound, ast.Constant) and type(bound.value) is int and 0 <= bound.value <= 2:
                out.append(_bump(source, off, bound))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        a = off.index(node.lineno, node.col_offset)
        b = off.index(node.operand.lineno, node.operand.col_offset)
        if source[a:b].strip() == "not":
            out.append(("drop not", source[:a] + source[b:]))
    return out


def _bump(source: str, off: _Offsets, const: ast.Constant) -> tuple[str, str | None]:
    """`n` -> `n + 1` for an int literal written as plain digits."""
    a = off.index(const.lineno, const.col_offset)
    b = off.index(const.end_lineno, const.end_col_offset)  # type: ignore[arg-type]
    if source[a:b] != str(const.value):
        return "constant", None
    return f"constant {const.value} -> {const.value + 1}", source[:a] + str(const.value + 1) + source[b:]


def _is_numeric(node: ast.AST) -> bool:
    """An int literal or a `len(...)` call: arithmetic that is surely on numbers."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def name_typos(path: str, source: str) -> list[Mutation]:
    """For each function, every read of one of its parameters (3+ letters) mistyped with the last letter doubled.

    A typo is skipped when the mistyped name occurs anywhere in the file or is a builtin: then it might not raise.
    """
    tree = ast.parse(source)
    off = _Offsets(source)
    words = set(re.findall(r"\w+", source)) | set(dir(builtins))
    found: dict[tuple[int, str], Mutation] = {}
    for name, func in _functions(tree):
        params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)} - {"self", "cls"}
        for node in ast.walk(func):
            if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in params):
                continue
            typo = node.id + node.id[-1]
            if len(node.id) < 3 or typo in words or node.lineno <= func.lineno:
                continue
            a = off.index(node.lineno, node.col_offset)
            mutated = source[:a] + typo + source[a + len(node.id) :]
            kind = f"typo {node.id} -> {typo}"
            found.setdefault((node.lineno, name), Mutation(path, name, node.lineno, kind, mutated))
    return sorted(found.values(), key=lambda m: (m.line, m.kind))

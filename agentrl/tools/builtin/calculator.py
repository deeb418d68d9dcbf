"""`calculator`: exact arithmetic on an expression, without a sandbox.

The expression is parsed with Python's `ast` and only numbers, `+ - * / // % **`, unary signs and parentheses are
evaluated: nothing is executed, so the tool is safe to run in the trainer's process. Results are exact for
integers (Python's big ints) and rounded to 10 significant digits otherwise.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from agentrl.tools.decorator import tool

MAX_CHARS = 200
MAX_POWER = 100
"""Exponents above this are refused: `9 ** 9 ** 9` would hold the thread for minutes."""

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression.

    Raises:
        ValueError: the expression is too long, not arithmetic, or divides by zero.
    """
    if len(expression) > MAX_CHARS:
        raise ValueError(f"the expression is longer than {MAX_CHARS} characters")
    try:
        tree = ast.parse(expression.replace("^", "**").replace("×", "*"), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse {expression!r}: use numbers, + - * / // % ** and parentheses") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_POWER:
            raise ValueError(f"exponents above {MAX_POWER} are not supported")
        try:
            return _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
    raise ValueError("only numbers, + - * / // % ** and parentheses are allowed")


def format_number(value: int | float) -> str:
    """An integer as is; a float rounded to 10 significant digits, as an integer when it is one."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value) if isinstance(value, int) else f"{value:.10g}"


@tool(name="calculator")
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly and return the result.

    Args:
        expression: the expression, e.g. "347 * 29" or "(12 + 5) / 4".
    """
    return format_number(evaluate(expression))

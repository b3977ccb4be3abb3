"""The paths through a loop's or a function's body that ONC101 reasons about, and the name and
attribute chains read and bound on them: plain AST helpers, with no knowledge of timers."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator

#: What starts a scope of its own: what runs in it does not run with the code around it.
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)


def own(
    nodes: Iterable[ast.AST], *, into_loops: bool = False, into_handlers: bool = True
) -> Iterator[ast.AST]:
    """The nodes under ``nodes`` that run with them: not inside a nested function, lambda or
    class, nor (unless asked) a nested loop or (if not asked) an ``except`` block."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        if (
            isinstance(node, SCOPES)
            or (not into_loops and isinstance(node, LOOPS))
            or (not into_handlers and isinstance(node, ast.ExceptHandler))
        ):
            continue
        stack.extend(ast.iter_child_nodes(node))


def path_calls(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The calls in the simple statements on the path through ``body`` when nothing raises."""
    for stmt in straight(body):
        if isinstance(stmt, ast.Expr | ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return):
            yield from (node for node in own([stmt]) if isinstance(node, ast.Call))


def statement_calls(nodes: Iterable[ast.AST]) -> Iterator[ast.Call]:
    """The calls that are whole statements or whole assigned values (awaited or not): ``item =
    q.get()``, ``await changed.wait()``; not a call inside an expression (``t - clock.get()``)."""
    for node in nodes:
        value = node.value if isinstance(node, ast.Expr | ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            yield value


def straight(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements an iteration runs when nothing raises, besides those under an ``if``."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.Try | ast.TryStar):
            yield from straight([*stmt.body, *stmt.orelse, *stmt.finalbody])
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            yield from straight(stmt.body)


def bound(stmt: ast.stmt) -> set[str]:
    """The chains ``stmt`` itself assigns."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        targets = [stmt.target]
    elif isinstance(stmt, ast.With | ast.AsyncWith):
        targets = [item.optional_vars for item in stmt.items if item.optional_vars is not None]
    else:
        return set()
    return {key for target in targets for key in assigned(target)}


def assigned(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from assigned(element)
    elif isinstance(target, ast.Starred):
        yield from assigned(target.value)
    else:
        key = chain_of(target)
        if key is not None:
            yield key


def chain_of(node: ast.AST) -> str | None:
    """``a.b.c`` for a name or attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = chain_of(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def chains(node: ast.AST) -> Iterator[str]:
    """The name and attribute chains an expression reads; of ``x.f()``, the receiver ``x``."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute):
            yield from chains(node.func.value)
        for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
            yield from chains(argument)
        return
    key = chain_of(node)
    if key is not None:
        yield key
        return
    for child in ast.iter_child_nodes(node):
        yield from chains(child)


def rooted_in(chains: Iterable[str], root: str) -> bool:
    return any(rooted(chain, [root]) for chain in chains)


def rooted(chain: str, roots: Iterable[str]) -> bool:
    return any(chain == root or chain.startswith(f"{root}.") for root in roots)


def names(caught: ast.expr | None) -> set[str]:
    """The last names of the exception classes an ``except`` catches."""
    elements = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return {
        element.attr if isinstance(element, ast.Attribute) else element.id
        for element in elements
        if isinstance(element, ast.Attribute | ast.Name)
    }


def last(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position and not isinstance(call.args[position], ast.Starred):
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def timeout(call: ast.Call, position: int) -> ast.expr | None:
    """The timeout given to ``call`` at ``position`` or as ``timeout=``, unless None."""
    given = argument(call, position, "timeout")
    if given is None or (isinstance(given, ast.Constant) and given.value is None):
        return None
    return given


def number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."

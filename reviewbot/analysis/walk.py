"""``ast.walk`` without its per-node generators."""

from __future__ import annotations

import ast
from collections import deque
from typing import Iterator

_AST = ast.AST


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a tree in the order ``ast.walk`` gives them (breadth first, each
    node's children queued before it is given), at about half its cost."""
    todo = deque([node])
    pop, push = todo.popleft, todo.append
    while todo:
        node = pop()
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                continue
            if isinstance(value, _AST):
                push(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, _AST):
                        push(item)
        yield node

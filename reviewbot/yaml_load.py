"""YAML for configuration and rule packs: data only, bounded, and errors without quotes.

``yaml.safe_load`` builds no objects, but aliases let a few lines stand for a billion
values (a "billion laughs" document): anything that walks the result, validation
included, would then run out of memory. The document is composed first and its
expanded size measured over the shared nodes (in memory linear in the text); one too
large is refused before anything walks it. Error messages name the line and column and
the problem, never the text there.
"""

from __future__ import annotations

from typing import Any

from reviewbot.errors import ConfigError

# Values a document may expand to (a shipped pack has a few hundred).
MAX_NODES = 100_000
MAX_BYTES = 1024 * 1024


def _expanded_size(root: Any) -> int:
    import yaml

    sizes: dict[int, int] = {}
    # Post-order without recursion: a deep document must not overflow the stack.
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            total = 1
            for child in children:
                total += sizes.get(id(child), 0)
                if total > MAX_NODES:
                    return total
            sizes[id(node)] = total
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes.get(id(root), 0)


def load(text: str, source: str) -> Any:
    """The data of a YAML document (raises ConfigError naming ``source``)."""
    import yaml

    if len(text) > MAX_BYTES:
        raise ConfigError(source, "<file>", f"too large ({len(text)} characters; the limit "
                          f"is {MAX_BYTES})")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_size(node) > MAX_NODES:
            raise ConfigError(source, "<file>", f"refused: its aliases expand to more than "
                              f"{MAX_NODES} values")
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(source, "<file>", "invalid YAML: " + _describe(exc)) from None
    except RecursionError:
        raise ConfigError(source, "<file>", "invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _describe(exc: Exception) -> str:
    """What went wrong and where, without the document's text."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "cannot be parsed"
        return f"{' '.join(str(problem).split())}{where}"
    return exc.__class__.__name__

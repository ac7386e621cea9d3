"""YAML as plain data, strictly: safe loading that refuses a key given twice and reports unbuildable values.

PyYAML's safe loader keeps the last of two equal keys without a word, so a second `deployments:` silently drops
the first list, and a value its constructors cannot build (`2001-13-45`, `!!int abc`) escapes as a bare
ValueError. `StrictSafeLoader` turns both into `yaml.MarkedYAMLError`s that carry the line.
"""

from __future__ import annotations

from typing import Any

import yaml

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present
_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping names the same key twice: YAML leaves it undefined, PyYAML silently keeps the last value."""


class BadValueError(yaml.constructor.ConstructorError):
    """A scalar PyYAML cannot build: a 13th month, `!!int abc`, an integer of thousands of digits."""


def _scalar_text(node: yaml.Node) -> str:
    from kvsize.text import clean

    text = clean(node.value) if isinstance(node, yaml.ScalarNode) else node.tag
    return f"'{text[:40]}...' ({len(text)} characters)" if len(text) > 40 else f"'{text}'"


class StrictSafeLoader(_BaseLoader):  # type: ignore[misc]
    """Safe loading (only plain data; no tag builds an object) that also refuses a key given twice in one
    mapping, at any depth, and turns a value that fails while being built (`2001-13-45`, `!!int abc`, a
    5000-digit integer) into a YAML error at that value's line instead of an exception from deep inside PyYAML."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # PyYAML's scalar constructors fail every way (KeyError for '!!bool maybe',
            # IndexError for "!!int ''", AttributeError for '!!timestamp x'): all of them are a bad value here
            reason = " ".join(str(exc).split(";")[0].split())[:100] or type(exc).__name__
            raise BadValueError(
                None, None, f"cannot read the value {_scalar_text(node)} ({reason})", node.start_mark
            ) from None

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first_seen: dict[Any, yaml.Node] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:  # '<<: *base' keys may be overridden: that is what merging is for
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    earlier = first_seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: PyYAML's own construction reports it
                    continue
                if earlier is not key_node:
                    raise DuplicateKeyError(
                        f"in the mapping at line {node.start_mark.line + 1}",
                        node.start_mark,
                        f"duplicate key {_scalar_text(key_node)} (first given at line {earlier.start_mark.line + 1})",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


# --- the one way kvsize reads YAML -------------------------------------------------------------------------

MAX_EXPANDED_NODES = 1_000_000  # nodes after aliases are expanded; "billion laughs" files explode past it


class AliasBombError(yaml.YAMLError):
    """Anchors and aliases that expand past MAX_EXPANDED_NODES: refused before anything is built."""


class DuplicateMergeError(yaml.constructor.ConstructorError):
    """Two `<<` merge keys in one mapping: PyYAML keeps the last without a word."""


def expanded_nodes(root: yaml.Node | None, limit: int = MAX_EXPANDED_NODES) -> int:
    """Nodes the document holds once aliases are expanded, counted up to just past `limit`. Iterative, so a
    deep document costs no stack, and stopped early, so an alias bomb costs at most `limit` steps."""
    count, stack = 0, [root] if root is not None else []
    while stack and count <= limit:
        node = stack.pop()
        count += 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return count


def _refuse_double_merge(root: yaml.Node | None) -> None:
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: the same node object again
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            merges = [k for k, _ in node.value if k.tag == _MERGE_TAG]
            if len(merges) > 1:
                raise DuplicateMergeError(
                    f"in the mapping at line {node.start_mark.line + 1}",
                    node.start_mark,
                    f"'<<' given twice (first at line {merges[0].start_mark.line + 1}); "
                    "merge several mappings with one '<<: [*a, *b]'",
                    merges[1].start_mark,
                )
            for key, value in node.value:
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def compose_bounded(text: str) -> tuple[Any, yaml.Node | None]:
    """(plain data, root node) of one YAML document: strict safe loading (StrictSafeLoader), with the alias
    expansion bounded (AliasBombError) and two `<<` keys in one mapping refused (DuplicateMergeError). Raises
    yaml.YAMLError subclasses only; the caller words them for its file."""
    loader = StrictSafeLoader(text)
    try:
        root = loader.get_single_node()
        if expanded_nodes(root) > MAX_EXPANDED_NODES:
            raise AliasBombError(f"anchors and aliases expand to over {MAX_EXPANDED_NODES:,} nodes")
        _refuse_double_merge(root)
        data = loader.construct_document(root) if root is not None else None
    except RecursionError:  # a document nested thousands deep
        raise yaml.YAMLError("nested too deeply") from None
    finally:
        loader.dispose()
    return data, root


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, int | None]:
    """One line for a YAML error (no whole parsed value in it), and its 1-based line when known."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())[:200]
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        return where + problem, (mark.line + 1 if mark else None)
    return " ".join(str(exc).split())[:200] or "invalid YAML", None


def load_yaml_data(text: str, *, source: str, what: str) -> Any:
    """Plain data from a YAML file's text (workload, calibration, GPU profile), or one ConfigError line that
    names the file, the line and the problem. Every YAML kvsize reads goes through compose_bounded."""
    from kvsize.errors import ConfigError

    try:
        data, _ = compose_bounded(text)
    except yaml.YAMLError as exc:
        problem, line = yaml_problem(exc)
        if isinstance(exc, AliasBombError):
            hint = "Refusing a possible alias bomb; write the values out."
        elif isinstance(exc, (DuplicateKeyError, DuplicateMergeError)):
            hint = "Give each key once."
        else:
            hint = f"A {what} is plain YAML: no tags that build objects."
        error = ConfigError(f"{source}: {problem}", hint=hint)
        error.line = line
        raise error from None
    return data

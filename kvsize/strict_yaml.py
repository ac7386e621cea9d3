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

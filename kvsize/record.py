"""The core's immutable records: msgspec Structs.

Why not pydantic models or dataclasses: a sizing run builds some 40 record classes at import, and start-up is
part of the product (issue 12: a registry run within 1.5x of importing the CLI stack). Importing pydantic's
`BaseModel` alone costs more than that margin, and a pydantic model or a dataclass costs about a millisecond
to create (schema building; `exec` of generated methods), where a Struct class costs microseconds. pydantic stays
where its located errors and JSON Schema serve people writing files (`kvsize check` capacity files, calibration
files); those are not imported by a sizing run.

Structs do not check types or bounds when built in Python, so records built from untrusted data (the spec
from a config.json, a GPU profile from YAML) check their own invariants in `__post_init__`, and values read
from files go through `msgspec.convert`, which enforces the `Annotated[..., Meta(...)]` constraints.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from kvsize.text import shown


class InvalidRecord(ValueError):
    """A record built with values its invariants refuse (a 0-wide head, an empty layer list)."""


class Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of the core's records: immutable, unknown fields refused when decoded. Subclasses say
    `kw_only=True` (msgspec applies it to the fields each class declares), so fields keep the order that reads
    best and records are built by keyword."""


def to_builtins(record: Any) -> Any:
    """Dicts, lists, strings and numbers (enums as their values), for JSON and for comparing in tests."""
    return msgspec.to_builtins(record)


def to_json(record: Any, *, indent: int = 2) -> str:
    """The record as indented JSON, fields in declaration order (a base class's fields first)."""
    return json.dumps(msgspec.to_builtins(record), indent=indent, ensure_ascii=False)


def check_at_least(record: object, minimum: int, *names: str) -> None:
    """Raise InvalidRecord when one of the named int fields is set (not None) and below `minimum`."""
    for name in names:
        value = getattr(record, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
            raise InvalidRecord(f"{type(record).__name__}.{name} must be an integer >= {minimum}, got {shown(value)}")

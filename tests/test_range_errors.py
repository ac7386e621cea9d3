"""A number that was read but is out of range says so; only text that is no number says "cannot read" (issue 20)."""

from __future__ import annotations

import pytest

from kvsize.errors import UsageError
from kvsize.units import parse_count, parse_tokens


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: parse_count("0", "batch size"), "the batch size must be from 1 to"),
        (lambda: parse_count("-3", "batch size"), "the batch size must be from 1 to"),
        (lambda: parse_count(9, "GPU count", maximum=8), "the GPU count must be from 1 to 8, got '9'"),
        (lambda: parse_count("x", "batch size"), "cannot read the batch size 'x'"),
        (lambda: parse_count("1.5", "batch size"), "cannot read the batch size '1.5'"),
        (lambda: parse_tokens("0"), "the token count must be positive, got '0'"),
        (lambda: parse_tokens("-5"), "the token count must be positive, got '-5'"),
        (lambda: parse_tokens("8q"), "cannot read the token count '8q'"),
    ],
)
def test_range_or_unreadable(call: object, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        call()  # type: ignore[operator]

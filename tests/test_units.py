from __future__ import annotations

import pytest

from kvsize.errors import UsageError
from kvsize.units import format_bytes, format_tokens, parse_size, parse_tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("131072", 131072),
        ("128k", 131072),
        ("128K", 131072),
        ("1M", 1048576),
        ("32k", 32768),
        ("8_192", 8192),
        (" 4096 ", 4096),
    ],
)
def test_parse_tokens(text: str, tokens: int) -> None:
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["0", "-5", "abc", "128q", "1.5k", "", "k", "0k", "2e3", str(1 << 41)])
def test_parse_tokens_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("24GiB", 24 * 1024**3),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 * 1024**2),
        ("1.5TiB", 3 * 1024**4 // 2),
        ("1000", 1000),
        ("24 gib", 24 * 1024**3),
        ("16G", 16 * 1024**3),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "0", "-1GiB", "12XB", "inf", "nan", "GiB", ""])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)


def test_format() -> None:
    assert format_bytes(17179869184) == "16.00 GiB"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_tokens(131072) == "128k"
    assert format_tokens(1048576) == "1M"
    assert format_tokens(5000) == "5,000"

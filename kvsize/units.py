"""Reading sizes and token counts users type, and printing bytes in binary units."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from kvsize.errors import UsageError

GIB = 1024**3
_ASCII_DIGITS = re.compile(r"[0-9]+")  # str.isdigit() also accepts '²', which int() then rejects


def parse_size(text: str, *, allow_zero: bool = False) -> int:
    """'24GiB', '80GB', '512MiB', '1.5TiB', '1000000' -> bytes (binary and decimal units)."""
    units = {
        "": 1,
        "B": 1,
        "K": 1024,
        "KB": 1000,
        "KIB": 1024,
        "M": 1024**2,
        "MB": 1000**2,
        "MIB": 1024**2,
        "G": 1024**3,
        "GB": 1000**3,
        "GIB": 1024**3,
        "T": 1024**4,
        "TB": 1000**4,
        "TIB": 1024**4,
    }
    cleaned = text.strip().upper().replace(" ", "")
    number = cleaned.rstrip("KMGTIB")
    unit = cleaned[len(number) :]
    try:
        value = Decimal(number)  # exact: "79.65GiB" must not pick up binary-float noise
    except InvalidOperation:
        value = Decimal(-1)
    if unit not in units or not value.is_finite() or value < 0 or value > 1 << 60 or (value == 0 and not allow_zero):
        raise UsageError(f"cannot read the size '{text}'", hint="Write a size like 24GiB, 80GB or 512MiB.")
    return int(value * units[unit])


def parse_tokens(text: str) -> int:
    """'131072', '128k' (= 131072), '1M' (= 1048576), '32K' -> tokens. k and M are binary (x1024)."""
    cleaned = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1024, "m": 1024**2}.get(cleaned[-1:], 1)
    digits = cleaned[:-1] if scale > 1 else cleaned
    if not _ASCII_DIGITS.fullmatch(digits) or int(digits) == 0:
        raise UsageError(
            f"cannot read the token count '{text}'",
            hint="Use a positive whole number of tokens: 8192, 32k (= 32768) or 1M (= 1048576).",
        )
    tokens = int(digits) * scale
    if tokens > 1 << 40:
        raise UsageError(f"token count '{text}' is beyond any model's context (over 2^40)")
    return tokens


def parse_count(text: str, what: str) -> int:
    """A positive whole number of things ('8' requests, '2' GPUs)."""
    cleaned = text.strip().replace("_", "")
    if not _ASCII_DIGITS.fullmatch(cleaned) or int(cleaned) == 0 or int(cleaned) > 1 << 40:
        raise UsageError(f"cannot read the {what} '{text}'", hint=f"Give the {what} as a positive whole number.")
    return int(cleaned)


def parse_fraction(text: str, what: str) -> float:
    """A share of memory in (0, 1]: '0.9', '0.92', '90%'."""
    cleaned = text.strip()
    try:
        value = float(cleaned[:-1]) / 100 if cleaned.endswith("%") else float(cleaned)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise UsageError(f"{what} must be a fraction in (0, 1], got '{text}'", hint="For example 0.9 or 90%.")
    return value


def format_bytes(n: int) -> str:
    """Binary units with two decimals: 17179869184 -> '16.00 GiB'; under 1 KiB in bytes."""
    if n < 0:
        return f"-{format_bytes(-n)}"
    if n < 1024:
        return f"{n} B"
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    raise AssertionError("unreachable")


def format_tokens(n: int) -> str:
    """131072 -> '128k', 1048576 -> '1M', 5000 -> '5000'."""
    if n % (1024**2) == 0:
        return f"{n // 1024**2}M"
    if n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)

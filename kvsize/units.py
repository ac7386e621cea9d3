"""Reading sizes, token counts, fractions and revisions users type (on the command line or in a capacity file),
and printing bytes in binary units.

One parser per kind of value, shared by the CLI, the capacity file and the Python API, so a value refused in one
place is refused everywhere. Numbers use ASCII digits only (`int('٢٤')` and `Decimal('٢٤')` would accept Arabic
digits) and are range-checked as exact integers or decimals before any float arithmetic sees them.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from kvsize.errors import UsageError

GIB = 1024**3
_ASCII_DIGITS = re.compile(r"[0-9]+")  # str.isdigit() also accepts '²', which int() then rejects
_ASCII_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:E[+-]?[0-9]{1,4})?", re.IGNORECASE)

# Upper bounds: far beyond any real deployment, small enough that no arithmetic on them overflows a float.
MAX_BYTES = 1 << 60
"""1 EiB: the largest memory size accepted (a card, an offload tier, weights, a KV budget)."""
MAX_TOKENS = 1 << 40
"""About 10^12 tokens: the largest context or token budget accepted."""
MAX_COUNT = 1 << 40
"""The largest count of requests or tokens per block accepted."""
MAX_GPUS = 1 << 16
"""65,536: the largest tensor-/pipeline-parallel size or GPU count accepted."""
MAX_LINK_GB_S = 100_000
"""100 TB/s: the fastest offload link accepted (NVLink-C2C is 0.9 TB/s)."""

_SIZE_UNITS = {
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


def _not_bool(value: object, what: str) -> None:
    if isinstance(value, bool):  # bool is an int subclass: `gpu_mem: true` must not read as 1 byte
        raise UsageError(f"{what} must be a number, not {str(value).lower()}")


def _shown(value: object) -> str:
    """`value` for an error message: long numbers and texts are cut (str() of a 5000-digit int even raises)."""
    if isinstance(value, int) and not -(10**30) < value < 10**30:
        return f"(a number of about {int(value.bit_length() * math.log10(2)) + 1} digits)"
    from kvsize.text import clean

    text = clean(value)
    return f"'{text[:60]}...'" if len(text) > 60 else f"'{text}'"


def _exact(number: int | float) -> Decimal | None:
    """An int or a finite float as an exact Decimal (math.isfinite() of a 400-digit int raises OverflowError)."""
    if isinstance(number, int):
        return Decimal(number)
    return Decimal(repr(number)) if math.isfinite(number) else None


def _decimal(text: str) -> Decimal | None:
    """An ASCII decimal number ('24', '1.5', '.5', '2e3'), or None."""
    cleaned = text.strip().replace("_", "")
    if not _ASCII_DECIMAL.fullmatch(cleaned):
        return None
    try:
        return Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the pattern only lets valid decimals through
        return None


def parse_size(text: str | int | float, *, allow_zero: bool = False, what: str = "size") -> int:
    """'24GiB', '80GB', '512MiB', '1.5TiB', '1000000' (or an int of bytes) -> bytes, at most MAX_BYTES."""
    _not_bool(text, what)
    problem = UsageError(
        f"cannot read the {what} {_shown(text)}",
        hint=f"Write a size like 24GiB, 80GB or 512MiB{', or 0' if allow_zero else ''} (at most 1 EiB).",
    )
    if isinstance(text, int):
        value = Decimal(text)
    elif isinstance(text, float):
        if not math.isfinite(text):
            raise problem
        value = Decimal(repr(text))
    elif not isinstance(text, str):  # a list, a mapping, a date from YAML
        raise problem
    else:
        cleaned = text.strip().upper().replace(" ", "")
        number = cleaned.rstrip("KMGTIB")
        unit = cleaned[len(number) :]
        parsed = _decimal(number) if unit in _SIZE_UNITS else None
        if parsed is None:
            raise problem
        value = parsed * _SIZE_UNITS[unit]
    if value < 0 or value > MAX_BYTES or (int(value) == 0 and not allow_zero):  # 0.5 B is no memory either
        raise problem
    return int(value)


def parse_tokens(text: str | int, *, allow_zero: bool = False) -> int:
    """'131072', '128k' (= 131072), '1M' (= 1048576), '32K' (or an int) -> tokens, 1 (0 with `allow_zero`) to
    MAX_TOKENS. k and M are binary (x1024)."""
    _not_bool(text, "a token count")
    shown = _shown(text)
    if isinstance(text, int) and not 0 < text <= MAX_TOKENS:  # compare before str(): 10**5000 cannot be printed
        text = str(min(max(text, -1), MAX_TOKENS + 1))
    cleaned = str(text).strip().lower().replace("_", "").replace(",", "") if isinstance(text, (int, str)) else ""
    scale = {"k": 1024, "m": 1024**2}.get(cleaned[-1:], 1)
    digits = cleaned[:-1] if scale > 1 else cleaned
    if allow_zero and _ASCII_DIGITS.fullmatch(digits) and not digits.lstrip("0"):
        return 0
    if not _ASCII_DIGITS.fullmatch(digits) or not digits.lstrip("0"):
        lowest = "non-negative" if allow_zero else "positive"
        read_but_out_of_range = _ASCII_DIGITS.fullmatch(digits.removeprefix("-")) is not None
        raise UsageError(
            f"the token count must be {lowest}, got {shown}"
            if read_but_out_of_range
            else f"cannot read the token count {shown}",
            hint=f"Use a {lowest} whole number of tokens: 8192, 32k (= 32768) or 1M (= 1048576).",
        )
    if len(digits.lstrip("0")) > 15 or int(digits) * scale > MAX_TOKENS:  # int() never meets a huge string
        raise UsageError(f"token count {shown} is beyond any model's context (over 2^40)")
    return int(digits) * scale


def parse_count(text: str | int, what: str, *, maximum: int = MAX_COUNT, allow_zero: bool = False) -> int:
    """A positive whole number of things ('8' requests, '2' GPUs), at most `maximum`."""
    _not_bool(text, f"the {what}")
    shown = _shown(text)
    if isinstance(text, int) and not 0 <= text <= maximum:  # compare before str(): 10**5000 cannot be printed
        text = str(min(max(text, -1), maximum + 1))
    cleaned = str(text).strip().replace("_", "") if isinstance(text, (int, str)) else ""
    lowest = 0 if allow_zero else 1
    too_long = len(cleaned.lstrip("0")) > 20  # int() never meets a huge string
    negative = cleaned.startswith("-") and _ASCII_DIGITS.fullmatch(cleaned[1:]) is not None
    if negative or (_ASCII_DIGITS.fullmatch(cleaned) and (too_long or not lowest <= int(cleaned) <= maximum)):
        # Read, but out of range: say so rather than "cannot read" a plain number.
        raise UsageError(
            f"the {what} must be from {lowest} to {maximum:,}, got {shown}",
            hint=f"Give the {what} as a whole number from {lowest} to {maximum:,}.",
        )
    if not _ASCII_DIGITS.fullmatch(cleaned):
        raise UsageError(
            f"cannot read the {what} {shown}",
            hint=f"Give the {what} as a whole number from {lowest} to {maximum:,}.",
        )
    return int(cleaned)


def _number(text: str | float, what: str) -> Decimal | None:
    """An exact decimal of a number or an ASCII number string (no bools); None when it is neither."""
    _not_bool(text, what)
    if isinstance(text, (int, float)):
        return _exact(text)
    return _decimal(text) if isinstance(text, str) else None


def parse_number(text: str | float, what: str, *, maximum: int) -> float:
    """A positive finite number ('12', '12.5' or a number), above 0 and at most `maximum`; no bools."""
    value = _number(text, what)
    if value is None or not 0 < value <= maximum:
        raise UsageError(f"{what} must be a number above 0 and at most {maximum:,}, got {_shown(text)}")
    return float(value)


def parse_fraction(text: str | float, what: str) -> float:
    """A share of memory in (0, 1]: '0.9', '0.92', '90%' (or a number)."""
    _not_bool(text, what)
    value: Decimal | None = None
    if isinstance(text, (int, float)):
        value = _exact(text)
    elif isinstance(text, str):
        cleaned = text.strip()
        percent = cleaned.endswith("%")
        value = _decimal(cleaned[:-1] if percent else cleaned)
        if value is not None and percent:
            value /= 100
    if value is None or not 0 < value <= 1:
        raise UsageError(f"{what} must be a fraction in (0, 1], got {_shown(text)}", hint="For example 0.9 or 90%.")
    return float(value)


def parse_bandwidth(text: str | float, what: str = "link bandwidth") -> int:
    """GB/s ('64', '450', '0.9' or a number) -> bytes per second, above 0 and at most MAX_LINK_GB_S."""
    value = _number(text, what)
    if value is None or not 0 < value <= MAX_LINK_GB_S or int(value * 10**9) == 0:
        raise UsageError(
            f"cannot read the {what} {_shown(text)}", hint=f"Give GB/s, e.g. 64 or 450 (at most {MAX_LINK_GB_S:,})."
        )
    return int(value * 10**9)


def parse_tolerance(text: str | float, what: str = "tolerance") -> float:
    """A relative tolerance in [0, 1] ('0.02', or a number)."""
    value = _number(text, what)
    if value is None or not 0 <= value <= 1:
        raise UsageError(f"{what} must be a number from 0 to 1, got {_shown(text)}", hint="For example 0.02 (2%).")
    return float(value)


# git check-ref-format's rules (git/refs.c check_refname_component): no control characters, space, '~', '^',
# ':', '?', '*', '[' or '\\'; no '..' and no '@{'; no component that starts with '.' or ends with '.lock'; no
# leading or trailing '/', no '//', no trailing '.'; not '@' alone. A leading '-' would read as an option.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|\s")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 object names
MAX_REVISION_CHARS = 255


def parse_revision(text: str) -> str:
    """A hub revision: a branch or tag name valid under `git check-ref-format` (refs/pr/1 included), or a full
    40- or 64-hex commit. Checked before any cache or network access: '../x' must never reach a cache path."""
    if not isinstance(text, str):
        raise UsageError(f"a revision must be text, got {_shown(text)}")
    if _COMMIT.fullmatch(text):
        return text
    components = text.split("/")
    bad = (
        not text
        or len(text) > MAX_REVISION_CHARS
        or _REF_FORBIDDEN.search(text) is not None
        or any(0x80 <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF for c in text)
        or text.startswith(("-", "/"))
        or text.endswith(("/", "."))
        or text == "@"
        or any(not part or part.startswith(".") or part.endswith(".lock") for part in components)
    )
    if bad:
        raise UsageError(
            f"{_shown(text)} is not a valid revision",
            hint="Give a branch or tag name (git check-ref-format rules: no '..', spaces, control characters, "
            "'~^:?*[\\', leading '-' or '.') or a full 40-hex commit.",
        )
    return text


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
    """131072 -> '128k', 1048576 -> '1M', 5000 -> '5,000'."""
    if n % (1024**2) == 0:
        return f"{n // 1024**2}M"
    if n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"

"""Making user text safe to print: terminals, rich markup, GitHub workflow commands and XML. Stdlib only.

Names, paths, model types and error messages come from files and command lines that kvsize does not control.
Printed raw, an ESC or CSI sequence can rewrite the terminal (hide a FAIL, set the title, fake a prompt), a
line break can forge a second GitHub annotation, and a control character makes a JUnit file ill-formed. Every
user string goes through `clean` before it is printed; the escapes keep the bad character visible.
"""

from __future__ import annotations

import re

# C0 controls (tab and line breaks included: printed values stay on one line), DEL, C1 controls (U+0080-U+009F,
# CSI = U+009B among them), lone surrogates (undecodable bytes under surrogateescape), the Unicode line and
# paragraph separators, bidirectional overrides and isolates ("Trojan Source", CVE-2021-42574), and the
# non-characters U+FFFE / U+FFFF (forbidden in XML 1.0).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffe\uffff]")


_JSON_UNSAFE = re.compile(_UNSAFE.pattern.replace("\x00-\x1f", "\x00-\x08\x0b\x0c\x0e-\x1f"))


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object) -> str:
    """`text` with every control or layout-changing character replaced by a visible escape: ESC -> '\\x1b',
    U+009B -> '\\x9b', a lone surrogate -> '\\udc80'. Printable text, non-ASCII letters included, is unchanged."""
    return _UNSAFE.sub(_escape_char, str(text))


def markup(text: object) -> str:
    """`clean(text)` with rich markup escaped, for user text inside a rich markup string."""
    from rich.markup import escape

    return escape(clean(text))


def workflow_message(text: object) -> str:
    """A GitHub Actions workflow command's message (after '::'): '%', CR and LF escaped, per the runner's
    `CommandStringEscapeMappings` (actions/runner src/Runner.Common/ActionCommand.cs)."""
    return clean(str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def workflow_property(text: object) -> str:
    """A workflow command's property value (file=..., title=...): the message escapes plus ':' and ',', which
    would otherwise end the value (`CommandPropertyEscapeMappings` in the same file)."""
    return workflow_message(text).replace(":", "%3A").replace(",", "%2C")


def json_safe(document: str) -> str:
    """A JSON document with the characters `clean` escapes written as JSON escapes ('\\u001b', '\\u009b'):
    the same data, but nothing that a terminal acts on. Serializers already escape C0 inside strings, and the
    layout's tabs and line breaks stay; the rest of `_UNSAFE` can only occur inside strings."""
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)

"""Making user text safe to print: terminals, rich markup, GitHub workflow commands and XML. Stdlib only.

Names, paths, model types and error messages come from files and command lines that kvsize does not control.
Printed raw, an ESC or CSI sequence can rewrite the terminal (hide a FAIL, set the title, fake a prompt), a
line break can forge a second GitHub annotation, and a control character makes a JUnit file ill-formed. Every
user string goes through `clean` before it is printed; the escapes keep the bad character visible.
"""

from __future__ import annotations

import re
from typing import Any

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
    U+009B -> '\\x9b', a lone surrogate -> '\\udc80'; a CI runner's command trigger is defused as CommandGuard does
    ('::' at the start, '##[' anywhere), so that a table lays out the text as it will be shown. Printable text,
    non-ASCII letters included, is otherwise unchanged."""
    return ci_safe(_UNSAFE.sub(_escape_char, str(text)))


def from_markup(text: str) -> Any:
    """rich Text from kvsize's own markup with user text inside (escaped by `markup`); emoji codes stay text, so
    a name such as ':secret:' is shown as written (rich would draw it as an emoji)."""
    from rich.text import Text

    return Text.from_markup(text, emoji=False)


def markup(text: object) -> str:
    """`clean(text)` with rich markup escaped, for user text inside a rich markup string."""
    from rich.markup import escape

    return escape(clean(text))


def workflow_message(text: object) -> str:
    """A GitHub Actions workflow command's message (after '::'): '%', CR and LF escaped, per the runner's
    `CommandStringEscapeMappings` (actions/runner src/Runner.Common/ActionCommand.cs)."""
    escaped = clean(str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))
    return escaped.replace("##[", "#\\x23[").replace("##vso[", "#\\x23vso[")  # as CommandGuard writes them


def workflow_property(text: object) -> str:
    """A workflow command's property value (file=..., title=...): the message escapes plus ':' and ',', which
    would otherwise end the value (`CommandPropertyEscapeMappings` in the same file)."""
    return workflow_message(text).replace(":", "%3A").replace(",", "%2C")


def json_safe(document: str) -> str:
    """A JSON document with the characters `clean` escapes written as JSON escapes ('\\u001b', '\\u009b'):
    the same data, but nothing that a terminal acts on. Serializers already escape C0 inside strings, and the
    layout's tabs and line breaks stay; the rest of `_UNSAFE` can only occur inside strings."""
    # '##[' and '##vso[' (CI runners' commands, found anywhere in a line) as '#\\u0023[': the same string to
    # a JSON reader, no command to a runner. A JSON line never starts with '::' (it is inside a string).
    safe = _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
    return safe.replace("##[", "#\\u0023[").replace("##vso[", "#\\u0023vso[")


# --- lines a CI runner reads as commands -------------------------------------------------------------------
# GitHub Actions runs a line as a workflow command when, after leading white space (.NET TrimStart: any Unicode
# white space), it starts with '::', and it finds the legacy '##[' anywhere in a line (actions/runner
# src/Runner.Worker/ActionCommandManager.cs TryProcessCommand -> ActionCommand.TryParseV2 / TryParse). Azure
# Pipelines' agent does the same for '##vso[' and '##[' anywhere (logging and formatting commands). Lines are
# split at LF, CR and CR LF (StreamReader.ReadLine). GitLab's section markers need '\r\x1b[0K' after them, which
# `clean` already escapes in user text. CommandGuard rewrites every such trigger on a whole output stream, so no
# user text (a deployment name, a model id, a path, an error) can forge a command; kvsize's own annotations are
# written past it (kvsize.cli.streams.workflow_command).

_WHITE = (
    rb"(?:[ \t\x0b\x0c\x1c-\x1f]|\xc2[\x85\xa0]|\xe1\x9a\x80|\xe2\x80[\x80-\x8a\xa8\xa9\xaf]|\xe2\x81\x9f|\xe3\x80\x80)"
)
# Colour codes at a line's start (CSI ... final byte) are skipped too: a log viewer that strips them would show
# the '::' behind them at the start of the line.
_CSI = rb"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]"
_LEADING_WHITE = re.compile(rb"\A(?:" + _WHITE + rb"|" + _CSI + rb")*")
_CSI_START = re.compile(rb"\A\x1b(?:\[[0-?]{0,32}[ -/]{0,8})?\Z")  # an escape sequence cut by the write's end
# Proper prefixes of a white-space character's UTF-8 bytes, so one split across two writes is still seen whole.
_WHITE_STARTS = (b"\xc2", b"\xe1", b"\xe1\x9a", b"\xe2", b"\xe2\x80", b"\xe2\x81", b"\xe3", b"\xe3\x80")
_TRIGGERS = (b"##[", b"##vso[")
_TRIGGER_STARTS = (b"#", b"##", b"##v", b"##vs", b"##vso")
_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


def _defuse(segment: bytes) -> bytes:
    # '#\x23[' reads as what it was and is no command; replace() scans left to right, so '###[' is defused too.
    return segment.replace(b"##[", b"#\\x23[").replace(b"##vso[", b"#\\x23vso[")


class CommandGuard:
    """A streaming rewrite of bytes on their way to a CI log: at a line's start (after white space) '::' becomes
    '\\x3a:', and '##[' / '##vso[' anywhere become '#\\x23[' / '#\\x23vso['. Everything else passes unchanged
    and at once, except the few bytes (at most 5) that could still begin a trigger, which wait for the next write
    or `finish`."""

    def __init__(self) -> None:
        self._held = b""
        self._line_start = True  # nothing but white space since the last line break

    def feed(self, data: bytes) -> bytes:
        text = self._held + data
        self._held = b""
        out: list[bytes] = []
        position = 0
        for brk in _LINE_BREAK.finditer(text):
            out.append(self._segment(text[position : brk.start()], final=True) + brk.group())
            self._line_start = True
            position = brk.end()
        out.append(self._segment(text[position:], final=False))
        return b"".join(out)

    def finish(self) -> bytes:
        """What is still held, rewritten as the end of the output."""
        held, self._held = self._held, b""
        return self._segment(held, final=True)

    def line_written_past(self) -> None:
        """A whole line (ending in a line break) went out past the guard: what follows starts a line."""
        self._line_start = True

    def _segment(self, segment: bytes, *, final: bool) -> bytes:
        """Rewrite one line's bytes (or its start); unless `final`, hold back a tail that may begin a trigger."""
        keep = 0
        if not final:
            keep = max((len(p) for p in _TRIGGER_STARTS if segment.endswith(p)), default=0)
        if self._line_start:
            lead = _LEADING_WHITE.match(segment)
            white = lead.end() if lead else 0
            rest = segment[white:]
            if not final and rest and (b"::".startswith(rest) or rest in _WHITE_STARTS or _CSI_START.match(rest)):
                self._held = rest
                return segment[:white]  # the line is still only white space so far
            if rest.startswith(b"::"):
                segment = segment[:white] + b"\\x3a" + rest[1:]
            if rest:
                self._line_start = False
        body = segment[: len(segment) - keep] if keep else segment
        self._held = segment[len(segment) - keep :] if keep else b""
        return _defuse(body)


def ci_safe(text: str) -> str:
    """`text` with every CI-runner trigger rewritten as CommandGuard does (for text that is not streamed)."""
    guard = CommandGuard()
    data = text.encode("utf-8", "surrogateescape")
    return (guard.feed(data) + guard.finish()).decode("utf-8", "surrogateescape")


def shown(value: object, limit: int = 60) -> str:
    """A parsed value for one line of an error message: its repr, cut to `limit` characters and cleaned. Never the
    whole of a huge list or text, and never str() of a 5,000-digit integer (which raises ValueError)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(10**30) < value < 10**30:
        return f"(a number of about {len(hex(value)) * 6 // 5} digits)"  # hex() has no digit limit
    if isinstance(value, (list, tuple, dict)) and len(value) > 20:
        kind = type(value).__name__
        return f"(a {kind} of {len(value):,} items)"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a nested huge integer, a list nested thousands deep
        return f"(a {type(value).__name__})"
    text = clean(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""The process's standard streams: glyphs that degrade on terminals that cannot show them, and output that
really reached its destination (a full disk or a closed stdout is exit 3, never a traceback and never exit 0 with
nothing written). A reader that went away (`kvsize gpus | head -1`) stopped reading on purpose: no message, and
exit 141, as a shell reports a program the SIGPIPE signal ended."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from kvsize.errors import ExitCode
from kvsize.text import CommandGuard

# What the tables, bars and notes draw, in ASCII, for streams whose encoding lacks them (PYTHONIOENCODING=ascii,
# a Latin-1 locale). Anything else unencodable is written as a backslash escape.
ASCII_GLYPHS = {
    "█": "#",
    "▓": "#",
    "▒": ":",
    "░": ".",
    "┃": "|",
    "│": "|",
    "║": "|",
    "━": "=",
    "─": "-",
    "═": "=",
    "╇": "+",
    "┼": "+",
    "╋": "+",
    "┿": "+",
    "…": "...",
    "×": "x",
    "≤": "<=",
    "≥": ">=",
    "≈": "~",
    "→": "->",
    "←": "<-",
    "↔": "<->",
    "—": "-",
    "–": "-",
    "•": "*",
    "·": ".",
    "✓": "ok",
    "✔": "ok",
    "✗": "x",
    "✘": "x",
    "⚠": "!",
    "µ": "u",
    "°": "deg",
}
ERROR_HANDLER = "kvsize-degrade"
# 128 + SIGPIPE (13): what `cat`, `grep` or `yes` exit with, as the shell sees it, when the reader of their pipe
# has gone. Not 0 (the output was not all read) and none of kvsize's own codes (1 is "the answer is no").
READER_GONE_EXIT = 141


def _degrade(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = []
    for char in error.object[error.start : error.end]:
        if char in ASCII_GLYPHS:
            out.append(ASCII_GLYPHS[char])
        elif ord(char) <= 0xFF:
            out.append(f"\\x{ord(char):02x}")
        elif 0xDC80 <= ord(char) <= 0xDCFF:  # a byte of a non-UTF-8 file name (surrogateescape)
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif ord(char) <= 0xFFFF:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return "".join(out), error.end


codecs.register_error(ERROR_HANDLER, _degrade)


class WatchedOutput(io.RawIOBase):
    """A standard stream's file descriptor, remembering the first write that failed: an OSError raised while
    printing is then known to be the output's own failure (exit 3), not a bug elsewhere. Every byte passes a
    kvsize.text.CommandGuard, so that no user text forms a CI runner's command (`::error`, `##[`, `##vso[`).
    Closing it leaves the descriptor open: it belongs to the process, as sys.stdout's does."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._guard = CommandGuard()
        self.failure: OSError | None = None

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def _write_all(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.failure = self.failure or exc
            raise

    def write(self, data: Any) -> int:
        self._write_all(self._guard.feed(bytes(data)))
        return len(data)

    def finish(self) -> None:
        """Write the few bytes the guard still holds (the end of the output)."""
        self._write_all(self._guard.finish())

    def write_unguarded(self, data: bytes) -> None:
        """A workflow command of kvsize's own, past the guard, at the start of a line."""
        pending = self._guard.finish()
        if pending and not pending.endswith((b"\n", b"\r")):
            pending += b"\n"  # the command must start a line of its own
        self._write_all(pending)
        self._write_all(data)
        self._guard.line_written_past()


_GUARDED: dict[str, WatchedOutput] = {}


def _guarded_stream(stream: Any, name: str) -> Any:
    """`stream` (sys.stdout or sys.stderr) rebuilt on a WatchedOutput of its descriptor; unchanged when it has
    no real descriptor (captured by a test runner)."""
    try:
        fd = stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):  # captured (StringIO, test runners)
        fd = -1
    if fd < 0 or not isinstance(stream, io.TextIOWrapper):
        return stream
    with contextlib.suppress(OSError, ValueError):
        stream.flush()
    watched = WatchedOutput(fd)
    _GUARDED[name] = watched
    return io.TextIOWrapper(
        io.BufferedWriter(watched),
        encoding=stream.encoding,
        errors=ERROR_HANDLER,
        line_buffering=stream.line_buffering,
        write_through=name == "stderr",  # stderr as Python keeps it: nothing waits in a buffer
    )


def prepare_streams() -> WatchedOutput | None:
    """Let stdout and stderr degrade unencodable characters instead of raising UnicodeEncodeError, and put both
    (when they are real file descriptors) on a WatchedOutput behind a CommandGuard."""
    sys.stdout = _guarded_stream(sys.stdout, "stdout")
    sys.stderr = _guarded_stream(sys.stderr, "stderr")
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is None:
            continue
        with contextlib.suppress(ValueError, OSError, TypeError):  # a stream that cannot change (detached)
            reconfigure(errors=ERROR_HANDLER)
    return _GUARDED.get("stdout")


def workflow_command(line: str) -> None:
    """One GitHub Actions workflow command of kvsize's own (its user text already escaped by
    kvsize.text.workflow_message / workflow_property) on stderr, past the guard that defuses everyone else's.
    A stderr that cannot be written loses the line, never the exit code."""
    if sys.stderr is None:
        return
    try:
        sys.stderr.flush()
        watched = _GUARDED.get("stderr")
        if watched is not None:
            watched.write_unguarded((line + "\n").encode(sys.stderr.encoding or "utf-8", ERROR_HANDLER))
        else:
            sys.stderr.write(line + "\n")
    except (OSError, ValueError):
        pass


def _stderr_line(text: str) -> None:
    if sys.stderr is None:
        return
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _output_failed(exc: BaseException | None) -> NoReturn:
    """Exit 3 with one `Error:` line, or, when the pipe's reader has gone (EPIPE), exit 141 without a word."""
    reader_gone = isinstance(exc, BrokenPipeError)
    if not reader_gone:
        reason = "standard output is closed"
        if isinstance(exc, OSError):
            reason = exc.strerror or type(exc).__name__
        elif exc is not None:
            reason = " ".join(str(exc).split()) or type(exc).__name__
        _stderr_line(
            f"Error: cannot write the output ({reason}). Check where stdout goes (a full disk, a closed stdout)."
        )
    # What is still buffered would fail again when Python flushes at exit (and turn the exit code into 120):
    # send it to /dev/null instead.
    try:
        if sys.stdout is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    _finish_stderr()  # a stderr as full as stdout must not turn exit 3 into Python's 120 at shutdown
    sys.exit(READER_GONE_EXIT if reader_gone else int(ExitCode.ENVIRONMENT))


def run_checked(app: Callable[[], Any]) -> NoReturn:
    """Run the app, then flush stdout: a failure to write the output is one `Error:` line and exit 3 (a reader
    that went away: exit 141, silently)."""
    if sys.stdout is None:  # started with stdout closed (`>&-`): nothing could ever be written
        _output_failed(None)
    watched = prepare_streams()
    code: Any = 0
    try:
        app()
    except SystemExit as exc:
        code = exc.code
    except (OSError, ValueError):
        if watched is None or watched.failure is None:
            raise
    if watched is not None and watched.failure is not None:
        # Also after an orderly exit: click and rich turn a broken pipe into exit 1 ("the check failed" here).
        _output_failed(watched.failure)
    try:
        sys.stdout.flush()
        if watched is not None:
            watched.finish()
    except (OSError, ValueError) as exc:
        _output_failed(exc)
    _finish_stderr()
    sys.exit(code)


def _finish_stderr() -> None:
    """Flush stderr; one that cannot be written (2>/dev/full, closed) loses its text but never changes the exit
    code (Python would report the failed flush at exit and exit 120)."""
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
        if "stderr" in _GUARDED:
            _GUARDED["stderr"].finish()
    except (OSError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
        except OSError:
            pass

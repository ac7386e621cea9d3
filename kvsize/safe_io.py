"""Reading input files without hanging or exhausting memory, and checking output files before any work.

Every file kvsize reads (config.json, capacity YAML, safetensors headers and indexes, cached hub files) goes
through here: the path is resolved (a symlink to /dev/zero is judged by its target), stat'ed, and read only when
it is a regular file under a size cap. A FIFO would block the open() forever and a character device such as
/dev/zero would grow a read() until MemoryError, so neither is ever opened for reading: the file is opened with
O_NONBLOCK and checked again with fstat on the descriptor (closing the gap between stat and open).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from kvsize.errors import ConfigError

KIB = 1024
MIB = 1024 * KIB


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def open_regular(path: Path, *, what: str) -> tuple[int, int]:
    """Open `path` for reading if it is a regular file: (file descriptor, size in bytes). Raises ConfigError for
    anything else (missing, unreadable, a folder, a FIFO, a device), never blocking on the open."""
    try:
        target = os.path.realpath(path)  # judge a link by what it points at
        info = os.stat(target)
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL byte
        reason = _why(exc) if isinstance(exc, OSError) else "not a usable path"
        raise ConfigError(f"{path}: cannot read it ({reason})", hint=f"Give the path of the {what}.") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: the {what} is {_kind(info.st_mode)}", hint="Give a regular file.")
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({_why(exc)})", hint=f"Check the {what}.") from None
    try:
        info = os.fstat(fd)  # the file may have been swapped between the stat and the open
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: the {what} is {_kind(info.st_mode)}", hint="Give a regular file.")
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_small_file(path: Path, *, max_bytes: int, what: str) -> bytes:
    """The whole content of a regular file of at most `max_bytes`, else a one-line ConfigError."""
    fd, size = open_regular(path, what=what)
    try:
        if size > max_bytes:
            raise ConfigError(
                f"{path}: the {what} is too large ({size:,} bytes; the limit is {max_bytes:,})",
                hint=f"Check that this is really the {what}.",
            )
        chunks: list[bytes] = []
        total = 0
        while True:  # bounded: stops at end of file or one byte past the cap (a file growing while read)
            chunk = os.read(fd, min(1 * MIB, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise ConfigError(f"{path}: the {what} grew past {max_bytes:,} bytes while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({_why(exc)})", hint=f"Check the {what}.") from None
    finally:
        os.close(fd)


def read_small_text(path: Path, *, max_bytes: int, what: str) -> str:
    """`read_small_file` decoded as UTF-8 (strict: a byte-order mark is left for the parser to refuse)."""
    data = read_small_file(path, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: the {what} is not UTF-8 text (byte {exc.start})", hint=f"Give the {what} as UTF-8."
        ) from None


def read_prefix(path: Path, *, size: int, offset: int = 0, what: str) -> bytes:
    """Up to `size` bytes at `offset` of a regular file (a safetensors header), never more."""
    fd, _ = open_regular(path, what=what)
    try:
        chunks: list[bytes] = []
        left = size
        while left > 0:
            chunk = os.pread(fd, min(left, 1 * MIB), offset + size - left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({_why(exc)})", hint=f"Check the {what}.") from None
    finally:
        os.close(fd)


# --- output files (--junit, --plot, --report, --save-calibration) ---------------------------------------------
# One rule for every option that writes a file. A path that cannot name a file as given (empty, its folder
# missing, a folder, a FIFO) is bad input, exit 2: checked before any work. A path the system then
# refuses (permission, a read-only or pseudo file system such as /proc, a full disk, a quota, an I/O error) is
# the environment, exit 3, as for standard output above (README "Exit codes and errors").


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def output_path(
    path: str | os.PathLike[str], option: str, *, inputs: Sequence[str | os.PathLike[str] | None] = ()
) -> Path:
    """The file `option` will write, checked before any work; raises UsageError (exit 2) for a path that
    cannot be a file or is one of the run's `inputs` (writing it would destroy what is being read),
    EnvironmentProblem (exit 3) for a folder the user may not write in."""
    from kvsize.errors import EnvironmentProblem, UsageError
    from kvsize.resolve import printable

    shown = printable(str(path))
    for given in inputs:
        if given is not None and str(given).strip() and str(path).strip():
            try:
                same = _same_file(Path(path).expanduser(), Path(given).expanduser())
            except RuntimeError:  # '~unknown-user'
                same = False
            if same:
                raise UsageError(
                    f"{option}: '{shown}' is also an input of this run; writing it would overwrite it",
                    hint=f"Give {option} another path.",
                )
    if not str(path).strip():
        raise UsageError(f"{option}: empty path", hint=f"Give {option} the path of a file to write.")
    try:
        target = Path(path).expanduser()
    except RuntimeError:  # '~unknown-user/...'
        raise UsageError(f"{option}: cannot expand '{shown}'", hint="Give an absolute or relative path.") from None
    try:
        info: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise EnvironmentProblem(f"{option}: cannot use '{shown}' ({exc.strerror or type(exc).__name__})") from None
    # A character device (/dev/null, /dev/full) takes writes without blocking; a FIFO would block, a folder
    # or a socket cannot be written at all.
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode)):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UsageError(f"{option}: '{shown}' is {what}", hint=f"Give {option} the path of a file to write.")
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(
            f"{option}: the folder '{printable(str(folder))}' does not exist",
            hint="Create it first, or choose another path.",
        )
    if not os.access(folder, os.W_OK | os.X_OK) or (info is not None and not os.access(target, os.W_OK)):
        raise EnvironmentProblem(f"{option}: no permission to write '{shown}'", hint="Choose a writable path.")
    return target


def write_output(target: Path, data: str | bytes, option: str) -> None:
    """Write `data` to `target` (checked by output_path); any refusal now is the environment: exit 3."""
    from kvsize.errors import EnvironmentProblem
    from kvsize.resolve import printable

    try:
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(data, encoding="utf-8")
    except OSError as exc:  # a full disk, a quota, /proc refusing a new file, a folder that vanished
        raise EnvironmentProblem(
            f"{option}: cannot write {printable(str(target))} ({exc.strerror or type(exc).__name__})",
            hint="Check the disk (space, quota) and the path, or choose another path.",
        ) from None

"""--plot: KV memory and maximum concurrency against context length, with the card's KV budget drawn.

matplotlib is an optional extra (`pip install -e ".[plot]"` in the kvsize clone: kvsize is not on PyPI),
imported only here.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from kvsize.errors import EnvironmentProblem, MissingExtra, UsageError

if TYPE_CHECKING:
    from kvsize.api import Estimate
    from kvsize.spec import ArchSpec

GIB = 1024**3
PLOT_INSTALL_HINT = 'Install the extra in the kvsize clone\'s folder (kvsize is not on PyPI): pip install -e ".[plot]"'
POINTS = 48


def write_plot(result: Estimate, path: str, *, spec: ArchSpec) -> Path:
    """Draw, for the first scenario's engine, dtype and batch, KV bytes (left axis) and the requests of each
    context that fit (right axis) from 1k tokens to the largest context asked for."""
    target = plot_target(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingExtra("--plot needs matplotlib", hint=PLOT_INSTALL_HINT) from None
    from kvsize.engines import get_engine

    first = result.scenarios[0]
    engine = get_engine(first.engine, first.engine_version)
    top = max(s.ctx for s in result.scenarios)
    contexts = sorted({max(1024, top * i // POINTS) for i in range(1, POINTS + 1)})
    sizes = [
        engine.estimate(spec, ctx=c, batch=first.batch, kv_dtype=first.kv_dtype, tp=first.tp, pp=first.pp)
        for c in contexts
    ]
    fig, left = plt.subplots(figsize=(8, 4.5))
    left.plot(contexts, [e.kv_cache_bytes_per_gpu / GIB for e in sizes], label=f"KV cache, batch {first.batch}")
    left.set_xlabel("context (tokens)")
    left.set_ylabel("GiB per GPU")
    if first.gpu is not None and first.gpu.kv_budget_bytes > 0:
        budget = first.gpu.kv_budget_bytes
        left.axhline(budget / GIB, color="tab:red", linestyle="--", label=f"KV budget on {first.gpu.name}")
        right = left.twinx()
        right.plot(
            contexts,
            [budget // (e.kv_cache_bytes_per_gpu // first.batch) for e in sizes],
            color="tab:green",
            label="max concurrent requests",
        )
        right.set_ylabel("requests that fit")
        right.legend(loc="upper right")
    left.legend(loc="upper left")
    left.set_title(f"{result.model} - {first.engine} {first.engine_version}, {first.kv_dtype.value}")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format=target.suffix.lower().lstrip("."))
    plt.close(fig)
    try:
        target.write_bytes(image.getvalue())
    except OSError as exc:  # a full disk, a quota, a file that vanished
        raise EnvironmentProblem(
            f"--plot: cannot write {target} ({exc.strerror or type(exc).__name__})",
            hint="Check the disk (space, quota) and the path, or choose another path.",
        ) from None
    return target


def plot_target(path: str) -> Path:
    """The file --plot will write, checked before any work: `~` expanded, a .png or .svg name, in an existing
    folder, and not a folder, pipe or device itself (writing a FIFO would block)."""
    from kvsize.resolve import printable

    shown = printable(path)
    try:
        target = Path(path).expanduser()
    except RuntimeError:  # '~unknown-user/...'
        raise UsageError(f"--plot: cannot expand '{shown}'", hint="Give an absolute or relative path.") from None
    if target.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot writes .png or .svg files, got '{shown}'")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise UsageError(f"--plot: cannot use '{shown}' ({exc.strerror or type(exc).__name__})") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise UsageError(f"--plot: '{shown}' is {what}", hint="Give the path of a .png or .svg file to write.")
    folder = target.parent
    if not folder.is_dir():
        raise UsageError(
            f"--plot: the folder '{printable(str(folder))}' does not exist",
            hint="Create it first, or choose another path.",
        )
    if not os.access(folder, os.W_OK | os.X_OK) or (info is not None and not os.access(target, os.W_OK)):
        raise UsageError(f"--plot: no permission to write '{shown}'", hint="Choose a writable path.")
    return target

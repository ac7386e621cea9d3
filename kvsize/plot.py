"""--plot: KV memory and maximum concurrency against context length, with the card's KV budget drawn.

matplotlib is an optional extra (`pip install -e ".[plot]"` in the kvsize clone: kvsize is not on PyPI),
imported only here.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsize.errors import MissingExtra, UsageError

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
    if result.latency:  # --itl: a second panel, decode speed against context
        fig, (left, below) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
        _latency_panel(below, result, spec, contexts)
    else:
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
    from kvsize.safe_io import write_output

    write_output(target, image.getvalue(), "--plot")  # a full disk, a quota, /proc: exit 3
    return target


def decode_speed_curves(result: Estimate, spec: ArchSpec, contexts: list[int]) -> dict[int, list[float]]:
    """Per batch of the --itl rows: the decode tokens/s bound of one request at each context, 1 / ITL bound,
    with the ITL bound's own terms (kvsize.fit latency_bounds): the weights a step reads at that batch (the row's
    figure, which does not depend on the context) plus batch x one request's KV at the context, over the
    bandwidth. It falls as the context grows: every step reads the whole cache."""
    from kvsize.engines import get_engine
    from kvsize.fit import request_bytes

    first = result.scenarios[0]
    engine = get_engine(first.engine, first.engine_version)
    per_request = [request_bytes(engine, spec, c, first.kv_dtype, first.tp, first.pp) for c in contexts]
    curves: dict[int, list[float]] = {}
    for row in result.latency:
        if row.batch not in curves:
            curves[row.batch] = [
                row.bandwidth_bytes_per_s / (row.weights_read_bytes + row.batch * kv) for kv in per_request
            ]
    return curves


def _latency_panel(axes: Any, result: Estimate, spec: ArchSpec, contexts: list[int]) -> None:
    for batch, speeds in decode_speed_curves(result, spec, contexts).items():
        axes.plot(contexts, speeds, label=f"batch {batch}")
    target = result.latency[0].itl_target_ms
    axes.axhline(1000 / target, color="tab:red", linestyle="--", label=f"ITL {target:g} ms")
    axes.set_xlabel("context (tokens)")
    axes.set_ylabel("decode tok/s per request (bound)")
    axes.set_title("roofline upper bound on decode speed (1 / ITL lower bound)")
    axes.legend(loc="upper right")


def plot_target(path: str) -> Path:
    """The file --plot will write, checked before any work: `~` expanded, a .png or .svg name, in an existing
    folder, and not a folder, pipe or device itself (writing a FIFO would block)."""
    from kvsize.resolve import printable
    from kvsize.safe_io import output_path

    if Path(path).suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot writes .png or .svg files, got '{printable(path)}'")
    return output_path(path, "--plot")  # the rule every output file follows (kvsize/safe_io.py)

"""A serving benchmark's measured figures (`--bench-result FILE`), to set against kvsize's latency bounds.

Read, as each tool writes them (the key and label names are the tools' own):
- `vllm bench serve --save-result` JSON, one object, or JSON lines with `--append-result`
  (vllm 0.33.0 vllm/benchmarks/serve.py: benchmark() builds `result`, main() adds `model_id` and
  `max_concurrency`; vllm 0.8.5 benchmarks/benchmark_serving.py writes the same keys);
- `python -m sglang.bench_serving --output-file` JSON lines, one per run (sglang 0.5.9 sglang/bench_serving.py
  run_benchmark: `result`; the measured mean `concurrency` and `accept_length` are SGLang's own);
- either tool's console summary, the "{:<40} {:<10}" lines they print ("Maximum request concurrency:" in vLLM,
  "Max request concurrency:" in SGLang, "Median ITL (ms):", "Output token throughput (tok/s):", ...).

Only the figures the bounds compare are kept; a run without them is refused by name, never guessed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from kvsize.errors import UsageError
from kvsize.record import Record
from kvsize.text import shown

MAX_BENCH_BYTES = 64 << 20  # `--save-detailed` results carry every request's ITLs: tens of MB for big runs
MAX_RUNS = 1000


class BenchRun(Record, frozen=True, kw_only=True):
    """One benchmark run's figures, as the tool reported them."""

    label: str
    """Where it came from: `FILE`, or `FILE #N` for the Nth line of a JSON-lines file."""
    tool: str
    """vllm bench serve, or sglang.bench_serving (json / console)."""
    model_id: str | None
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    max_concurrency: int | None
    """The benchmark's --max-concurrency: requests in flight at once (None: not set)."""
    mean_concurrency: float | None
    """SGLang's measured mean requests in flight (sum of latencies / duration)."""
    median_itl_ms: float | None
    median_ttft_ms: float | None
    median_tpot_ms: float | None
    output_tokens_per_s: float | None
    accept_length: float | None
    """Speculative decoding: mean tokens accepted per step (SGLang accept_length, vLLM
    spec_decode_acceptance_length); None without speculation."""


_JSON_KEYS = {
    "completed": "completed",
    "total_input_tokens": "total_input_tokens",
    "total_output_tokens": "total_output_tokens",
    "max_concurrency": "max_concurrency",
    "mean_concurrency": "concurrency",
    "median_itl_ms": "median_itl_ms",
    "median_ttft_ms": "median_ttft_ms",
    "median_tpot_ms": "median_tpot_ms",
    "output_tokens_per_s": "output_throughput",
}
_NUMBER = r"(-?\d+(?:\.\d+)?|not set|None)"
# Console labels, each the tool's own text; values are the "{:<10}" / "{:<10.2f}" numbers after them.
_CONSOLE_LABELS = {
    "completed": ("Successful requests",),
    "total_input_tokens": ("Total input tokens",),
    "total_output_tokens": ("Total generated tokens",),
    "max_concurrency": ("Maximum request concurrency", "Max request concurrency"),
    "mean_concurrency": ("Concurrency",),
    "median_itl_ms": ("Median ITL (ms)",),
    "median_ttft_ms": ("Median TTFT (ms)",),
    "median_tpot_ms": ("Median TPOT (ms)",),
    "output_tokens_per_s": ("Output token throughput (tok/s)",),
    "accept_length": ("Accept length", "Acceptance length"),
}
_CONSOLE = {
    field: re.compile(rf"^[ \t]*(?:{'|'.join(re.escape(label) for label in labels)}):[ \t]+{_NUMBER}[ \t]*$", re.M)
    for field, labels in _CONSOLE_LABELS.items()
}
_RESULT_BANNER = re.compile(r"=+ Serving Benchmark Result =+")


def read_bench_results(path: str) -> list[BenchRun]:
    """Every run in the file at `path` (exit 2 when it holds none, or one lacks what the bounds compare)."""
    from kvsize.resolve import printable
    from kvsize.safe_io import read_small_text

    name = printable(path)
    text = read_small_text(Path(path).expanduser(), max_bytes=MAX_BENCH_BYTES, what="--bench-result file")
    stripped = text.lstrip()
    if stripped.startswith("{"):
        records = _json_records(text, name)
        runs = [_from_json(record, f"{name} #{i}" if len(records) > 1 else name) for i, record in enumerate(records, 1)]
    else:
        runs = _from_console(text, name)
    if not runs:
        raise UsageError(
            f"--bench-result: '{name}' holds no serving benchmark result",
            hint="Give the JSON of `vllm bench serve --save-result`, the JSON lines of `python -m "
            "sglang.bench_serving --output-file`, or either tool's printed summary.",
        )
    return runs


def _json_records(text: str, name: str) -> list[dict[str, Any]]:
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return [whole]
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise UsageError(
                f"--bench-result: line {number} of '{name}' is not JSON",
                hint="A JSON-lines result holds one JSON object per line, as the benchmark appends them.",
            ) from None
        if not isinstance(record, dict):
            raise UsageError(f"--bench-result: line {number} of '{name}' is not a JSON object")
        records.append(record)
        if len(records) > MAX_RUNS:
            raise UsageError(f"--bench-result: '{name}' holds more than {MAX_RUNS:,} runs")
    return records


def _from_json(record: dict[str, Any], label: str) -> BenchRun:
    values = {field: _number(record.get(key), key, label) for field, key in _JSON_KEYS.items()}
    accept = record.get("accept_length", record.get("spec_decode_acceptance_length"))
    values["accept_length"] = _number(accept, "accept_length", label)
    model = record.get("model_id")
    tool = (
        "sglang.bench_serving"
        if "total_output_tokens_retokenized" in record or "concurrency" in record
        else ("vllm bench serve")
    )
    return _run(values, label=label, tool=f"{tool} (json)", model=model if isinstance(model, str) else None)


def _from_console(text: str, name: str) -> list[BenchRun]:
    # One summary per "Serving Benchmark Result" banner (a sweep prints several); a file without the banner is
    # read as one summary.
    starts = [m.start() for m in _RESULT_BANNER.finditer(text)] or [0]
    pieces = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    runs = []
    for i, piece in enumerate(pieces, 1):
        values: dict[str, float | None] = {}
        for field, pattern in _CONSOLE.items():
            found = pattern.search(piece)
            values[field] = _number(found.group(1) if found else None, _CONSOLE_LABELS[field][0], name)
        if values["completed"] is None and values["median_itl_ms"] is None:
            continue
        # vLLM prints its concurrency before the banner (0.8.5: a plain print ahead of the run).
        if values["max_concurrency"] is None and i == 1 and starts[0] > 0:
            found = _CONSOLE["max_concurrency"].search(text[: starts[0]])
            values["max_concurrency"] = _number(found.group(1) if found else None, "concurrency", name)
        tool = "sglang.bench_serving" if "Backend:" in piece else "vllm bench serve"
        runs.append(_run(values, label=f"{name} #{i}" if len(pieces) > 1 else name, tool=f"{tool} (console)"))
        if len(runs) > MAX_RUNS:
            raise UsageError(f"--bench-result: '{name}' holds more than {MAX_RUNS:,} runs")
    return runs


def _number(value: object, key: str, label: str) -> float | None:
    if value is None or value in ("not set", "None"):
        return None
    if isinstance(value, bool):
        raise UsageError(f"--bench-result: {key} in '{label}' is {value}, not a number")
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise UsageError(f"--bench-result: {key} in '{label}' is {shown(value)}, not a number") from None
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value < 1e15:
        raise UsageError(f"--bench-result: {key} in '{label}' is {shown(value)}, not a measured figure")
    return float(value)


def _run(values: dict[str, float | None], *, label: str, tool: str, model: str | None = None) -> BenchRun:
    missing = [k for k in ("completed", "total_input_tokens", "total_output_tokens") if not values.get(k)]
    if missing:
        raise UsageError(
            f"--bench-result: '{label}' has no {', '.join(missing)} (a run that completed no request?)",
            hint="Give a finished run's result; failed runs carry no token counts to bound.",
        )

    def whole(field: str) -> int | None:
        value = values.get(field)
        return None if value is None else int(value)

    return BenchRun(
        label=label,
        tool=tool,
        model_id=model,
        completed=int(values["completed"] or 0),
        total_input_tokens=int(values["total_input_tokens"] or 0),
        total_output_tokens=int(values["total_output_tokens"] or 0),
        max_concurrency=whole("max_concurrency") or None,
        mean_concurrency=values.get("mean_concurrency"),
        median_itl_ms=values.get("median_itl_ms"),
        median_ttft_ms=values.get("median_ttft_ms"),
        median_tpot_ms=values.get("median_tpot_ms"),
        output_tokens_per_s=values.get("output_tokens_per_s"),
        accept_length=values.get("accept_length") or None,
    )

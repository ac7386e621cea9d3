"""`--workload FILE`: (prompt, output) token counts of real requests, as CSV or YAML.

CSV: one `prompt,output` row per request; a first line that is not two numbers is a header.
YAML (safe loading only): a list of rows, or a mapping with `requests:` (rows) or `percentiles:` (named rows
such as p50 / p99, each counted as one sample). A row is `[prompt, output]` or `{prompt: P, output: O}`.
Size-capped and row-capped; every error names the file and the row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

import yaml

from kvsize.errors import ConfigError

MAX_WORKLOAD_BYTES = 1024 * 1024
MAX_WORKLOAD_ROWS = 20_000


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"{where}: expected a whole number of tokens, got {value!r}")
    try:
        number = int(str(value).strip().replace("_", ""))
    except ValueError:
        raise ConfigError(f"{where}: expected a whole number of tokens, got {value!r}") from None
    if number < 1 or number > 1 << 40:
        raise ConfigError(f"{where}: token counts must be positive, got {number}")
    return number


def _row(item: object, where: str) -> tuple[int, int]:
    if isinstance(item, Mapping):
        if set(item) != {"prompt", "output"}:
            raise ConfigError(f"{where}: a row needs exactly the keys prompt and output, got {sorted(map(str, item))}")
        return _count(item["prompt"], f"{where} prompt"), _count(item["output"], f"{where} output")
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return _count(item[0], f"{where} prompt"), _count(item[1], f"{where} output")
    raise ConfigError(f"{where}: a row is [prompt, output] or {{prompt: P, output: O}}, got {item!r}"[:200])


def parse_workload(text: str, *, source: str) -> list[tuple[int, int]]:
    """Rows of a workload file's text."""
    if len(text.encode()) > MAX_WORKLOAD_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_WORKLOAD_BYTES} bytes", hint="Give percentiles or a sample.")
    if source.lower().endswith(".csv"):
        rows = []
        for number, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
            cells = [f.strip() for f in fields if f.strip()]
            if not cells or cells[0].startswith("#"):
                continue
            if number == 1 and not all(c.replace("_", "").isdigit() for c in cells):
                continue  # header
            if len(cells) != 2:
                raise ConfigError(f"{source}: line {number}: expected prompt,output, got {','.join(cells)[:80]!r}")
            rows.append(_row(cells, f"{source}: line {number}"))
            if len(rows) > MAX_WORKLOAD_ROWS:
                raise ConfigError(f"{source}: more than {MAX_WORKLOAD_ROWS} rows", hint="Give a sample or percentiles.")
    else:
        try:
            from kvsize.strict_yaml import StrictSafeLoader

            data = yaml.load(text, Loader=StrictSafeLoader)  # noqa: S506 (a safe loader; duplicate keys refused)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: invalid YAML ({' '.join(str(exc).split())[:160]})") from None
        items: list[tuple[str, object]]
        if isinstance(data, Mapping) and set(data) <= {"requests", "percentiles"} and data:
            items = []
            if isinstance(data.get("requests"), list):
                items += [(f"requests[{i}]", v) for i, v in enumerate(data["requests"])]
            elif "requests" in data:
                raise ConfigError(f"{source}: 'requests' must be a list of rows")
            if isinstance(data.get("percentiles"), Mapping):
                items += [(f"percentiles.{k}", v) for k, v in data["percentiles"].items()]
            elif "percentiles" in data:
                raise ConfigError(f"{source}: 'percentiles' must map names (p50, p99) to rows")
        elif isinstance(data, list):
            items = [(f"row {i + 1}", v) for i, v in enumerate(data)]
        else:
            raise ConfigError(
                f"{source}: expected a list of [prompt, output] rows, or 'requests:' / 'percentiles:'",
                hint="Or give a CSV file of prompt,output lines.",
            )
        if len(items) > MAX_WORKLOAD_ROWS:
            raise ConfigError(f"{source}: more than {MAX_WORKLOAD_ROWS} rows", hint="Give a sample or percentiles.")
        rows = [_row(v, f"{source}: {where}") for where, v in items]
    if not rows:
        raise ConfigError(f"{source}: holds no (prompt, output) rows")
    return rows


def load_workload(path: str) -> list[tuple[int, int]]:
    """A workload file from disk: a regular file (never a FIFO or device) of at most MAX_WORKLOAD_BYTES."""
    from kvsize.safe_io import read_small_text

    text = read_small_text(Path(path).expanduser(), max_bytes=MAX_WORKLOAD_BYTES, what="workload file")
    return parse_workload(text, source=str(path))

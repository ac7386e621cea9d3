"""`--workload FILE`: (prompt, output) token counts of real requests, as CSV or YAML.

CSV: one `prompt,output` row per request. A first line of names is a header naming the two columns in any
order (case-insensitive; `input`, `prompt_tokens`, `input_len` ... for the prompt, `completion_tokens`,
`output_tokens`, `output_len` ... for the output); without one the columns are prompt, output. Lines starting
with '#' are comments.
YAML (kvsize.strict_yaml: safe, bounded): a list of rows, or a mapping with `requests:` (rows) or
`percentiles:` (named rows such as p50 / p99, each counted as one sample). A row is `[prompt, output]` or
`{prompt: P, output: O}` (the same names as a CSV header).
A UTF-8 byte-order mark is ignored. Size-capped and row-capped; every error names the file and the row, and every
token count goes through kvsize.units.parse_tokens, the reader of --prompt-len and the API's `workload` rows.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from pathlib import Path

from kvsize.errors import ConfigError, KvsizeError

MAX_WORKLOAD_BYTES = 1024 * 1024
MAX_WORKLOAD_ROWS = 20_000
MAX_SHOWN_CHARS = 80

# A column (or a mapping row's key) -> what it holds, after lower-casing and ' ' / '-' -> '_'.
COLUMN_NAMES: dict[str, str] = {
    **dict.fromkeys(("prompt", "input", "prompt_tokens", "input_tokens", "prompt_len", "input_len"), "prompt"),
    **dict.fromkeys(
        ("output", "completion", "output_tokens", "completion_tokens", "output_len", "completion_len"), "output"
    ),
}
_NAMES_HINT = "Name the columns prompt and output (or input / prompt_tokens and completion_tokens / output_tokens)."
_NUMBER_START = re.compile(r"\s*[-+.0-9]")


def shown(value: object) -> str:
    """`value` quoted for a message: cleaned of control characters and cut to MAX_SHOWN_CHARS (no repr of a
    whole parsed value; a huge int is not even converted)."""
    from kvsize.text import clean

    if isinstance(value, int) and not isinstance(value, bool) and not -(10**30) < value < 10**30:
        return f"(a number of {value.bit_length()} bits)"
    if value is None or isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, (Mapping, list, tuple, set)):
        count = len(value)
        return f"a {type(value).__name__} of {count} {'value' if count == 1 else 'values'}"
    if not isinstance(value, str):
        return f"a {clean(type(value).__name__)[:MAX_SHOWN_CHARS]}"
    text = clean(value)
    return f"'{text[:MAX_SHOWN_CHARS]}...'" if len(text) > MAX_SHOWN_CHARS else f"'{text}'"


def _column(name: object) -> str | None:
    if not isinstance(name, str):
        return None
    return COLUMN_NAMES.get(re.sub(r"[\s-]+", "_", name.strip().lower()))


def _tokens(value: object, where: str, error: type[KvsizeError]) -> int:
    from kvsize.units import parse_tokens

    try:
        return parse_tokens(value)  # type: ignore[arg-type]  # the reader refuses any other type itself
    except KvsizeError as exc:
        raise error(f"{where}: {exc}", hint=exc.hint) from None


def read_request(item: object, where: str, error: type[KvsizeError] = ConfigError) -> tuple[int, int]:
    """One (prompt, output) row: `[P, O]` or `{prompt: P, output: O}` (aliases as in a CSV header), each count
    read by parse_tokens. The one row reader of workload files and of the API's `workload=`; raises `error`."""
    if isinstance(item, Mapping):
        named: dict[str, object] = {}
        for key, value in item.items():
            column = _column(key)
            if column is None or column in named:
                problem = "names its count twice" if column else f"has an unknown key {shown(key)}"
                raise error(f"{where}: the row {problem}", hint=_NAMES_HINT)
            named[column] = value
        if len(named) != 2:
            raise error(f"{where}: a row needs both prompt and output", hint=_NAMES_HINT)
        return _tokens(named["prompt"], f"{where} prompt", error), _tokens(named["output"], f"{where} output", error)
    if isinstance(item, (list, tuple)) and len(item) == 2:
        return _tokens(item[0], f"{where} prompt", error), _tokens(item[1], f"{where} output", error)
    raise error(f"{where}: a row is [prompt, output] or {{prompt: P, output: O}}, got {shown(item)}")


def _header(cells: list[str], where: str) -> tuple[int, int] | None:
    """(prompt column, output column) when `cells` is a header; None when it is data (a cell is a number)."""
    if any(_NUMBER_START.match(c) for c in cells):
        return None
    columns = [_column(c) for c in cells]
    for cell, column in zip(cells, columns, strict=True):
        if column is None:
            raise ConfigError(f"{where}: unknown column {shown(cell)} in the header", hint=_NAMES_HINT)
    if sorted(c for c in columns if c) != ["output", "prompt"]:
        raise ConfigError(f"{where}: the header must name prompt and output once each", hint=_NAMES_HINT)
    return columns.index("prompt"), columns.index("output")


def _csv_rows(text: str, source: str) -> list[tuple[int, int]]:
    rows: list[tuple[int, int]] = []
    order: tuple[int, int] | None = None
    reader = csv.reader(io.StringIO(text))
    try:
        for fields in reader:
            where = f"{source}: line {reader.line_num}"
            cells = [f.strip() for f in fields]
            while cells and not cells[-1]:
                cells.pop()  # trailing commas (spreadsheet exports)
            if not cells or cells[0].startswith("#"):
                continue
            if order is None and not rows:
                order = _header(cells, where)
                if order is not None:
                    continue
            if len(cells) != 2:
                got = ",".join(cells)
                raise ConfigError(f"{where}: expected two cells (prompt,output), got {len(cells)}: {shown(got)}")
            prompt, output = order or (0, 1)
            rows.append(read_request((cells[prompt], cells[output]), where))
            if len(rows) > MAX_WORKLOAD_ROWS:
                raise ConfigError(f"{source}: more than {MAX_WORKLOAD_ROWS} rows", hint="Give a sample or percentiles.")
    except csv.Error as exc:  # a field over csv's size limit, a NUL byte, a quote left open
        problem = " ".join(str(exc).split())[:MAX_SHOWN_CHARS]
        raise ConfigError(f"{source}: line {reader.line_num}: not CSV ({problem})") from None
    return rows


def _yaml_rows(text: str, source: str) -> list[tuple[int, int]]:
    from kvsize.strict_yaml import load_yaml_data

    data = load_yaml_data(text, source=source, what="workload file")
    items: list[tuple[str, object]]
    if isinstance(data, Mapping) and data and set(data) <= {"requests", "percentiles"}:
        items = []
        requests, percentiles = data.get("requests"), data.get("percentiles")
        if isinstance(requests, list):
            items += [(f"requests[{i}]", v) for i, v in enumerate(requests)]
        elif "requests" in data:
            raise ConfigError(f"{source}: 'requests' must be a list of rows")
        if isinstance(percentiles, Mapping):
            from kvsize.text import clean

            items += [(f"percentiles.{clean(k)[:MAX_SHOWN_CHARS]}", v) for k, v in percentiles.items()]
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
    return [read_request(v, f"{source}: {where}") for where, v in items]


def parse_workload(text: str, *, source: str) -> list[tuple[int, int]]:
    """Rows of a workload file's text (a leading byte-order mark ignored)."""
    if len(text) > MAX_WORKLOAD_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_WORKLOAD_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_WORKLOAD_BYTES} bytes", hint="Give percentiles or a sample.")
    text = text.removeprefix("\ufeff")
    rows = _csv_rows(text, source) if source.lower().endswith(".csv") else _yaml_rows(text, source)
    if not rows:
        raise ConfigError(f"{source}: holds no (prompt, output) rows")
    return rows


def load_workload(path: str) -> list[tuple[int, int]]:
    """A workload file from disk: a regular file (never a FIFO or device) of at most MAX_WORKLOAD_BYTES, UTF-8
    with or without a byte-order mark."""
    from kvsize.safe_io import read_small_file
    from kvsize.text import clean

    where = Path(path).expanduser()
    data = read_small_file(where, max_bytes=MAX_WORKLOAD_BYTES, what="workload file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{clean(path)}: the workload file is not UTF-8 text (byte {exc.start})", hint="Save it as UTF-8."
        ) from None
    return parse_workload(text, source=clean(path))

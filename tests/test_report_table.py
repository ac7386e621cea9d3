"""The long-table fast path (kvsize/report_table.py) draws what rich's Table draws, character for character,
whenever every column has room for its widest cell."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kvsize.report_table import natural_widths, table_text

cell = st.text(alphabet="abcxyz019,.-/ _GiBé", min_size=0, max_size=12).map(str.strip)  # cells as kvsize writes them


def _drawn(renderable: object, width: int) -> str:
    console = Console(width=width, color_system=None, legacy_windows=False)
    with console.capture() as captured:
        console.print(renderable, no_wrap=True, overflow="ignore")
    return captured.get()


@settings(max_examples=150, deadline=None)
@given(
    columns=st.integers(min_value=1, max_value=6).flatmap(
        lambda n: st.tuples(
            st.lists(cell.filter(str.strip), min_size=n, max_size=n),
            st.lists(st.sampled_from(["left", "right"]), min_size=n, max_size=n),
            st.lists(st.lists(cell, min_size=n, max_size=n), min_size=1, max_size=8),
        )
    )
)
def test_same_characters_as_rich(columns: tuple[list[str], list[str], list[list[str]]]) -> None:
    headers, justify, rows = columns
    cells = [[Text(c) for c in row] for row in rows]
    width = sum(w + 3 for w in natural_widths(headers, cells)) + 10  # every column has room
    table = Table(show_edge=False, expand=False)
    for header, how in zip(headers, justify, strict=True):
        table.add_column(header, justify="left" if how == "left" else "right", no_wrap=True, overflow="fold")
    for row in cells:
        table.add_row(*row)
    assert _drawn(table_text(headers, justify, cells), width) == _drawn(table, width)


def test_cell_styles_are_kept() -> None:
    text = table_text(["result"], ["left"], [[Text.from_markup("[green]pass[/]")]])
    assert any(span.style == "green" for span in text.spans)

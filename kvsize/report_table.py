"""A long table drawn as lines of text, in rich's own layout, when no cell needs wrapping.

rich lays a Table out cell by cell, and re-measures and re-renders every cell: about 1 ms a row, so a
`kvsize check` of 1,000 deployments spent more on its table than on sizing them (issue 20). When every column
has room for its widest cell, the layout rich would choose is fixed: each column as wide as its widest cell
(header included), a space either side, `┃` between header cells and `│` between body cells, and a `━`/`╇`
rule under the header (rich.table.Table defaults: box.HEAVY_HEAD, show_edge=False, padding (0, 1)). Those lines
are built here as one Text: the same characters, drawn in one pass (tests/test_report_table.py compares the two
on the same tables).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Span, Text

FAST_ROWS = 100  # below this rich's own table is fast enough, and stays the one renderer of short tables


def natural_widths(headers: Sequence[str], rows: Sequence[Sequence[Text]]) -> list[int]:
    return [max([Text(h).cell_len, *(row[i].cell_len for row in rows)]) for i, h in enumerate(headers)]


def table_text(headers: Sequence[str], justify: Sequence[str], rows: Sequence[Sequence[Text]]) -> Text:
    """The table's lines, every column at its natural width (the caller checks that they fit). Built as one
    string with its style spans: appending Text objects cell by cell would cost as much as rich's layout."""
    widths = natural_widths(headers, rows)
    pieces: list[str] = []
    spans: list[Span] = []
    at = 0

    def cell(text: Text, how: str, width: int, style: str = "") -> None:
        nonlocal at
        gap = " " * (width - text.cell_len)
        left, right = ("", gap) if how == "left" else (gap, "")
        shown = f" {left}{text.plain}{right} "
        if style:
            spans.append(Span(at, at + len(shown), style))
        else:
            start = at + 1 + len(left)
            if text.style:
                spans.append(Span(start, start + len(text.plain), text.style))
            spans.extend(Span(start + s.start, start + s.end, s.style) for s in text.spans)
        pieces.append(shown)
        at += len(shown)

    def line(cells: Sequence[Text], bar: str, style: str = "") -> None:
        nonlocal at
        for i, (text, how, width) in enumerate(zip(cells, justify, widths, strict=True)):
            if i:
                pieces.append(bar)
                at += len(bar)
            cell(text, how, width, style)
        pieces.append("\n")
        at += 1

    line([Text(h) for h in headers], "┃", "bold")
    rule = "╇".join("━" * (w + 2) for w in widths) + "\n"
    pieces.append(rule)
    at += len(rule)
    for row in rows:
        line(row, "│")
    return Text("".join(pieces).removesuffix("\n"), spans=spans)

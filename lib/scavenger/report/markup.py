"""HTML pieces of the report: every value escaped and bounded (safe.html_text), tables whose number cells carry
their exact value (``<td data-value="repr(float)">``), plots as inline base64 PNGs."""
from __future__ import annotations

import base64
import math

import numpy as np
import pandas as pd

from . import figures
from .numbers import is_num


def _esc(x) -> str:
    """Every value on the page: bounded (a 10 MiB id shows its first characters and its length), control
    characters escaped, HTML-escaped (safe.html_text)."""
    from ..safe import html_text

    return html_text("" if x is None else x)


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA or v is pd.NaT:
        return '<td class="num" data-value="nan">&ndash;</td>'
    if is_num(v):
        f = float(v)
        if isinstance(v, (int, np.integer)):
            return f'<td class="num" data-value="{int(v)}">{int(v):,}</td>'
        if math.isfinite(f) and f.is_integer() and abs(f) >= 1 and abs(f) < 1e15:
            text = f"{int(f):,}"
        else:
            text = f"{f:.4g}" if math.isfinite(f) else str(f)
        return f'<td class="num" data-value="{f!r}">{text}</td>'
    if isinstance(v, (list, tuple, np.ndarray)):
        return f"<td>{_esc(', '.join(str(x) for x in v))}</td>"
    return f"<td>{_esc(v)}</td>"


def html_table(df: pd.DataFrame | None, name: str, columns: list[str] | None = None,
               cell_class: dict | None = None, cell_text: dict | None = None) -> str:
    """A table with ``data-table=name``, one ``<tr>`` per row, numbers carrying their exact value; ``cell_text``
    {column: fn(row) -> text or None} shows a text in a cell instead (its ``data-value`` kept)."""
    if df is None or not len(df):
        return f'<p class="missing" data-table="{_esc(name)}">no rows</p>'
    columns = [c for c in (columns or list(df.columns)) if c in df.columns]
    head = "".join(f"<th>{_esc(c)}</th>" for c in columns)
    body = []
    for rec in df.to_dict("records"):
        cells = []
        for c in columns:
            td = _cell(rec[c])
            if cell_text and c in cell_text and (text := cell_text[c](rec)) is not None:
                td = td[:td.index(">") + 1].replace('class="num"', 'class="why"') + _esc(text) + "</td>"
            if cell_class and c in cell_class:
                td = td.replace("<td", f'<td class="{_esc(cell_class[c](rec[c]))}"', 1)
            cells.append(td.replace("<td", f'<td data-col="{_esc(c)}"', 1))
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f'<table data-table="{_esc(name)}"><thead><tr>{head}</tr></thead><tbody>' + "".join(body)
            + "</tbody></table>")


def img(fig, alt: str) -> str:
    """A Figure as an inline base64 PNG (or a note when there is nothing to draw)."""
    if fig is None:
        return f'<p class="missing">no data for: {_esc(alt)}</p>'
    data = base64.b64encode(figures.to_png(fig)).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _missing(what: str, flag: str) -> str:
    return f'<p class="missing">No {what} given (pass {flag}).</p>'

"""Values great-expectations can render safely.

GE's Data Docs write the unexpected values of an expectation (``partial_unexpected_list``) into the page as raw
HTML, while they escape the expected ones. A value from the data (a type name holding a hostile field name, an id)
would then run as script in a reader's browser. So every string a suite sees is made inert first:

- a value the suite itself expects (a ``value_set`` entry of an expectation on that column) is kept as it is, so
  the expectation still matches it (and GE escapes what it expects);
- any other string is bounded and control-escaped (safe.clip) and HTML-escaped (``&``, ``<``, ``>``, quotes):
  raw in the page it shows as the text it was; it cannot equal an expected value containing ``<``, so what
  failed still fails.
"""
from __future__ import annotations

import html

from ..safe import MAX_VALUE, clip


def _expected(expectations: list, column: str) -> set:
    out = set()
    for e in expectations:
        kw = e.get("kwargs", {}) if isinstance(e, dict) else getattr(e, "kwargs", {})
        if kw.get("column") == column and isinstance(kw.get("value_set"), (list, tuple)):
            out |= {v for v in kw["value_set"] if isinstance(v, str)}
    return out


def inert(value, keep: set) -> object:
    """One cell: kept when expected (or not a string), else bounded, control-escaped and HTML-escaped."""
    if not isinstance(value, str) or value in keep:
        return value
    return html.escape(clip(value, MAX_VALUE), quote=True)


def safe_frame(frame, expectations: list):
    """``frame`` (pandas or Spark) with every string column made inert (see the module docstring)."""
    if hasattr(frame, "iloc"):
        out = frame.copy()
        for c in out.columns:
            if out[c].dtype == object:
                keep = _expected(expectations, c)
                out[c] = [inert(v, keep) for v in out[c]]
        return out
    return _safe_spark(frame, expectations)


def _safe_spark(frame, expectations: list):
    from pyspark.sql import functions as F

    cols = []
    for f in frame.schema.fields:
        col = F.col(f"`{f.name}`")
        if f.dataType.simpleString() == "string":
            esc = F.substring(col, 1, MAX_VALUE)
            for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"), ("'", "&#x27;")):
                esc = F.regexp_replace(esc, a, b)
            keep = sorted(_expected(expectations, f.name))
            col = F.when(col.isin(*keep), col).otherwise(esc) if keep else esc
        cols.append(col.alias(f.name))
    return frame.select(*cols)

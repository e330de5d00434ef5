"""What an estimate shows where the data support no number (issue 26, items 1 and 2): an estimate the data cannot
identify reads "not identified: <reason>", an identified one whose interval is infinite or undefined "no interval:
<reason>". Used by every table and plot of the report that shows estimates."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd


def honest_text(rec: dict) -> str | None:
    """What an estimate shows instead of a number the data do not support: "not identified: <reason>" (the data
    cannot identify it), "no interval: <reason>" (identified, but its interval is infinite or undefined); None for
    an estimate with a finite interval."""
    reason = rec.get("reason")
    reason = reason if isinstance(reason, str) and reason else "no reason recorded"
    ident = rec.get("identified", True)
    if ident is not None and ident is not pd.NA and not (isinstance(ident, float) and math.isnan(ident)) \
            and not bool(ident):
        return f"not identified: {reason}"
    lo, hi = rec.get("ci_low"), rec.get("ci_high")
    if not all(isinstance(x, (int, float, np.integer, np.floating)) and math.isfinite(float(x)) for x in (lo, hi)):
        return f"no interval: {reason}"
    return None


def text_when(prefix: str):
    """A ``html_table`` cell_text function: the row's honest_text when it starts with ``prefix``."""
    def text(rec):
        t = honest_text(rec)
        return t if t and t.startswith(prefix) else None
    return text

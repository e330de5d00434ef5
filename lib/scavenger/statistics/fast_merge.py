"""The merge's group-by (statistics/tables.merge) in numpy, for the usual table: numeric sums, numeric or text maxima
and minima, keys without nulls. A by-day window or a running/ prefix merges six small tables (tens of rows), and
pandas' group-by spent 2-5 ms on each, building its index and frames: about a quarter of a window's time.

The result equals pandas' (``groupby(keys, sort=True).sum()/min()/max()`` then ``reset_index``): the same rows in
the same order (the keys' sort order), the same columns and dtypes (an integer sum as int64, a maximum in its
column's dtype, a text maximum as an object column), nulls of a sum counted 0, a maximum over nulls only null.
tests/test_statistics_fast_merge.py checks it against pandas on random tables.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

_NUMERIC = ("i", "u", "f", "b")


def key_codes(df: pd.DataFrame, keys: list) -> np.ndarray | None:
    """One int64 code per row whose order is the keys' lexicographic sort order (each key factorized sorted), or
    None when a key holds a null or a type numpy cannot order (pandas' path then)."""
    code = np.zeros(len(df), dtype=np.int64)
    span = 1
    for k in keys:
        col = df[k]
        if not isinstance(col.dtype, np.dtype) or (col.dtype == object and not _all_text(col)):
            return None
        c, uniq = pd.factorize(col, sort=True)
        if len(c) and c.min() < 0:
            return None
        span *= max(len(uniq), 1)
        if span >= 2 ** 62:
            return None
        code = code * max(len(uniq), 1) + c
    return code


def _all_text(col: pd.Series) -> bool:
    return all(isinstance(v, str) for v in col.unique())


def grouped(df: pd.DataFrame, keys: list, agg: dict) -> pd.DataFrame | None:
    """``df`` grouped by ``keys`` (sorted), each column of ``agg`` reduced by its rule ("sum", "max", "min"), as
    ``keys + list(agg)`` columns; None where this path does not apply (see the module doc)."""
    if not keys or not len(df) or any(h not in ("sum", "max", "min") for h in agg.values()):
        return None
    kinds, dtypes = {}, dict(zip(df.columns, df.dtypes))     # one lookup (a column made per column: 5 ms)
    for c, how in agg.items():
        dtype = dtypes[c]
        if isinstance(dtype, np.dtype) and dtype.kind in _NUMERIC:
            kinds[c] = dtype
        elif how != "sum" and dtype == object and _all_text(df[c].dropna()):
            kinds[c] = "text"
        else:
            return None
    code = key_codes(df, keys)
    if code is None:
        return None
    uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(len(uniq)))
    arrays = {c: s.to_numpy() for c, s in df.items()}     # each column's array (a frame per selection: 0.1 ms)
    out = {k: arrays[k][first] for k in keys}
    buckets: dict = {}
    for c, how in agg.items():
        buckets.setdefault((how, str(kinds[c])), []).append(c)
    for (how, kind), cols in buckets.items():
        if kind == "text":
            for c in cols:
                out[c] = _text_extreme(arrays[c], how, order, starts)
            continue
        block = np.column_stack([arrays[c] for c in cols])[order]
        reduced = _reduce(block, how, starts)
        for j, c in enumerate(cols):
            out[c] = reduced[:, j]
    return pd.DataFrame({c: out[c] for c in [*keys, *agg]})


def _reduce(block: np.ndarray, how: str, starts: np.ndarray) -> np.ndarray:
    """Each group's sum (nulls as 0; integers and booleans as int64), maximum or minimum (nulls skipped) of the rows
    of ``block`` sorted by group (``starts``: each group's first row)."""
    kind = block.dtype.kind
    if how == "sum":
        if kind == "f":
            block = np.where(np.isnan(block), 0.0, block)
        elif kind in ("i", "u", "b"):
            block = block.astype(np.int64)
        return np.add.reduceat(block, starts, axis=0)
    if kind == "f":
        return (np.fmax if how == "max" else np.fmin).reduceat(block, starts, axis=0)
    return (np.maximum if how == "max" else np.minimum).reduceat(block, starts, axis=0)


def _text_extreme(col: np.ndarray, how: str, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each group's largest or smallest text (string order) of ``col``, None where the group holds none."""
    codes, uniq = pd.factorize(col, sort=True)          # nulls: -1
    codes = codes[order]
    if how == "max":
        best = np.maximum.reduceat(codes, starts)
    else:
        best = np.minimum.reduceat(np.where(codes < 0, len(uniq), codes), starts)
        best = np.where(best >= len(uniq), -1, best)
    values = np.asarray(uniq, dtype=object)
    return np.array([values[b] if b >= 0 else None for b in best], dtype=object)
